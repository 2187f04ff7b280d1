package a2abridge_test

import (
	"context"
	"encoding/json"
	"iter"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// directAgent answers every message with a direct Message (no task) of
// its own id, metadata and extensions, and three parts: a text part with
// metadata, a mediaType and a filename, a data part and a file part.
type directAgent struct{}

func (directAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	file := a2a.NewFileURLPart("https://example.com/f.png", "image/png")
	file.Filename = "f.png"
	m := a2a.NewMessage(a2a.MessageRoleAgent, withKey(withFields(a2a.NewTextPart("direct answer"), "text/markdown", "m.md")),
		a2a.NewDataPart(map[string]any{"n": 1.0}), file)
	m.ID, m.ContextID = "upstream-message-1", ec.ContextID
	m.Metadata = map[string]any{"trace": "t-9", "nested": map[string]any{"a": true}}
	m.Extensions = []string{"https://example.com/ext/direct"}
	return func(yield func(a2a.Event, error) bool) { yield(m, nil) }
}

func (directAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {}
}

// messageJSON is m as JSON without its context id (the pipeline's, not
// the agent's), for comparison.
func messageJSON(t *testing.T, m any) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	delete(v, "contextId")
	b, _ = json.Marshal(v)
	return string(b)
}

// TestDirectMessageAsSent: a bridged A2A agent that answers with a
// direct Message (no task) answers the pipeline's A2A clients with that
// Message as a client of the agent itself gets it: its id, metadata,
// extensions and parts (their metadata, mediaType and filename), no task
// id; SendMessage's result and a stream of that one event, for an A2A
// v1.0 client (a2a-go/v2) and an A2A v0.3 client (a2a-go v0.3). The v1.0
// stream was a Task, an artifact-update and a completed status, and
// SendMessage's Message had the pipeline's id and neither the metadata
// nor the extensions; v0.3 the same.
func TestDirectMessageAsSent(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, directAgent{})
	ctx := testCtx(t)
	res, err := up.Client(t, url).SendMessage(ctx, up.Msg("hi"))
	if err != nil {
		t.Fatal(err)
	}
	direct, ok := res.(*a2a.Message)
	if !ok {
		t.Fatalf("the agent itself answered %T, want a Message", res)
	}
	want := messageJSON(t, direct)
	want03 := messageJSON(t, a2av0.FromV1Message(direct))

	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	// check compares got, a Message of task taskID and context
	// contextID, with want, the agent's (as JSON).
	check := func(what string, taskID, contextID string, got any, want string) {
		t.Helper()
		if taskID != "" || contextID == "" {
			t.Errorf("%s: taskId %q contextId %q, want no task and the pipeline's context", what, taskID, contextID)
		}
		if g := messageJSON(t, got); g != want {
			t.Errorf("%s: the Message\n%s\nwant the agent's\n%s", what, g, want)
		}
	}
	res, err = c.SendMessage(ctx, up.Msg("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := res.(*a2a.Message); !ok {
		t.Errorf("SendMessage answered %T, want the agent's Message", res)
	} else {
		check("SendMessage", string(m.TaskID), m.ContextID, m, want)
	}
	turn := up.Collect(t, c.SendStreamingMessage(ctx, up.Msg("hi")), nil)
	if turn.Events != 1 || turn.Message == nil {
		t.Errorf("SendStreamingMessage: %d events (task %q, states %v, %d artifacts), want the agent's Message alone",
			turn.Events, turn.Task.TaskID, turn.States, len(turn.Artifacts))
	} else {
		check("SendStreamingMessage", string(turn.Message.TaskID), turn.Message.ContextID, turn.Message, want)
	}

	v03 := openV03(t, p, "agent").(*v03Conv)
	old, err := v03.c.SendMessage(ctx, v03.params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := old.(*a2a03.Message); !ok {
		t.Errorf("A2A v0.3 message/send answered %T, want the agent's Message", old)
	} else {
		check("A2A v0.3 message/send", string(m.TaskID), m.ContextID, m, want03)
	}
	var events []a2a03.Event
	for ev, err := range v03.c.SendStreamingMessage(ctx, v03.params("hi")) {
		if err != nil {
			t.Fatalf("A2A v0.3 message/stream: %v", err)
		}
		events = append(events, ev)
	}
	if m, ok := events[0].(*a2a03.Message); len(events) != 1 || !ok {
		t.Errorf("A2A v0.3 message/stream: events %T..., %d of them, want the agent's Message alone", events[0], len(events))
	} else {
		check("A2A v0.3 message/stream", string(m.TaskID), m.ContextID, m, want03)
	}
}
