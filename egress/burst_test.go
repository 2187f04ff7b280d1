package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// burstWriter stores the frames of one request as the agent runtime does
// when it writes bursts: several consecutive frames in one response
// message (natstest.PublishBurst), each message fenced on the previous one.
type burstWriter struct {
	t    testing.TB
	nc   *nats.Conn
	w    *writer
	last uint64 // stream sequence of the last message
}

// bursts submits a new request with id and returns the writer of its
// bursts.
func (e *testEnv) bursts(t testing.TB, id string) *burstWriter {
	return &burstWriter{t: t, nc: e.nc, w: e.running(t, id)}
}

// frames returns the JSON of the next n frames: text chunks, the last one
// a final e2a.complete frame when final.
func (b *burstWriter) frames(n int, final bool) [][]byte {
	b.t.Helper()
	out := make([][]byte, n)
	for i := range out {
		f := b.w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: fmt.Sprintf("t%d ", b.w.seq)})
		if final && i == n-1 {
			f = b.w.frame(e2a.KindComplete, true, e2a.StatusSucceeded, e2a.CompleteBody{Result: "done"})
		}
		data, err := json.Marshal(f)
		if err != nil {
			b.t.Fatal(err)
		}
		out[i] = data
		b.w.seq++
	}
	return out
}

// write stores the next n frames as one message (a burst when n > 1) and
// returns them.
func (b *burstWriter) write(n int, final bool) [][]byte {
	b.t.Helper()
	first := b.w.seq
	frames := b.frames(n, final)
	b.last = natstest.PublishBurst(b.t, b.nc, b.w.env.RequestID, first, b.last, frames...)
	return frames
}

// store writes the layout every burst test reads: frame 0 alone, a burst
// of frames 1..5, and a burst of frames 6..8 ending with the final frame
// (when final). It returns the frames.
func (b *burstWriter) store(final bool) [][]byte {
	b.t.Helper()
	all := b.write(1, false)
	all = append(all, b.write(5, false)...)
	return append(all, b.write(3, final)...)
}

// publishRaw stores data on the response subject of id with the frame
// headers given (E2A-Sequence first, E2A-Frames count when not empty), as
// is, fenced on expected; it returns the stream sequence.
func publishRaw(t testing.TB, js jetstream.JetStream, id string, first int64, count string, data []byte, expected uint64) uint64 {
	t.Helper()
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subj)
	m.Header.Set(subjects.HeaderRequestID, id)
	m.Header.Set(subjects.HeaderSequence, strconv.FormatInt(first, 10))
	if count != "" {
		m.Header.Set(subjects.HeaderFrames, count)
	}
	m.Data = data
	ack, err := js.PublishMsg(t.Context(), m, jetstream.WithExpectLastSequencePerSubject(expected))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// checkBurstFrames checks that got are the frames want[from:], in order,
// each Raw exactly its own frame's bytes (not the burst's), with the
// sequence, finality and kind of its body, decoded or read from its head.
func checkBurstFrames(t testing.TB, got []render.Frame, want [][]byte, from int64) {
	t.Helper()
	if from > int64(len(want)) {
		from = int64(len(want))
	}
	if len(got) != len(want)-int(from) {
		t.Fatalf("from %d: %d frames, want %d", from, len(got), len(want)-int(from))
	}
	for i := range got {
		f := &got[i]
		seq := from + int64(i)
		if !bytes.Equal(f.Raw, want[seq]) || cap(f.Raw) != len(f.Raw) {
			t.Fatalf("from %d: frame %d is %q (cap %d), want %q", from, seq, f.Raw, cap(f.Raw), want[seq])
		}
		if f.Sequence() != seq || f.IsFinal() != (seq == int64(len(want))-1) || f.StreamSeq == 0 {
			t.Fatalf("from %d: frame %d read as sequence %d, final %v, stream sequence %d", from, seq, f.Sequence(), f.IsFinal(), f.StreamSeq)
		}
		r, err := f.Decoded()
		if err != nil || r.Sequence != seq || r.ResponseKind != f.Kind() {
			t.Fatalf("from %d: frame %d decodes as %+v, %v", from, seq, r, err)
		}
	}
}

