package ingress_test

import (
	"context"
	"strings"
	"testing"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacyclient "github.com/a2aproject/a2a-go/a2aclient"
	legacycard "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// badFinalPrefix asks unreadableAgent to end its turn with the
// unreadable frame.
const badFinalPrefix = "bad-final"

// unreadableStatus is an a2a.stream_event of a valid branch whose payload
// is not the A2A object it names (its status is a number): the agent
// runtime stores it (it checks the branch only), as it would a raw
// publisher's.
var unreadableStatus = e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate, Payload: map[string]any{"status": 42}}

// unreadableAgent streams "before ", then the unreadable a2a.stream_event:
// not final, followed by "after" and the completion; final on a message
// starting with badFinalPrefix.
func unreadableAgent(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	if err := w.Chunk(e2a.DeltaText, "before "); err != nil {
		return err
	}
	if strings.HasPrefix(demo.Text(env), badFinalPrefix) {
		return w.Write(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, unreadableStatus, true)
	}
	if err := w.Write(e2a.KindA2AStreamEvent, e2a.StatusInProgress, unreadableStatus, false); err != nil {
		return err
	}
	if err := w.Chunk(e2a.DeltaText, "after"); err != nil {
		return err
	}
	return w.Complete(nil)
}

// v1Streamed is the text of a v1.0 stream's artifact-updates and its
// last status-update's state and message text.
func v1Streamed(t *testing.T, events []a2a.Event) (text string, last a2a.TaskState, msg string) {
	t.Helper()
	for _, ev := range events {
		switch e := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			text += v1Text(e.Artifact.Parts)
		case *a2a.TaskStatusUpdateEvent:
			last, msg = e.Status.State, ""
			if e.Status.Message != nil {
				msg = v1Text(e.Status.Message.Parts)
			}
		}
	}
	return text, last, msg
}

// TestUnreadableA2AFrameSkipped: an agent (a Go handler) writes an
// a2a.stream_event whose payload is not the A2A object it names between
// two text chunks, then completes. On every A2A v1.0 binding the stream
// carries the other events and ends completed (the frame is skipped, not
// an error: before, every A2A read of the request failed at that frame,
// "invalid stored frame", and a retry read it again); GetTask answers the
// task completed with the text.
func TestUnreadableA2AFrameSkipped(t *testing.T) {
	pp := pipetest.Start(t, pipetest.WithGRPC())
	pp.Pool("demo", agent.HandlerFunc(unreadableAgent))
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	eachV1Binding(t, p, 30*time.Second, func(ctx context.Context, t *testing.T, binding a2a.TransportProtocol, c *a2aclient.Client) {
		events := v1Stream(t, "SendStreamingMessage", c.SendStreamingMessage(ctx, userMessage("hello")))
		text, last, _ := v1Streamed(t, events)
		if text != "before after" || last != a2a.TaskStateCompleted {
			t.Fatalf("over %s: streamed %q, last state %s; want \"before after\", completed", binding, text, last)
		}
		task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: events[0].TaskInfo().TaskID})
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		var arts string
		for _, a := range task.Artifacts {
			arts += v1Text(a.Parts)
		}
		if task.Status.State != a2a.TaskStateCompleted || arts != "before after" {
			t.Fatalf("GetTask over %s: %s with %q, want completed with \"before after\"", binding, task.Status.State, arts)
		}
	})
}

