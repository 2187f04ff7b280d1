package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/subjects"
)

func TestTail(t *testing.T) {
	js, nc := server(t)
	a, _ := audit.New(nc, audit.WithPageSize(16))

	// Running before the tail starts: frames 0 and 1 stored.
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "early"})
	publishFrame(t, js, "early", 0, frame("early", 0, false))
	publishFrame(t, js, "early", 1, frame("early", 1, false))
	// Finished before the tail starts: never shown.
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "done"}, 1)

	// No deadline, as the CLI's context (cancelled by SIGINT): Tail bounds
	// each of its calls itself. Markers stored before Tail read where the
	// stream ends are not shown.
	rec, errc, cancel := startTail(t, js, a, audit.TailOptions{PollInterval: 20 * time.Millisecond})

	// A new request with a gap: its summary reports it.
	natstest.PublishRequest(t, js, "other", &e2a.Envelope{RequestID: "new", TaskID: "t-new"})
	publishFrame(t, js, "new", 0, frame("new", 0, false))
	publishFrame(t, js, "new", 2, frame("new", 2, true))
	newSum := rec.waitFor(t, "summary of new", func(r audit.Record) bool { return r.Kind == audit.KindSummary && r.RequestID == "new" })
	if newSum.Summary.OK() || !strings.Contains(strings.Join(newSum.Summary.Violations, " "), "gap") || newSum.Pool != "other" {
		t.Fatalf("new: %+v", newSum.Summary)
	}

	// The early request finishes: its earlier frames prime the check
	// (not shown), the summary is clean.
	publishFrame(t, js, "early", 2, frame("early", 2, true))
	earlySum := rec.waitFor(t, "summary of early", func(r audit.Record) bool { return r.Kind == audit.KindSummary && r.RequestID == "early" })
	if !earlySum.Summary.OK() || earlySum.Summary.State != audit.StateComplete || earlySum.Summary.Frames != 3 {
		t.Fatalf("early: %+v", earlySum.Summary)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Tail: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var shownEarly []int64
	sawNewRequest := false
	for _, r := range rec.recs {
		if r.RequestID == "done" {
			t.Errorf("finished request shown: %+v", r)
		}
		if r.RequestID == "early" && r.Kind == audit.KindFrame {
			shownEarly = append(shownEarly, *r.Sequence)
		}
		if r.RequestID == "new" && r.Kind == audit.KindRequest {
			sawNewRequest = true
			var env e2a.Envelope
			if err := json.Unmarshal(r.Envelope, &env); err != nil || env.TaskID != "t-new" {
				t.Errorf("new envelope %s", r.Envelope)
			}
		}
	}
	if len(shownEarly) != 1 || shownEarly[0] != 2 {
		t.Errorf("early frames shown %v, want [2]", shownEarly)
	}
	if !sawNewRequest {
		t.Errorf("request record of new not shown")
	}
}

func TestTailFilters(t *testing.T) {
	js, nc := server(t)
	a, _ := audit.New(nc)
	since := time.Now()
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "x1", TaskID: "keep"}, 0)
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "x2", TaskID: "drop"}, 0)

	ctx, cancel := context.WithCancel(testCtx(t))
	rec := newRecorder()
	errc := make(chan error, 1)
	go func() {
		errc <- a.Tail(ctx, audit.TailOptions{Pool: "demo", TaskID: "keep", Since: since, PollInterval: 20 * time.Millisecond}, rec.emit)
	}()
	rec.waitFor(t, "request x1 (since)", func(r audit.Record) bool { return r.Kind == audit.KindRequest && r.RequestID == "x1" })
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "x3", TaskID: "keep"}, 1)
	completeRequest(t, js, "other", &e2a.Envelope{RequestID: "x4", TaskID: "keep"}, 1)
	rec.waitFor(t, "summary x3", func(r audit.Record) bool { return r.Kind == audit.KindSummary && r.RequestID == "x3" })
	// x5, stored after x4 and shown: the tail has read past x4.
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "x5", TaskID: "keep"}, 1)
	rec.waitFor(t, "summary x5", func(r audit.Record) bool { return r.Kind == audit.KindSummary && r.RequestID == "x5" })
	cancel()
	<-errc
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.recs {
		if r.RequestID == "x2" || r.RequestID == "x4" {
			t.Errorf("filtered request shown: %+v", r)
		}
	}
}