// decodeModes are the two ways a reader reads frames: decoded whole (Open,
// Replay, the protocol renderers) and head only (the E2A pass-through
// renderers).
var decodeModes = []struct {
	name string
	opts []ReplayOption
}{{"decoded", nil}, {"head", []ReplayOption{WithoutDecode()}}}

// TestReplayBursts: a request stored as frame 0 alone, a burst of frames
// 1..5 and a burst of 6..8 ending with the final frame replays as frames
// 0..8, one by one, from any resume point (in the middle of a burst too),
// whatever the direct get batch.
func TestReplayBursts(t *testing.T) {
	e := startEnv(t)
	want := e.bursts(t, "burst_1").store(true)
	e.finished(t, "burst_other", 2) // interleaved, must not leak in
	for _, m := range decodeModes {
		for _, batch := range []int{1, 2, DefaultBatch} {
			for from := int64(0); from <= 10; from++ {
				got, err := collect(t, t.Context(), e.nc, "burst_1", from, append([]ReplayOption{WithBatch(batch, 0)}, m.opts...)...)
				if err != nil {
					t.Fatalf("%s, batch %d, from %d: %v", m.name, batch, from, err)
				}
				checkBurstFrames(t, got, want, from)
			}
		}
	}
}

// livePolls keeps a reader on its live subscription: its polls of the
// stream are an hour away.
func livePolls() []ReplayOption {
	return []ReplayOption{WithPollInterval(time.Hour), func(c *replayConfig) error { c.firstPoll = time.Hour; return nil }}
}

// readAllFrames reads r to its end.
func readAllFrames(t testing.TB, r *Reader) []render.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out []render.Frame
	for {
		f, err := r.Next(ctx)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("after %d frames: %v", len(out), err)
		}
		out = append(out, f)
	}
}

