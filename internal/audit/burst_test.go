package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// publishBurstRaw stores one response message of id holding frames joined
// by line feeds, with the given E2A-Sequence, E2A-Frames and Nats-Msg-Id
// headers (each left out when empty), without fencing, so that tests can
// store broken bursts.
func publishBurstRaw(t *testing.T, js jetstream.JetStream, id, seqHeader, framesHeader, msgID string, frames ...[]byte) {
	t.Helper()
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subj)
	for _, f := range frames {
		m.Data = e2a.AppendBurst(m.Data, f)
	}
	m.Header.Set(subjects.HeaderRequestID, id)
	for k, v := range map[string]string{subjects.HeaderSequence: seqHeader, subjects.HeaderFrames: framesHeader, subjects.HeaderMsgID: msgID} {
		if v != "" {
			m.Header.Set(k, v)
		}
	}
	ack, err := js.PublishMsg(testCtx(t), m)
	if err != nil {
		t.Fatalf("publish burst %s of %q: %v", seqHeader, id, err)
	}
	if ack.Duplicate {
		t.Fatalf("burst %s of %q deduplicated", seqHeader, id)
	}
}

// frames builds frames from..to of id, the last one final when final is set.
func frames(id string, from, to int64, final bool) [][]byte {
	var out [][]byte
	for s := from; s <= to; s++ {
		out = append(out, frame(id, s, final && s == to))
	}
	return out
}

// storeBursts stores the frames 0..6 of id as the agent runtime writes
// them: frame 0 alone, a burst of 1..4, a final burst of 5 and 6, each
// fenced on the one before. It returns their stream sequences.
func storeBursts(t *testing.T, nc *nats.Conn, id string) [3]uint64 {
	t.Helper()
	var s [3]uint64
	s[0] = natstest.PublishBurst(t, nc, id, 0, 0, frame(id, 0, false))
	s[1] = natstest.PublishBurst(t, nc, id, 1, s[0], frames(id, 1, 4, false)...)
	s[2] = natstest.PublishBurst(t, nc, id, 5, s[1], frames(id, 5, 6, true)...)
	return s
}

// wantBurstFrames checks the frame records of a request stored by
// storeBursts: frames 0..6 in order, each with its own body, and the place
// of each in the message holding it. origin, when set, gives the original
// stream sequences (records read from E2A_AUDIT).
func wantBurstFrames(t *testing.T, name string, recs []audit.Record, id string, hot [3]uint64, origin bool) {
	t.Helper()
	var seqs []int64
	msgOf := map[int64]uint64{} // frame sequence -> stream sequence of its message
	for _, r := range recs {
		if r.Kind != audit.KindFrame || r.RequestID != id {
			continue
		}
		if r.Sequence == nil {
			t.Fatalf("%s: frame record without sequence: %+v", name, r)
		}
		s := *r.Sequence
		seqs = append(seqs, s)
		msgOf[s] = r.StreamSeq
		var resp e2a.Response
		if err := json.Unmarshal(r.Frame, &resp); err != nil || resp.Sequence != s || resp.RequestID != id {
			t.Errorf("%s: frame %d record holds %s (%v)", name, s, r.Frame, err)
		}
		// Where each frame is stored: frame 0 alone, 1..4 and 5..6 in
		// bursts, whose headers the records carry.
		var wantBurst *audit.BurstPos
		first, n, msg := s, "", hot[0]
		switch {
		case s >= 1 && s <= 4:
			wantBurst, first, n, msg = &audit.BurstPos{Index: int(s - 1), Frames: 4}, 1, "4", hot[1]
		case s >= 5:
			wantBurst, first, n, msg = &audit.BurstPos{Index: int(s - 5), Frames: 2}, 5, "2", hot[2]
		}
		if (wantBurst == nil) != (r.Burst == nil) || wantBurst != nil && *wantBurst != *r.Burst {
			t.Errorf("%s: frame %d burst %+v, want %+v", name, s, r.Burst, wantBurst)
		}
		if r.Headers[subjects.HeaderSequence] != fmt.Sprint(first) || r.Headers[subjects.HeaderFrames] != n {
			t.Errorf("%s: frame %d headers %v", name, s, r.Headers)
		}
		if origin {
			if r.Stream != streams.AuditStream || r.Origin != fmt.Sprintf("%s %d", streams.ResponsesStream, msg) {
				t.Errorf("%s: frame %d from %s, origin %q, want a copy of %s %d", name, s, r.Stream, r.Origin, streams.ResponsesStream, msg)
			}
		} else if r.Stream != streams.ResponsesStream || r.StreamSeq != msg {
			t.Errorf("%s: frame %d at %s %d, want %s %d", name, s, r.Stream, r.StreamSeq, streams.ResponsesStream, msg)
		}
	}
	if !slices.Equal(seqs, []int64{0, 1, 2, 3, 4, 5, 6}) {
		t.Fatalf("%s: frames %v, want 0..6", name, seqs)
	}
	// The frames of a burst share their message.
	if msgOf[1] != msgOf[4] || msgOf[5] != msgOf[6] || msgOf[0] == msgOf[1] || msgOf[4] == msgOf[5] {
		t.Errorf("%s: stream sequences by frame %v", name, msgOf)
	}
}