// TestUnreadableFinalA2AFrameFails: the agent's final frame is the
// unreadable a2a.stream_event. On every A2A v1.0 binding the stream still
// ends, failed, with a2amap.UnreadableFinal as the status message after
// the text streamed before it; GetTask and ListTasks answer the task
// failed.
func TestUnreadableFinalA2AFrameFails(t *testing.T) {
	pp := pipetest.Start(t, pipetest.WithGRPC())
	pp.Pool("demo", agent.HandlerFunc(unreadableAgent))
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	eachV1Binding(t, p, 30*time.Second, func(ctx context.Context, t *testing.T, binding a2a.TransportProtocol, c *a2aclient.Client) {
		events := v1Stream(t, "SendStreamingMessage", c.SendStreamingMessage(ctx, userMessage(badFinalPrefix)))
		text, last, msg := v1Streamed(t, events)
		if text != "before " || last != a2a.TaskStateFailed || msg != a2amap.UnreadableFinal {
			t.Fatalf("over %s: streamed %q, last state %s (%q); want \"before \", failed (%q)", binding, text, last, msg, a2amap.UnreadableFinal)
		}
		id := events[0].TaskInfo().TaskID
		task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		if task.Status.State != a2a.TaskStateFailed || task.Status.Message == nil || v1Text(task.Status.Message.Parts) != a2amap.UnreadableFinal {
			t.Fatalf("GetTask over %s: status %+v, want failed (%q)", binding, task.Status, a2amap.UnreadableFinal)
		}
		list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: task.ContextID})
		if err != nil {
			t.Fatalf("ListTasks: %v", err)
		}
		if len(list.Tasks) != 1 || list.Tasks[0].Status.State != a2a.TaskStateFailed {
			t.Fatalf("ListTasks over %s: %+v, want the failed task", binding, list.Tasks)
		}
	})
}

// TestUnreadableA2AFrameV03: an A2A v0.3 client (a2a-go v0.3) reads the
// same requests: message/stream carries the other events and ends
// completed (the unreadable frame skipped), or failed with
// a2amap.UnreadableFinal when that frame is final; tasks/get answers each
// task in that state, and tasks/resubscribe of the finished task ends.
func TestUnreadableA2AFrameV03(t *testing.T) {
	pp := pipetest.Start(t)
	pp.Pool("demo", agent.HandlerFunc(unreadableAgent))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	card, err := legacycard.NewResolver(nil).Resolve(ctx, pp.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := legacyclient.NewFromCard(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()
	for _, tc := range []struct {
		text, streamed string
		state          legacy.TaskState
		msg            string
	}{
		{"hello", "before after", legacy.TaskStateCompleted, ""},
		{badFinalPrefix, "before ", legacy.TaskStateFailed, a2amap.UnreadableFinal},
	} {
		var streamed, msg string
		var last *legacy.TaskStatusUpdateEvent
		for ev, err := range c.SendStreamingMessage(ctx, &legacy.MessageSendParams{Message: legacy.NewMessage(legacy.MessageRoleUser, legacy.TextPart{Text: tc.text})}) {
			if err != nil {
				t.Fatalf("message/stream %q: %v", tc.text, err)
			}
			switch e := ev.(type) {
			case *legacy.TaskArtifactUpdateEvent:
				streamed += textOf(e.Artifact.Parts)
			case *legacy.TaskStatusUpdateEvent:
				last = e
			}
		}
		if last != nil && last.Status.Message != nil {
			msg = textOf(last.Status.Message.Parts)
		}
		if streamed != tc.streamed || last == nil || !last.Final || last.Status.State != tc.state || msg != tc.msg {
			t.Fatalf("message/stream %q: streamed %q, last status %+v (%q); want %q, final %s (%q)", tc.text, streamed, last, msg, tc.streamed, tc.state, tc.msg)
		}
		task, err := c.GetTask(ctx, &legacy.TaskQueryParams{ID: last.TaskID})
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		if task.Status.State != tc.state {
			t.Fatalf("tasks/get %q: %s, want %s", tc.text, task.Status.State, tc.state)
		}
		var end *legacy.TaskStatusUpdateEvent
		for ev, err := range c.ResubscribeToTask(ctx, &legacy.TaskIDParams{ID: last.TaskID}) {
			if err != nil {
				t.Fatalf("tasks/resubscribe %q: %v", tc.text, err)
			}
			if su, ok := ev.(*legacy.TaskStatusUpdateEvent); ok {
				end = su
			}
		}
		if end == nil || !end.Final || end.Status.State != tc.state {
			t.Fatalf("tasks/resubscribe %q: last status %+v, want final %s", tc.text, end, tc.state)
		}
	}
}