// TestReplayBurstsLive: a reader opened before any frame takes the bursts
// from its live subscription (its polls are an hour away, and it drops
// nothing), from the start or from the middle of a burst.
func TestReplayBurstsLive(t *testing.T) {
	e := startEnv(t)
	for _, m := range decodeModes {
		for _, from := range []int64{0, 3, 6} {
			id := fmt.Sprintf("burst_live_%s_%d", m.name, from)
			b := e.bursts(t, id)
			r, err := Open(t.Context(), e.nc, id, from, append(livePolls(), m.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			want := b.store(true)
			got := readAllFrames(t, r)
			checkBurstFrames(t, got, want, from)
			if n, _ := r.sub.Dropped(); n != 0 {
				t.Fatalf("%d live messages dropped", n)
			}
		}
	}
}

// TestReplayBurstSeenTwice: a burst stored between the reader's subscription
// and its read of the stream comes both ways, whole: the stream's copy is
// delivered, the live copy dropped, and the next burst taken live.
func TestReplayBurstSeenTwice(t *testing.T) {
	e := startEnv(t)
	mux, err := streams.NewDirectGetter(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	for _, from := range []int64{0, 3} {
		id := fmt.Sprintf("burst_twice_%d", from)
		b := e.bursts(t, id)
		want := b.write(1, false)
		var once sync.Once
		get := func(ctx context.Context, stream, subject string, start uint64, batch, maxBytes int, fn func(uint64, nats.Header, []byte) error) (uint64, error) {
			once.Do(func() { want = append(want, b.write(5, false)...) })
			return mux.GetBatch(ctx, stream, subject, start, batch, maxBytes, fn)
		}
		r, err := Open(t.Context(), e.nc, id, from, append(livePolls(), withMux(mux), func(c *replayConfig) error { c.get = get; return nil })...)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var got []render.Frame
		for range 6 - from {
			f, ok, err := r.NextStored(t.Context())
			if err != nil || !ok {
				t.Fatalf("from %d: stored frame %d: %v %v", from, len(got), ok, err)
			}
			got = append(got, f)
		}
		// The burst was acknowledged, so republished to the reader's
		// connection before the pong of this flush.
		if err := e.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if len(r.live) != 1 {
			t.Fatalf("from %d: %d live messages waiting, want the burst's copy", from, len(r.live))
		}
		want = append(want, b.write(3, true)...)
		got = append(got, readAllFrames(t, r)...)
		checkBurstFrames(t, got, want, from)
	}
}

// TestReplayInvalidBurst: a burst that does not hold what its headers say,
// or whose frames are not the frames of their place, is an invalid frame,
// read from the stream or live, decoded or not.
func TestReplayInvalidBurst(t *testing.T) {
	e := startEnv(t)
	cases := []struct {
		name  string
		burst bool // the message is a well-formed burst
		write func(b *burstWriter) (first int64, count string, data []byte)
	}{
		{"three announced, two held", true, func(b *burstWriter) (int64, string, []byte) {
			f := b.frames(2, false)
			return 1, "3", bytes.Join(f, []byte("\n"))
		}},
		{"two announced, three held", true, func(b *burstWriter) (int64, string, []byte) {
			f := b.frames(3, false)
			return 1, "2", bytes.Join(f, []byte("\n"))
		}},
		{"trailing line feed", true, func(b *burstWriter) (int64, string, []byte) {
			f := b.frames(2, false)
			return 1, "2", append(bytes.Join(f, []byte("\n")), '\n')
		}},
		{"empty frame", true, func(b *burstWriter) (int64, string, []byte) {
			f := b.frames(2, false)
			return 1, "3", bytes.Join([][]byte{f[0], nil, f[1]}, []byte("\n"))
		}},
		{"empty payload", true, func(b *burstWriter) (int64, string, []byte) { return 1, "2", nil }},
		{"count not a number", true, func(b *burstWriter) (int64, string, []byte) {
			f := b.frames(2, false)
			return 1, "two", bytes.Join(f, []byte("\n"))
		}},
		{"count too large", true, func(b *burstWriter) (int64, string, []byte) {
			f := b.frames(2, false)
			return 1, strconv.Itoa(e2a.MaxBurstFrames + 1), bytes.Join(f, []byte("\n"))
		}},
		{"body sequence disagrees", false, func(b *burstWriter) (int64, string, []byte) {
			f := b.frames(3, false)
			return 1, "2", bytes.Join([][]byte{f[0], f[2]}, []byte("\n"))
		}},
		{"header sequence off", false, func(b *burstWriter) (int64, string, []byte) {
			f := b.frames(2, false)
			return 2, "2", bytes.Join(f, []byte("\n"))
		}},
		{"final frame not last", false, func(b *burstWriter) (int64, string, []byte) {
			f := b.frames(1, true)
			f = append(f, b.frames(1, false)...)
			return 1, "2", bytes.Join(f, []byte("\n"))
		}},
		{"frame not JSON", false, func(b *burstWriter) (int64, string, []byte) {
			f := b.frames(1, false)
			return 1, "2", append(f[0], "\n{nope"...)
		}},
	}
	for i, c := range cases {
		for _, m := range decodeModes {
			for _, live := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/live=%v", c.name, m.name, live)
				id := fmt.Sprintf("burst_bad_%d_%s_%v", i, m.name, live)
				b := e.bursts(t, id)
				b.write(1, false)
				var r *Reader
				if live {
					var err error
					if r, err = Open(t.Context(), e.nc, id, 0, append(livePolls(), m.opts...)...); err != nil {
						t.Fatal(err)
					}
					defer r.Close()
				}
				first, count, data := c.write(b)
				publishRaw(t, e.js, id, first, count, data, b.last)
				var err error
				var got []render.Frame
				if live {
					ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
					for err == nil {
						var f render.Frame
						if f, err = r.Next(ctx); err == nil {
							got = append(got, f)
						}
					}
					cancel()
				} else {
					got, err = collect(t, t.Context(), e.nc, id, 0, append([]ReplayOption{WithBatch(1, 0)}, m.opts...)...)
				}
				if !errors.Is(err, ErrInvalidFrame) || errors.Is(err, e2a.ErrInvalidBurst) != c.burst {
					t.Errorf("%s: %v, want an invalid frame (an invalid burst: %v)", name, err, c.burst)
				}
				// Frame 0 only: none of the burst's, valid or not.
				if len(got) != 1 || got[0].Sequence() != 0 {
					t.Errorf("%s: %d frames delivered, want frame 0 alone", name, len(got))
				}
			}
		}
	}
}

// TestAcceptBurstWhole: a burst is taken whole or not at all: an invalid
// frame late in it leaves the reader as it was, the valid burst is then
// taken.
func TestAcceptBurstWhole(t *testing.T) {
	w := &writer{env: newEnvelope("whole"), clock: time.Now()}
	b := &burstWriter{t: t, w: w}
	frames := b.frames(4, false)
	hdr := func(first, count string) nats.Header {
		h := nats.Header{}
		h.Set(subjects.HeaderSequence, first)
		if count != "" {
			h.Set(subjects.HeaderFrames, count)
		}
		return h
	}
	for _, m := range decodeModes {
		c := defaultReplayConfig()
		for _, o := range m.opts {
			o(&c)
		}
		r := &Reader{cfg: c, requestID: "whole"}
		if err := r.accept(1, hdr("0", ""), frames[0], false); err != nil || len(r.queue) != 1 {
			t.Fatalf("%s: frame 0: %v", m.name, err)
		}
		bad := bytes.Join([][]byte{frames[1], frames[2], frames[1]}, []byte("\n")) // the last one is frame 1 again
		if err := r.accept(2, hdr("1", "3"), bad, false); !errors.Is(err, ErrInvalidFrame) {
			t.Fatalf("%s: %v", m.name, err)
		}
		if len(r.queue) != 1 || r.next != 1 || r.lastSeq != 1 || r.done {
			t.Fatalf("%s: the invalid burst left %d frames queued, next %d, last stream sequence %d", m.name, len(r.queue), r.next, r.lastSeq)
		}
		good := bytes.Join(frames[1:], []byte("\n"))
		if err := r.accept(2, hdr("1", "3"), good, false); err != nil || len(r.queue) != 4 || r.next != 4 || r.lastSeq != 2 {
			t.Fatalf("%s: the valid burst: %v, %d frames queued", m.name, err, len(r.queue))
		}
		// The same message again (live after stored) is dropped whole.
		if err := r.accept(2, hdr("1", "3"), good, true); err != nil || len(r.queue) != 4 {
			t.Fatalf("%s: the burst again: %v, %d frames queued", m.name, err, len(r.queue))
		}
	}
}

// FuzzReaderAcceptBurst: whatever a message holds, accept never panics;
// it fails leaving the reader as it was, or queues consecutive frames from
// the next sequence to deliver, each with its own bytes.
func FuzzReaderAcceptBurst(f *testing.F) {
	w := &writer{env: newEnvelope("fuzz"), clock: time.Now()}
	b := &burstWriter{t: f, w: w}
	frames := b.frames(3, true)
	burst := bytes.Join(frames, []byte("\n"))
	f.Add("3", "0", burst, int64(0), false)
	f.Add("3", "0", burst, int64(1), true)
	f.Add("2", "1", bytes.Join(frames[1:], []byte("\n")), int64(0), false)
	f.Add("2", "1", bytes.Join(frames[1:], []byte("\n")), int64(1), true)
	f.Add("", "0", frames[0], int64(0), true)
	f.Add("1", "", frames[0], int64(0), false)
	f.Add("3", "", burst, int64(2), true)
	f.Add("3", "0", burst[:len(burst)-1], int64(0), false)
	f.Add("2", "0", []byte("\n"), int64(0), false)
	f.Fuzz(func(t *testing.T, count, first string, data []byte, next int64, lazy bool) {
		next = max(next, 0)
		h := nats.Header{}
		if first != "" {
			h.Set(subjects.HeaderSequence, first)
		}
		if count != "" {
			h.Set(subjects.HeaderFrames, count)
		}
		r := &Reader{cfg: defaultReplayConfig(), requestID: "fuzz", next: next}
		r.cfg.lazy = lazy
		err := r.accept(7, h, data, false)
		if err != nil {
			if len(r.queue) != 0 || r.next != next || r.lastSeq != 0 || r.done || r.any {
				t.Fatalf("%v, yet %d frames queued, next %d, last stream sequence %d, done %v", err, len(r.queue), r.next, r.lastSeq, r.done)
			}
			return
		}
		n, _ := e2a.BurstCount(count)
		for i, f := range r.queue {
			if f.Sequence() != next+int64(i) || f.StreamSeq != 7 || (n > 1 && (bytes.IndexByte(f.Raw, '\n') >= 0 || cap(f.Raw) != len(f.Raw))) {
				t.Fatalf("frame %d of %d: sequence %d, stream sequence %d, %q", i, len(r.queue), f.Sequence(), f.StreamSeq, f.Raw)
			}
			if f.IsFinal() && i != len(r.queue)-1 {
				t.Fatalf("final frame %d of %d", i, len(r.queue))
			}
		}
	})
}

// TestE2AJSONBursts: the aggregated JSON of a request stored in bursts
// holds every frame: its last stored frame (the last of a burst) gives the
// state, and a snapshot ends at it; with ?wait=true, the final frame of a
// final burst ends the wait.
func TestE2AJSONBursts(t *testing.T) {
	h := startHTTP(t)
	const id = "burst_json"
	b := h.bursts(t, id)
	want := b.write(1, false)
	want = append(want, b.write(5, false)...)
	check := func(path string, status int, state string, from int) {
		t.Helper()
		resp := h.get(t, path)
		var v RequestView
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != status || v.State != state || len(v.Frames) != len(want)-from || v.NextSequence != int64(len(want)) {
			t.Fatalf("%s: %d %s with %d frames, next %d; want %d %s with %d frames", path, resp.StatusCode, v.State, len(v.Frames), v.NextSequence, status, state, len(want)-from)
		}
		for i, raw := range v.Frames {
			if !bytes.Equal(raw, want[from+i]) {
				t.Fatalf("%s: frame %d is %s, want %s", path, from+i, raw, want[from+i])
			}
		}
	}
	check("/v1/requests/"+id, http.StatusAccepted, StateRunning, 0)
	check("/v1/requests/"+id+"?from=2", http.StatusAccepted, StateRunning, 2)
	if done, err := h.svc.Finished(t.Context(), id); err != nil || done {
		t.Fatalf("finished before the final burst: %v %v", done, err)
	}
	want = append(want, b.write(3, true)...)
	check("/v1/requests/"+id, http.StatusOK, StateSucceeded, 0)
	check("/v1/requests/"+id+"?wait=true", http.StatusOK, StateSucceeded, 0)
	check("/v1/requests/"+id+"?wait=true&from=7", http.StatusOK, StateSucceeded, 7)
	if done, err := h.svc.Finished(t.Context(), id); err != nil || !done {
		t.Fatalf("not finished after the final burst: %v %v", done, err)
	}
	last, err := h.svc.lastFrame(t.Context(), id)
	if err != nil || last == nil || last.seq != 8 || !last.final || last.streamSeq != b.last {
		t.Fatalf("last frame %+v, %v; want frame 8, final, at %d", last, err, b.last)
	}
	// An invalid last message is an invalid frame, not a guess.
	const bad = "burst_json_bad"
	bb := h.bursts(t, bad)
	bb.write(1, false)
	publishRaw(t, h.js, bad, 1, "3", bytes.Join(bb.frames(2, false), []byte("\n")), bb.last)
	if _, err := h.svc.lastFrame(t.Context(), bad); !errors.Is(err, ErrInvalidFrame) || !errors.Is(err, e2a.ErrInvalidBurst) {
		t.Fatalf("last frame of an invalid burst: %v", err)
	}
}

// TestE2ASSEBursts: E2A SSE over HTTP of a request stored in bursts: one
// event per frame, its data the frame as stored, resumable from the middle
// of a burst.
func TestE2ASSEBursts(t *testing.T) {
	h := startHTTP(t)
	want := h.bursts(t, "burst_sse").store(true)
	for _, last := range []int{-1, 0, 2, 6} {
		resp := h.get(t, "/v1/requests/burst_sse/stream", "Last-Event-ID", strconv.Itoa(last))
		var evs []sseEvent
		for _, ev := range readSSE(t, resp.Body) {
			if !ev.Comment {
				evs = append(evs, ev)
			}
		}
		if resp.StatusCode != http.StatusOK || len(evs) != len(want)-last-1 {
			t.Fatalf("after %d: %d with %d events, want %d", last, resp.StatusCode, len(evs), len(want)-last-1)
		}
		for i, ev := range evs {
			seq := last + 1 + i
			if ev.ID != strconv.Itoa(seq) || ev.Data != string(want[seq]) {
				t.Fatalf("after %d: event %d is %+v, want frame %d %s", last, i, ev, seq, want[seq])
			}
		}
	}
}