func TestPublishAndFollow(t *testing.T) {
	js, nc := server(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx, nc, "demo", demo.New()) }()
	defer func() { cancel(); <-done }()

	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	body := []byte(`{"request_id":"pub-1","method":"chat.send","params":{"text":"hello","frames":2},
	  "auth":{"bearer_token":"s3cret"}}`)
	acc, err := audit.Publish(testCtx(t), nc, body, audit.PublishOptions{Routes: normalizer.Routes{Default: "demo"}, Traceparent: tp})
	if err != nil {
		t.Fatal(err)
	}
	if acc.Kind != audit.KindAccepted || acc.RequestID != "pub-1" || acc.Pool != "demo" || acc.Duplicate || acc.StreamSeq == 0 || acc.Subject != "e2a.req.demo.pub-1" {
		t.Fatalf("accepted %+v", acc)
	}
	var frames []audit.Record
	sum, err := audit.Follow(testCtx(t), nc, "pub-1", 10*time.Second, func(r audit.Record) error {
		if r.Kind == audit.KindFrame {
			frames = append(frames, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// demo: reasoning, tool call, tool result, 2 text chunks, complete.
	if !sum.OK() || sum.State != audit.StateComplete || sum.Frames != 6 || len(frames) != 6 {
		t.Fatalf("summary %+v, %d frames", sum, len(frames))
	}

	// The stored envelope: secrets stripped, trace context in the envelope
	// and in the headers, the headers ingress sets.
	a, _ := audit.New(nc)
	recs, _ := collect(t, a, audit.Query{RequestIDs: []string{"pub-1"}})
	req := recs[0]
	if req.Kind != audit.KindRequest || req.Headers[subjects.HeaderMsgID] != "pub-1" || req.Headers[subjects.HeaderRequestID] != "pub-1" || req.Headers[subjects.HeaderTraceparent] != tp {
		t.Fatalf("request record %+v", req)
	}
	if strings.Contains(string(req.Envelope), "s3cret") {
		t.Fatalf("secret stored: %s", req.Envelope)
	}
	var env e2a.Envelope
	_ = json.Unmarshal(req.Envelope, &env)
	if env.Trace == nil || env.Trace.Traceparent != tp || env.Channel != "cli" {
		t.Fatalf("envelope %s", req.Envelope)
	}
	// Frames carry the trace context too.
	for _, r := range recs {
		if r.Kind == audit.KindFrame && r.Headers[subjects.HeaderTraceparent] != tp {
			t.Fatalf("frame without traceparent: %+v", r.Headers)
		}
	}

	// The same id again is one request.
	again, err := audit.Publish(testCtx(t), nc, body, audit.PublishOptions{Pool: "demo"})
	if err != nil || !again.Duplicate || again.StreamSeq != acc.StreamSeq {
		t.Fatalf("republish: %+v, %v", again, err)
	}

	// An explicit pool wins; a body without request id gets one.
	acc2, err := audit.Publish(testCtx(t), nc, []byte(`{"params":{"text":"x"}}`), audit.PublishOptions{Pool: "nobody"})
	if err != nil || acc2.Pool != "nobody" || acc2.RequestID == "" {
		t.Fatalf("second publish: %+v, %v", acc2, err)
	}
	// Nobody serves pool "nobody": Follow times out, it does not hang.
	_, err = audit.Follow(testCtx(t), nc, acc2.RequestID, 300*time.Millisecond, func(audit.Record) error { return nil })
	if !errors.Is(err, egress.ErrWaitTimeout) {
		t.Fatalf("follow of an unserved request: %v", err)
	}
	// Invalid input is refused before anything is published.
	if _, err := audit.Publish(testCtx(t), nc, []byte(`[1,2]`), audit.PublishOptions{Pool: "demo"}); err == nil {
		t.Fatal("non-object envelope published")
	}
	if _, err := audit.Publish(testCtx(t), nc, body, audit.PublishOptions{Pool: "bad pool"}); err == nil {
		t.Fatal("bad pool accepted")
	}
	_ = js
}

// With Since, a request stored since then that finished before Tail
// started is shown whole: its request, every frame read back from the
// stream, and its summary (its frames were republished before the live
// subscription existed).
func TestTailSinceFinished(t *testing.T) {
	js, nc := server(t)
	a, _ := audit.New(nc, audit.WithPageSize(16))
	since := time.Now().Add(-time.Second)
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "past"}, 3) // frames 0–3

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rec := newRecorder()
	errc := make(chan error, 1)
	go func() {
		errc <- a.Tail(ctx, audit.TailOptions{PollInterval: 20 * time.Millisecond, Since: since}, rec.emit)
	}()
	sum := rec.waitFor(t, "summary of past", func(r audit.Record) bool { return r.Kind == audit.KindSummary && r.RequestID == "past" })
	if !sum.Summary.OK() || sum.Summary.State != audit.StateComplete || sum.Summary.Frames != 4 {
		t.Fatalf("past: %+v", sum.Summary)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Tail: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var kinds []string
	for _, r := range rec.recs {
		if r.RequestID == "past" {
			kinds = append(kinds, string(r.Kind))
		}
	}
	if got := strings.Join(kinds, ","); got != "request,frame,frame,frame,frame,summary" {
		t.Fatalf("records of past: %s", got)
	}
}
