package a2abridge_test

import (
	"context"
	"iter"
	"reflect"
	"slices"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// eventMetaAgent sends events with metadata {"ev": a name of the event}:
// for "work" two text updates of one artifact, a data artifact and the
// completed status; for "ask", "reject" and "fail" that final status
// with a message.
type eventMetaAgent struct{}

func (eventMetaAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	meta := func(name string) map[string]any { return map[string]any{"ev": name} }
	art := func(id a2a.ArtifactID, appendTo bool, name string, p *a2a.Part) *a2a.TaskArtifactUpdateEvent {
		ev := a2a.NewArtifactUpdateEvent(ec, id, p)
		ev.Append, ev.Metadata = appendTo, meta(name)
		return ev
	}
	status := func(st a2a.TaskState, name string) *a2a.TaskStatusUpdateEvent {
		var msg *a2a.Message
		if st != a2a.TaskStateCompleted {
			msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("status "+name))
		}
		ev := a2a.NewStatusUpdateEvent(ec, st, msg)
		ev.Metadata = meta(name)
		return ev
	}
	evs := []a2a.Event{a2a.NewSubmittedTask(ec, ec.Message)}
	switch up.TextOf(ec.Message.Parts) {
	case "work":
		evs = append(evs, art("a1", false, "a1-first", a2a.NewTextPart("alpha")), art("a1", true, "a1-second", a2a.NewTextPart(" beta")),
			art("d1", false, "d1", a2a.NewDataPart(map[string]any{"n": 1.0})), status(a2a.TaskStateCompleted, "done"))
	case "ask":
		evs = append(evs, status(a2a.TaskStateInputRequired, "ask"))
	case "reject":
		evs = append(evs, status(a2a.TaskStateRejected, "rejected"))
	case "fail":
		evs = append(evs, status(a2a.TaskStateFailed, "failed"))
	}
	return func(yield func(a2a.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (eventMetaAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// eventName is the "ev" metadata of a status or artifact update, with
// the event's kind ("status" or "artifact"), and whether it has one.
func eventName(ev a2a.Event) (string, bool) {
	var kind string
	var md map[string]any
	switch e := ev.(type) {
	case *a2a.TaskArtifactUpdateEvent:
		kind, md = "artifact", e.Metadata
	case *a2a.TaskStatusUpdateEvent:
		kind, md = "status", e.Metadata
	}
	name, ok := md["ev"].(string)
	return kind + " " + name, ok
}

// eventNames is the eventName of a stream's events that have one, in
// order.
func eventNames(t *testing.T, events iter.Seq2[a2a.Event, error]) []string {
	t.Helper()
	var names []string
	for ev, err := range events {
		if err != nil {
			t.Fatal(err)
		}
		if name, ok := eventName(ev); ok {
			names = append(names, name)
		}
	}
	return names
}

// eventMetaDoors serves eventMetaAgent behind a pipeline's pool: a
// client of the agent itself, and the pipeline's A2A v1.0 (a2a-go/v2)
// and v0.3 (a2a-go v0.3) clients of the pool.
func eventMetaDoors(t *testing.T) (direct, c *a2aclient.Client, v03 *v03Conv) {
	t.Helper()
	url, _ := startV1(t, eventMetaAgent{})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	return up.Client(t, url), v1Client(t, p, "agent"), openV03(t, p, "agent").(*v03Conv)
}

// TestEventMetadataReachA2AClients: the metadata of a bridged A2A agent's
// artifact-update events (text written as chunks, a data part written
// natively) and of its final status-update (completed, input-required,
// rejected, failed) reaches the pipeline's stream clients on the same
// events, as a client of the agent itself gets it: A2A v1.0 (a2a-go/v2)
// and v0.3 (a2a-go v0.3). It was dropped: the stream's events carried
// the pipeline's metadata alone.
func TestEventMetadataReachA2AClients(t *testing.T) {
	t.Parallel()
	direct, c, v03 := eventMetaDoors(t)
	ctx := testCtx(t)
	for _, text := range []string{"work", "ask", "reject", "fail"} {
		want := eventNames(t, direct.SendStreamingMessage(ctx, up.Msg(text)))
		if len(want) == 0 {
			t.Fatalf("%s: the agent's own stream has no event metadata", text)
		}
		if got := eventNames(t, c.SendStreamingMessage(ctx, up.Msg(text))); !slices.Equal(got, want) {
			t.Errorf("%s: the pipeline's A2A v1.0 stream's event metadata %q, want the agent's %q", text, got, want)
		}
		var got03 []string
		for ev, err := range v03.c.SendStreamingMessage(ctx, v03.params(text)) {
			if err != nil {
				t.Fatalf("%s: A2A v0.3 message/stream: %v", text, err)
			}
			v1, err := a2av0.ToV1Event(ev)
			if err != nil {
				t.Fatalf("%s: A2A v0.3 event %+v: %v", text, ev, err)
			}
			if name, ok := eventName(v1); ok {
				got03 = append(got03, name)
			}
		}
		if !slices.Equal(got03, want) {
			t.Errorf("%s: the pipeline's A2A v0.3 stream's event metadata %q, want the agent's %q", text, got03, want)
		}
	}
}

// TestStatusEventMetadataInTask: the metadata of a bridged A2A agent's
// final status-update (completed, input-required, rejected, failed) is
// the metadata of the task the pipeline's A2A clients read (GetTask,
// a2a-go/v2; tasks/get, a2a-go v0.3), as a2a-go's task manager merges an
// event's metadata into the task a client of the agent reads. The
// pipeline's task had none.
func TestStatusEventMetadataInTask(t *testing.T) {
	t.Parallel()
	direct, c, v03 := eventMetaDoors(t)
	ctx := testCtx(t)
	// taskOf is the task of SendMessage's answer read with GetTask.
	taskOf := func(what string, res a2a.SendMessageResult, err error, get func(a2a.TaskID) (*a2a.Task, error)) *a2a.Task {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		task, err := get(res.TaskInfo().TaskID)
		if err != nil {
			t.Fatalf("%s: GetTask: %v", what, err)
		}
		return task
	}
	getter := func(c interface {
		GetTask(context.Context, *a2a.GetTaskRequest) (*a2a.Task, error)
	}) func(a2a.TaskID) (*a2a.Task, error) {
		return func(id a2a.TaskID) (*a2a.Task, error) { return c.GetTask(ctx, &a2a.GetTaskRequest{ID: id}) }
	}
	for _, text := range []string{"work", "ask", "reject", "fail"} {
		res, err := direct.SendMessage(ctx, up.Msg(text))
		want := taskOf(text+": the agent", res, err, getter(direct)).Metadata
		if len(want) == 0 {
			t.Fatalf("%s: the agent's own task has no metadata", text)
		}
		res, err = c.SendMessage(ctx, up.Msg(text))
		if got := taskOf(text, res, err, getter(c)).Metadata; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the pipeline's A2A v1.0 task's metadata %v, want the agent's %v", text, got, want)
		}
		old, err := v03.c.SendMessage(ctx, v03.params(text))
		if err != nil {
			t.Fatalf("%s: A2A v0.3 message/send: %v", text, err)
		}
		got03, err := v03.c.GetTask(ctx, &a2a03.TaskQueryParams{ID: old.TaskInfo().TaskID})
		if err != nil {
			t.Fatalf("%s: A2A v0.3 tasks/get: %v", text, err)
		}
		if !reflect.DeepEqual(got03.Metadata, want) {
			t.Errorf("%s: the pipeline's A2A v0.3 task's metadata %v, want the agent's %v", text, got03.Metadata, want)
		}
	}
}