// TestReplayBursts: a request whose frames are stored as frame 0 alone, a
// burst of 1..4 and a final burst of 5 and 6 is complete and sound, with a
// record per frame, read from the hot streams and from E2A_AUDIT.
func TestReplayBursts(t *testing.T) {
	js, nc := server(t)
	a, _ := audit.New(nc)
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "burst-1", TaskID: "task-b"})
	hot := storeBursts(t, nc, "burst-1")
	// A burst written outside the agent runtime, with the deduplication id
	// of its first frame.
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "burst-2", TaskID: "task-b"})
	publishBurstRaw(t, js, "burst-2", "0", "3", subjects.FrameMsgID("burst-2", 0), frames("burst-2", 0, 2, true)...)
	// One frame laid out on several lines, without E2A-Frames: one frame.
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "pretty", TaskID: "task-b"})
	var indented bytes.Buffer
	if err := json.Indent(&indented, frame("pretty", 0, true), "", "  "); err != nil {
		t.Fatal(err)
	}
	publishFrame(t, js, "pretty", 0, indented.Bytes())
	// Requests 3, response messages 3 + 1 + 1: wait for their copies.
	waitAudit(t, js, 3+5)

	check := func(name string, q audit.Query, fromAudit bool) {
		t.Helper()
		recs, st := collect(t, a, q)
		sums := summaries(recs)
		for id, n := range map[string]int{"burst-1": 7, "burst-2": 3, "pretty": 1} {
			if s := sums[id]; s == nil || s.State != audit.StateComplete || !s.OK() || s.Frames != n || !s.RequestFound || s.Status != e2a.StatusSucceeded {
				t.Errorf("%s: %s summary %+v", name, id, s)
			}
			if c := count(recs, audit.KindFrame, id); c != n {
				t.Errorf("%s: %s has %d frame records, want %d", name, id, c, n)
			}
		}
		if st.Frames != 11 || st.Complete != 3 || st.Violations != 0 {
			t.Errorf("%s: stats %+v", name, st)
		}
		wantBurstFrames(t, name, recs, "burst-1", hot, fromAudit)
		for _, r := range recs {
			if r.Kind == audit.KindFrame && r.RequestID == "burst-2" {
				if r.Burst == nil || r.Sequence == nil || int64(r.Burst.Index) != *r.Sequence || r.Burst.Frames != 3 || r.Headers[subjects.HeaderMsgID] != "burst-2:0" {
					t.Errorf("%s: burst-2 frame %+v", name, r)
				}
			}
			if r.Kind == audit.KindFrame && r.RequestID == "pretty" && (r.Burst != nil || r.Sequence == nil || *r.Sequence != 0) {
				t.Errorf("%s: pretty frame %+v", name, r)
			}
		}
	}
	ids := []string{"burst-1", "burst-2", "pretty"}
	check("hot, by id", audit.Query{RequestIDs: ids, Source: audit.SourceHot}, false)
	check("auto, by task", audit.Query{TaskID: "task-b"}, false)
	check("audit, by id", audit.Query{RequestIDs: ids, Source: audit.SourceAudit}, true)
	check("audit, scan", audit.Query{TaskID: "task-b", Source: audit.SourceAudit}, true)

	// The hot frames aged out: auto finds the bursts in E2A_AUDIT.
	natstest.Purge(t, js, streams.ResponsesStream)
	check("auto, frames aged out", audit.Query{RequestIDs: ids}, true)
}

