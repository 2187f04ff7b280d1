package httpagent_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// TestA2AEventsOnTheRequestsTask: an HTTP agent answers an interrupted
// turn with an a2a.stream_event status_update that names a task and
// context of its own (an agent passing through the events of the A2A
// framework it wraps, or one answering with another request's ids). The
// package documentation says the frame's ids are the pipeline's own; an
// A2A v1.0 client (a2a-go/v2) of the pool must see every event of its
// stream on its own task and context (A2A §3.1.2: the stream's events
// belong to the task the call created), never the agent's "foreign-task",
// which it would then answer (and which may be another principal's task).
func TestA2AEventsOnTheRequestsTask(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = mustRead(r)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write([]byte(`{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"Let me see. "}}` + "\n" +
			`{"response_kind":"a2a.stream_event","status":"succeeded","is_final":true,"body":{"branch":"status_update","payload":` +
			`{"kind":"status-update","taskId":"foreign-task","contextId":"foreign-context","final":true,` +
			`"status":{"state":"input-required","message":{"kind":"message","role":"agent","messageId":"q1","parts":[{"kind":"text","text":"Which city?"}]}}}}}` + "\n"))
	}))
	defer srv.Close()
	r := newRig(t, srv.URL, rigConfig{})
	c := up.Client(t, r.p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var events []a2a.Event
	for ev, err := range c.SendStreamingMessage(ctx, up.Msg("the weather")) {
		if err != nil {
			t.Fatalf("after %d events: %v", len(events), err)
		}
		events = append(events, ev)
	}
	if len(events) == 0 {
		t.Fatal("no event")
	}
	own := events[0].TaskInfo()
	if own.TaskID == "" || own.TaskID == "foreign-task" {
		t.Fatalf("the stream's first event is on task %q; want the pipeline's own task", own.TaskID)
	}
	last := events[len(events)-1]
	if su, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || su.Status.State != a2a.TaskStateInputRequired {
		t.Errorf("last event %T %+v; want the input-required status update", last, last)
	}
	for i, ev := range events {
		info := ev.TaskInfo()
		if info.TaskID != own.TaskID || info.ContextID != own.ContextID {
			t.Errorf("event %d (%T) names task %q context %q; want every event on the client's task %q and context %q",
				i, ev, info.TaskID, info.ContextID, own.TaskID, own.ContextID)
		}
	}
}

// TestBadA2APayloadRefused: an HTTP agent writes an
// a2a.stream_event whose branch is known but whose payload is not an A2A
// event ("status": 42). The package documentation checks only the branch;
// the frame is stored, and every A2A client of the request then fails on
// it: a2a-go/v2's SendStreamingMessage ends with "server error: the
// pipeline could not answer; retry later" after two events, never seeing
// the rest of the answer or its end, and a retry reads the same stored
// frame. The bridge must not store a frame that the pipeline's own A2A
// renderer cannot read (refusing it ends the request with
// upstream_protocol_error, which an A2A client gets as a failed task): the
// client's stream must end with a terminal state, without an error.
func TestBadA2APayloadRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = mustRead(r)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write([]byte(`{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"a "}}` + "\n" +
			`{"response_kind":"a2a.stream_event","body":{"branch":"status_update","payload":{"status":42}}}` + "\n" +
			`{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"b"}}` + "\n" +
			`{"response_kind":"e2a.complete","body":{"result":{"text":"a b"}}}` + "\n"))
	}))
	defer srv.Close()
	r := newRig(t, srv.URL, rigConfig{})
	c := up.Client(t, r.p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last a2a.Event
	n := 0
	for ev, err := range c.SendStreamingMessage(ctx, up.Msg("hello")) {
		if err != nil {
			t.Fatalf("after %d events the A2A stream failed: %v; want it to end with a terminal state (the bad frame refused as upstream_protocol_error, or left out)", n, err)
		}
		last, n = ev, n+1
	}
	var state a2a.TaskState
	switch e := last.(type) {
	case *a2a.TaskStatusUpdateEvent:
		state = e.Status.State
	case *a2a.Task:
		state = e.Status.State
	}
	if state != a2a.TaskStateCompleted && state != a2a.TaskStateFailed {
		t.Errorf("the stream's last event %T is in state %q; want completed or failed", last, state)
	}
	// The frame is refused before it is stored: the request ends with
	// the upstream's protocol error, not retryable.
	frames := r.ask(t, `{"request_id":"bad-a2a-1","params":{"text":"hi"}}`)
	if eb := finalError(t, frames); eb.Code != bridge.CodeProtocol || eb.Retryable {
		t.Errorf("final error %+v; want %s, not retryable", eb, bridge.CodeProtocol)
	}
	for _, f := range frames {
		if f.ResponseKind == e2a.KindA2AStreamEvent {
			t.Errorf("the bad frame was stored: %s", f.Body)
		}
	}
}
