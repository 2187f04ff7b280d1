package egress

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// The wait limits and heartbeats of a reader on synctest's clock, with the
// defaults (a poll of the stream every 2 s, a heartbeat every 15 s, 5 min
// for the first frame and 10 min between frames): every poll makes the
// reader's wait return and be entered again, which must not push back
// the heartbeats or the limits. No JetStream: the reader reads a
// fakeStream and its live channel, so that the whole wait runs in the
// bubble and takes no real time.

// fakeStream is the stored frames of one request, as the batch getter of
// a reader reads them, and its live subject's channel.
type fakeStream struct {
	mu   sync.Mutex
	msgs [][]byte // message i+1 of the stream (one frame each)
	live chan *nats.Msg
	w    *writer // builds the frames (no JetStream)
}

func newFakeStream(id string) *fakeStream {
	return &fakeStream{
		live: make(chan *nats.Msg, DefaultLiveBuffer),
		w:    &writer{env: newEnvelope(id), clock: time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC)},
	}
}

// reader returns a reader of the request from sequence from, as Open
// makes it, reading s; it is not subscribed to anything (live frames come
// from write).
func (s *fakeStream) reader(t testing.TB, from int64, opts ...ReplayOption) *Reader {
	t.Helper()
	cfg := defaultReplayConfig()
	if err := applyReplay(&cfg, opts); err != nil {
		t.Fatal(err)
	}
	cfg.get = s.get
	r := &Reader{cfg: cfg, requestID: s.w.env.RequestID, next: from, live: s.live}
	t.Cleanup(r.Close)
	return r
}

// get is a batchGetter of s.
func (s *fakeStream) get(_ context.Context, _, _ string, start uint64, batch, _ int, fn func(seq uint64, h nats.Header, data []byte) error) (uint64, error) {
	s.mu.Lock()
	msgs := s.msgs
	s.mu.Unlock()
	for seq := start; seq <= uint64(len(msgs)); seq++ {
		if batch == 0 {
			return uint64(len(msgs)) - seq + 1, nil
		}
		batch--
		if err := fn(seq, nil, msgs[seq-1]); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// write stores the next frame, a text chunk, and republishes it on the
// live channel, as the stream does.
func (s *fakeStream) write(t testing.TB) {
	f := s.w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "x"})
	data, err := json.Marshal(f)
	if err != nil {
		t.Error(err)
		return
	}
	s.w.seq++
	s.mu.Lock()
	s.msgs = append(s.msgs, data)
	streamSeq := len(s.msgs)
	s.mu.Unlock()
	m := nats.NewMsg("live")
	m.Data = data
	m.Header.Set(subjects.HeaderSequence, strconv.FormatInt(f.Sequence, 10))
	m.Header.Set(subjects.HeaderStreamSequence, strconv.Itoa(streamSeq))
	s.live <- m
}

// TestReaderHeartbeatsAcrossPolls: heartbeats come every interval spent
// waiting for a frame, before the first one included, however many polls
// the wait holds; a frame given starts the interval again.
func TestReaderHeartbeatsAcrossPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFakeStream("clock-beat")
		start := time.Now()
		var beats []time.Duration
		errEnough := errors.New("enough heartbeats")
		r := s.reader(t, 0, WithHeartbeat(DefaultHeartbeat, func() error {
			beats = append(beats, time.Since(start))
			if len(beats) == 4 {
				return errEnough
			}
			return nil
		}))
		// Bounds the test should the reader never beat.
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		time.AfterFunc(20*time.Second, func() { s.write(t) }) // frame 0, between two heartbeats
		f, err := r.Next(ctx)
		if err != nil || f.Sequence() != 0 || time.Since(start) != 20*time.Second {
			t.Fatalf("frame 0 after %v: %v", time.Since(start), err)
		}
		if _, err := r.Next(ctx); !errors.Is(err, errEnough) {
			t.Fatalf("after %v: %v, heartbeats at %v", time.Since(start), err, beats)
		}
		want := []time.Duration{15 * time.Second, 35 * time.Second, 50 * time.Second, 65 * time.Second}
		if len(beats) != len(want) {
			t.Fatalf("heartbeats at %v, want %v", beats, want)
		}
		for i := range want {
			if beats[i] != want[i] {
				t.Fatalf("heartbeats at %v, want %v", beats, want)
			}
		}
	})
}

// TestReaderWaitLimitsAcrossPolls: the wait for the first frame ends
// after its limit, and so does the wait for a next frame, each counted
// from the start of that wait (a frame given starts it again), however
// many polls the wait holds.
func TestReaderWaitLimitsAcrossPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()

		s := newFakeStream("clock-first")
		start := time.Now()
		if _, err := s.reader(t, 0).Next(ctx); !errors.Is(err, ErrWaitTimeout) || time.Since(start) != DefaultMaxWait {
			t.Fatalf("no frame: %v after %v, want ErrWaitTimeout after %v", err, time.Since(start), DefaultMaxWait)
		}

		s = newFakeStream("clock-idle")
		start = time.Now()
		r := s.reader(t, 0)
		// Frame 0 a little before the first-frame limit, frame 1 a little
		// before the idle limit after it, then nothing.
		time.AfterFunc(4*time.Minute, func() { s.write(t) })
		time.AfterFunc(13*time.Minute, func() { s.write(t) })
		for i, at := range []time.Duration{4 * time.Minute, 13 * time.Minute} {
			if f, err := r.Next(ctx); err != nil || f.Sequence() != int64(i) || time.Since(start) != at {
				t.Fatalf("frame %d: %v after %v, want it after %v", i, err, time.Since(start), at)
			}
		}
		if _, err := r.Next(ctx); !errors.Is(err, ErrWaitTimeout) || time.Since(start) != 13*time.Minute+DefaultIdleTimeout {
			t.Fatalf("idle: %v after %v, want ErrWaitTimeout after %v", err, time.Since(start), 13*time.Minute+DefaultIdleTimeout)
		}
	})
}
