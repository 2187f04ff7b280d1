package audit_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

func TestReplayByRequestID(t *testing.T) {
	js, nc := server(t)
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "r-1", Method: "chat.send", TaskID: "t1"}, 3)
	// A hostile id: encoded in the subject, raw in the records.
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "a.b *>"}, 1)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	recs, st := collect(t, a, audit.Query{RequestIDs: []string{"r-1", "a.b *>", "missing"}})

	if count(recs, audit.KindRequest, "r-1") != 1 || count(recs, audit.KindFrame, "r-1") != 4 {
		t.Fatalf("r-1: records %+v", recs)
	}
	// Order: request, frames 0..3, summary.
	var kinds []string
	var seqs []int64
	for _, r := range recs {
		if r.RequestID != "r-1" {
			continue
		}
		kinds = append(kinds, r.Kind)
		if r.Kind == audit.KindFrame {
			seqs = append(seqs, *r.Sequence)
		}
	}
	if !slices.Equal(kinds, []string{"request", "frame", "frame", "frame", "frame", "summary"}) || !slices.Equal(seqs, []int64{0, 1, 2, 3}) {
		t.Fatalf("r-1 kinds %v seqs %v", kinds, seqs)
	}
	req := recs[0]
	if req.Pool != "demo" || req.Stream != streams.RequestsStream || req.Subject != "e2a.req.demo.r-1" || req.Headers["Nats-Msg-Id"] != "r-1" {
		t.Fatalf("request record %+v", req)
	}
	var env e2a.Envelope
	if err := json.Unmarshal(req.Envelope, &env); err != nil || env.TaskID != "t1" {
		t.Fatalf("envelope %s: %v", req.Envelope, err)
	}
	sums := summaries(recs)
	if s := sums["r-1"]; s.State != audit.StateComplete || !s.OK() || s.Frames != 4 || s.Status != e2a.StatusSucceeded || !s.RequestFound {
		t.Fatalf("r-1 summary %+v", s)
	}
	if s := sums["a.b *>"]; s == nil || s.State != audit.StateComplete || !s.OK() {
		t.Fatalf("hostile id summary %+v", s)
	}
	if s := sums["missing"]; s == nil || s.State != audit.StateNotFound || s.RequestFound {
		t.Fatalf("missing summary %+v", s)
	}
	if st.Requests != 3 || st.Complete != 2 || st.NotFound != 1 || st.Violations != 0 || st.Frames != 6 {
		t.Fatalf("stats %+v", st)
	}

	// NoFrames keeps the check and drops the frame records.
	recs, _ = collect(t, a, audit.Query{RequestIDs: []string{"r-1"}, NoFrames: true})
	if count(recs, audit.KindFrame, "") != 0 || summaries(recs)["r-1"].Frames != 4 {
		t.Fatalf("NoFrames: %+v", recs)
	}
}