// TestReplayBurstViolations: each frame of a burst is checked as a frame
// stored alone, the headers of the message against its first frame, and
// a burst whose payload does not hold the frames its header counts is
// reported (its frames are still checked).
func TestReplayBurstViolations(t *testing.T) {
	js, nc := server(t)
	a, _ := audit.New(nc)
	store := func(id string) {
		natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: id})
		publishBurstRaw(t, js, id, "0", "", "", frame(id, 0, false))
	}

	// E2A-Frames says 3, the payload holds 2.
	store("count")
	publishBurstRaw(t, js, "count", "1", "3", "", frames("count", 1, 2, true)...)
	// E2A-Frames is not a number.
	store("notnum")
	publishBurstRaw(t, js, "notnum", "1", "two", "", frames("notnum", 1, 2, true)...)
	// E2A-Sequence names the second frame, not the first.
	store("first")
	publishBurstRaw(t, js, "first", "2", "3", "", frames("first", 1, 3, true)...)
	// A gap inside a burst: 1, 3, 4.
	store("gap")
	publishBurstRaw(t, js, "gap", "1", "3", "", frame("gap", 1, false), frame("gap", 3, false), frame("gap", 4, true))
	// A frame after the final one, in the same burst.
	store("late")
	publishBurstRaw(t, js, "late", "1", "2", "", frame("late", 1, true), frame("late", 2, false))
	// A deduplication id naming the second frame.
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "msgid"})
	publishBurstRaw(t, js, "msgid", "0", "2", "msgid:1", frames("msgid", 0, 1, true)...)
	// An invalid frame inside a burst (a chunk that says failed).
	store("invalid")
	bad := strings.Replace(string(frame("invalid", 1, false)), `"status":"in_progress"`, `"status":"failed"`, 1)
	publishBurstRaw(t, js, "invalid", "1", "2", "", []byte(bad), frame("invalid", 2, true))

	want := map[string]string{
		"count":   `message at E2A_RESPONSES 2: header E2A-Frames is "3": e2a: invalid frame burst: payload of`,
		"notnum":  `header E2A-Frames is "two": e2a: invalid frame burst: frame count`,
		"first":   `burst of 3 frames at E2A_RESPONSES`,
		"gap":     "frame 3 where 2 was expected (gap)",
		"late":    "frame 2 stored after the final frame 1",
		"msgid":   `header Nats-Msg-Id is "msgid:1", want "msgid:0"`,
		"invalid": "(frame 0 of 2 in the message): e2a: invalid response",
	}
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	recs, st := collect(t, a, audit.Query{RequestIDs: ids})
	sums := summaries(recs)
	for _, id := range ids {
		s := sums[id]
		// One violation each: the frames around it check out, the final
		// frame is found.
		if s == nil || len(s.Violations) != 1 || !strings.Contains(s.Violations[0], want[id]) || s.State != audit.StateComplete {
			t.Errorf("%s: summary %+v, want the one violation %q", id, s, want[id])
		}
	}
	if v := sums["first"].Violations; len(v) == 1 && !strings.Contains(v[0], `header E2A-Sequence is "2"`) {
		t.Errorf("first: %q", v)
	}
	// The frames of a burst that does not split are still shown, one by one.
	var countSeqs []int64
	for _, r := range recs {
		if r.Kind == audit.KindFrame && r.RequestID == "count" && r.Sequence != nil {
			countSeqs = append(countSeqs, *r.Sequence)
		}
	}
	if !slices.Equal(countSeqs, []int64{0, 1, 2}) || sums["count"].Frames != 3 {
		t.Errorf("count: frames %v", countSeqs)
	}
	if st.Violations != len(ids) || st.Complete != len(ids) {
		t.Errorf("stats %+v", st)
	}
}

// TestTailBursts: tail shows every frame of a burst, live and read back
// from the stream, and closes a request at the burst holding its final
// frame, with the frames after it in that burst reported.
func TestTailBursts(t *testing.T) {
	js, nc := server(t)
	a, _ := audit.New(nc, audit.WithPageSize(2))
	since := time.Now().Add(-time.Second)
	// Finished before the tail starts: read back from E2A_RESPONSES.
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "past"})
	past := storeBursts(t, nc, "past")
	// Stored before the tail starts, its frames come live.
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "live"})

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rec := newRecorder()
	errc := make(chan error, 1)
	go func() {
		errc <- a.Tail(ctx, audit.TailOptions{PollInterval: 20 * time.Millisecond, Since: since}, rec.emit)
	}()
	// The live subscription is in place before the first poll shows it.
	rec.waitFor(t, "request live", func(r audit.Record) bool { return r.Kind == audit.KindRequest && r.RequestID == "live" })
	live := storeBursts(t, nc, "live")
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "late"})
	s0 := natstest.PublishBurst(t, nc, "late", 0, 0, frame("late", 0, false))
	natstest.PublishBurst(t, nc, "late", 1, s0, frame("late", 1, true), frame("late", 2, false))

	sums := map[string]*audit.Summary{}
	for len(sums) < 2 {
		r := rec.waitFor(t, "summaries of live and late", func(r audit.Record) bool {
			return r.Kind == audit.KindSummary && (r.RequestID == "live" || r.RequestID == "late")
		})
		sums[r.RequestID] = r.Summary
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Tail: %v", err)
	}
	if s := sums["live"]; !s.OK() || s.State != audit.StateComplete || s.Frames != 7 {
		t.Errorf("live: %+v", s)
	}
	if s := sums["late"]; s.State != audit.StateComplete || s.Frames != 3 || len(s.Violations) != 1 || !strings.Contains(s.Violations[0], "frame 2 stored after the final frame 1") {
		t.Errorf("late: %+v", s)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var pastSum *audit.Summary
	for _, r := range rec.recs {
		if r.RequestID == "past" && r.Kind == audit.KindSummary {
			pastSum = r.Summary
		}
	}
	if pastSum == nil || !pastSum.OK() || pastSum.State != audit.StateComplete || pastSum.Frames != 7 {
		t.Errorf("past: %+v", pastSum)
	}
	wantBurstFrames(t, "past", rec.recs, "past", past, false)
	wantBurstFrames(t, "live", rec.recs, "live", live, false)
	if n := count(rec.recs, audit.KindFrame, "late"); n != 3 {
		t.Errorf("late: %d frame records, want 3", n)
	}
}