func TestReplayReportsViolations(t *testing.T) {
	js, nc := server(t)
	a, _ := audit.New(nc)

	// gap: 0, 1, 3(final)
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "gap"})
	publishFrame(t, js, "gap", 0, frame("gap", 0, false))
	publishFrame(t, js, "gap", 1, frame("gap", 1, false))
	publishFrame(t, js, "gap", 3, frame("gap", 3, true))

	// after final: 0(final), 1
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "late"})
	publishFrame(t, js, "late", 0, frame("late", 0, true))
	publishFrame(t, js, "late", 1, frame("late", 1, false))

	// repeated sequence 1, stored twice under different dedupe ids
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "rep"})
	publishFrame(t, js, "rep", 0, frame("rep", 0, false))
	publishFrame(t, js, "rep", 1, frame("rep", 1, false))
	publishFrameRaw(t, js, "rep", "1", "rep:1-again", frame("rep", 1, false))
	publishFrame(t, js, "rep", 2, frame("rep", 2, true))

	// invalid frame (failed status on a chunk), and a header that lies
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "bad"})
	bad := strings.Replace(string(frame("bad", 0, false)), `"status":"in_progress"`, `"status":"failed"`, 1)
	publishFrame(t, js, "bad", 0, []byte(bad))
	publishFrameRaw(t, js, "bad", "7", "bad:1", frame("bad", 1, true))

	// frames of another request under this one's subject, and no start at 0
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "mix"})
	publishFrame(t, js, "mix", 1, frame("other", 1, true))

	// no final frame yet, no frame at all
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "open"})
	publishFrame(t, js, "open", 0, frame("open", 0, false))
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "idle"})

	recs, st := collect(t, a, audit.Query{RequestIDs: []string{"gap", "late", "rep", "bad", "mix", "open", "idle"}})
	sums := summaries(recs)
	want := map[string][]string{
		"gap":  {"frame 3 where 2 was expected (gap)"},
		"late": {"frame 1 stored after the final frame 0"},
		"rep":  {"frame 1 where 2 was expected (repeated or out of order)", "Nats-Msg-Id is \"rep:1-again\""},
		"bad":  {"e2a: invalid response", "header E2A-Sequence is \"7\""},
		"mix":  {"has request_id \"other\"", "frame 1 is the first frame: sequence must start at 0"},
	}
	for id, subs := range want {
		s := sums[id]
		if s == nil || s.OK() {
			t.Errorf("%s: no violation: %+v", id, s)
			continue
		}
		all := strings.Join(s.Violations, "\n")
		for _, sub := range subs {
			if !strings.Contains(all, sub) {
				t.Errorf("%s: violations %q lack %q", id, s.Violations, sub)
			}
		}
	}
	if s := sums["open"]; s.State != audit.StateIncomplete || !s.OK() {
		t.Errorf("open: %+v", s)
	}
	if s := sums["idle"]; s.State != audit.StateNoFrames || !s.OK() || !s.RequestFound {
		t.Errorf("idle: %+v", s)
	}
	if s := sums["gap"]; s.State != audit.StateComplete {
		t.Errorf("gap state %+v", s)
	}
	if st.Violations != 5 || st.Incomplete != 1 || st.NoFrames != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestReplayScan(t *testing.T) {
	js, nc := server(t)
	a, _ := audit.New(nc)
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "a1", TaskID: "task-A", ContextID: "ctx-1"}, 1)
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "a2", TaskID: "task-A", ContextID: "ctx-1"}, 2)
	completeRequest(t, js, "other", &e2a.Envelope{RequestID: "b1", TaskID: "task-B", ContextID: "ctx-1", SessionID: "s-9"}, 1)
	// The behaviour: a time query needs stored timestamps on both sides of
	// mid, apart by more than the clock's granularity.
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "c1", TaskID: "task-C"}, 1)
	completeRequest(t, js, "other", &e2a.Envelope{RequestID: "c2", SessionID: "s-9"}, 1)

	ids := func(q audit.Query) []string {
		recs, _ := collect(t, a, q)
		var out []string
		for _, r := range recs {
			if r.Kind == audit.KindSummary {
				if r.Summary.State != audit.StateComplete || !r.Summary.OK() {
					t.Errorf("%s: %+v", r.RequestID, r.Summary)
				}
				out = append(out, r.RequestID)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    audit.Query
		want []string
	}{
		{"task", audit.Query{TaskID: "task-A"}, []string{"a1", "a2"}},
		{"context", audit.Query{ContextID: "ctx-1"}, []string{"a1", "a2", "b1"}},
		{"session", audit.Query{SessionID: "s-9"}, []string{"b1", "c2"}},
		{"pool", audit.Query{Pool: "other"}, []string{"b1", "c2"}},
		{"since", audit.Query{Since: mid}, []string{"c1", "c2"}},
		{"until", audit.Query{Until: mid}, []string{"a1", "a2", "b1"}},
		{"pool and since", audit.Query{Pool: "demo", Since: mid}, []string{"c1"}},
		{"limit", audit.Query{Pool: "demo", Limit: 2}, []string{"a1", "a2"}},
		{"hot only", audit.Query{ContextID: "ctx-1", Source: audit.SourceHot}, []string{"a1", "a2", "b1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(tc.q); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReplayQueryErrors(t *testing.T) {
	_, nc := server(t)
	a, _ := audit.New(nc)
	for _, q := range []audit.Query{
		{},
		{RequestIDs: []string{"x"}, TaskID: "t"},
		{Source: "cold", Pool: "p"},
		{Pool: "bad.pool"},
		{Since: time.Now(), Until: time.Now().Add(-time.Hour)},
		{RequestIDs: []string{strings.Repeat("x", 2000)}},
		{RequestIDs: []string{""}},
	} {
		if _, err := a.Replay(testCtx(t), q, func(audit.Record) error { return nil }); !errors.Is(err, audit.ErrQuery) {
			t.Errorf("Replay(%+v) = %v, want ErrQuery", q, err)
		}
	}
}

// TestReplayFromAudit shows what remains when the hot streams no longer
// hold a request: E2A_AUDIT has its envelope and frames, found by id, by
// task, and by time range.
func TestReplayFromAudit(t *testing.T) {
	js, nc := server(t)
	a, _ := audit.New(nc)
	start := time.Now()
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "old-1", TaskID: "task-old"}, 2)
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "old-2", TaskID: "task-old"}, 1)
	completeRequest(t, js, "other", &e2a.Envelope{RequestID: "old-3", TaskID: "task-x"}, 1)
	waitAudit(t, js, 4+3+3)

	// Age the hot streams out (as their max age would).
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "new-1", TaskID: "task-old"}, 1)
	waitAudit(t, js, 10+3)

	check := func(name string, q audit.Query, want []string) {
		t.Helper()
		recs, _ := collect(t, a, q)
		var got []string
		for _, r := range recs {
			switch r.Kind {
			case audit.KindSummary:
				if r.Summary.State != audit.StateComplete || !r.Summary.OK() || !r.Summary.RequestFound {
					t.Errorf("%s: %s: %+v", name, r.RequestID, r.Summary)
				}
				got = append(got, r.RequestID)
			case audit.KindRequest, audit.KindFrame:
				if strings.HasPrefix(r.RequestID, "old") && (r.Stream != streams.AuditStream || !strings.HasPrefix(r.Origin, "E2A_") || !strings.HasPrefix(r.Subject, "e2a.")) {
					t.Errorf("%s: record %+v not from the audit stream", name, r)
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	check("by id", audit.Query{RequestIDs: []string{"old-1", "new-1"}}, []string{"old-1", "new-1"})
	check("by id, since", audit.Query{RequestIDs: []string{"old-2"}, Since: start}, []string{"old-2"})
	check("by task, auto", audit.Query{TaskID: "task-old"}, []string{"new-1", "old-1", "old-2"})
	check("by task, audit only", audit.Query{TaskID: "task-old", Source: audit.SourceAudit}, []string{"old-1", "old-2", "new-1"})
	check("by pool and time, audit", audit.Query{Pool: "other", Since: start, Source: audit.SourceAudit}, []string{"old-3"})
	check("hot only misses the old ones", audit.Query{TaskID: "task-old", Source: audit.SourceHot}, []string{"new-1"})

	// Frames aged out first (requests kept): auto takes them from E2A_AUDIT,
	// by id and by a scan of the hot requests.
	halfStart := time.Now()
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "half"}, 2)
	waitAudit(t, js, 13+4)
	natstest.Purge(t, js, streams.ResponsesStream)
	recs, _ := collect(t, a, audit.Query{RequestIDs: []string{"half"}})
	if sum := summaries(recs)["half"]; sum.State != audit.StateComplete || sum.Frames != 3 || !sum.OK() {
		t.Fatalf("half: %+v", sum)
	}
	recs, _ = collect(t, a, audit.Query{Since: halfStart, Source: audit.SourceAuto})
	if sums := summaries(recs); len(sums) != 1 || sums["half"] == nil || sums["half"].State != audit.StateComplete || sums["half"].Frames != 3 || !sums["half"].OK() {
		t.Fatalf("half by a scan: %v", recs)
	}
}

// TestReplaySummaryNamesInterruptedTurn: a turn the agent ended asking for
// input (a final a2a.stream_event status_update in input-required, status
// succeeded) is summarised with its state, which the status alone does
// not say (the task goes on with the client's answer).
func TestReplaySummaryNamesInterruptedTurn(t *testing.T) {
	js, nc := server(t)
	env := &e2a.Envelope{RequestID: "ask-1", TaskID: "t-ask"}
	natstest.PublishRequest(t, js, "demo", env)
	r := e2a.ResponseFor(env)
	r.ResponseID, r.Timestamp = "ask-1-0", e2a.Now()
	r.Provenance = e2a.Provenance{SourceProtocol: e2a.SourceE2A}
	r.IsFinal, r.Status, r.ResponseKind = true, e2a.StatusSucceeded, e2a.KindA2AStreamEvent
	r.Body = e2a.MarshalBody(e2a.InterruptBody(e2a.StateInputRequired, "which city?"))
	b, err := e2a.MarshalResponse(&r)
	if err != nil {
		t.Fatal(err)
	}
	publishFrame(t, js, "ask-1", 0, b)
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "done-1"}, 1)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := collect(t, a, audit.Query{RequestIDs: []string{"ask-1", "done-1"}})
	sums := summaries(recs)
	if s := sums["ask-1"]; s == nil || s.State != audit.StateComplete || !s.OK() || s.Status != e2a.StatusSucceeded ||
		s.Interrupted != e2a.StateInputRequired {
		t.Fatalf("interrupted turn's summary %+v", s)
	}
	if s := sums["done-1"]; s == nil || s.Interrupted != "" {
		t.Fatalf("completed request's summary %+v", s)
	}
}
