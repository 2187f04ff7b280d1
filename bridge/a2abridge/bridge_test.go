package a2abridge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestBridge: real A2A agents (a2a-go/v2's server) over each binding, with
// and without streaming, and a v0.3 agent, behind the bridge: the text,
// thoughts and data of a stream reach E2A; an agent asking for input
// interrupts the turn with its question, and the answer, sent by the
// a2a-go/v2 client to the pipeline's task, reaches the same upstream task;
// a failure is upstream_failed with the agent's message.
func TestBridge(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		o    up.Options
	}{
		{"jsonrpc", up.Options{Binding: up.JSONRPC}},
		{"rest", up.Options{Binding: up.HTTPJSON}},
		{"grpc", up.Options{Binding: up.GRPC}},
		{"jsonrpc-nostream", up.Options{Binding: up.JSONRPC, NoStreaming: true}},
		{"v03-jsonrpc", up.Options{Binding: up.JSONRPC, V03: true}},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			srv := up.Start(t, v.o)
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", srv.BaseURL())

			a := p.Ask(t, "agent", `{"params":{"text":"stream: hello"}}`)
			if got := a.Text(e2a.DeltaText); got != up.StreamText("hello") {
				t.Errorf("stream text %q, want %q", got, up.StreamText("hello"))
			}
			if got := a.Text(e2a.DeltaReasoning); got != up.Thought("hello") {
				t.Errorf("thought %q, want %q", got, up.Thought("hello"))
			}
			if f := a.Final(); f == nil || f.ResponseKind != e2a.KindComplete {
				t.Errorf("final frame %+v", f)
			}
			data := 0
			for _, f := range a.Frames {
				if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaCustom && strings.Contains(fmt.Sprint(c.Delta), "k:v") {
					data++
				}
			}
			if data != 1 {
				t.Errorf("data parts %d, want 1", data)
			}

			a = p.Ask(t, "agent", `{"params":{"text":"fail: boom"}}`)
			if f := a.Final(); f == nil || f.ResponseKind != e2a.KindError || !strings.Contains(string(f.Body), bridge.CodeFailed) ||
				!strings.Contains(string(f.Body), up.FailText("boom")) {
				t.Errorf("fail: final %+v", f)
			}

			a = p.Ask(t, "agent", `{"session_id":"auth-1","params":{"text":"auth: calendar"}}`)
			if st, msg, ok := a.Final().Interrupt(); !ok || st != e2a.StateAuthRequired || msg != up.AuthPrompt || a.State != e2a.StateAuthRequired {
				t.Errorf("auth: %v %q %q (state %q)", ok, st, msg, a.State)
			}
			a = p.Ask(t, "agent", `{"session_id":"auth-1","params":{"text":"token-ok"}}`)
			if got := a.Text(e2a.DeltaText); !strings.Contains(got, up.AuthReply("token-ok")) {
				t.Errorf("auth answer %q, want %q in it", got, up.AuthReply("token-ok"))
			}

			// ask → input-required → the answer continues the same upstream task.
			c := v1Client(t, p, "agent")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ask: name"))})
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateInputRequired {
				t.Fatalf("ask: %+v", res)
			}
			if _, q := taskText(task); q != up.AskQuestion {
				t.Errorf("question %q", q)
			}
			first := srv.LastMessage()
			res, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("Ada"))})
			if err != nil {
				t.Fatal(err)
			}
			// The pipeline answers a text-only turn with a Message, or with
			// the task (its own rendering rules, not the bridge's).
			var reply string
			switch r := res.(type) {
			case *a2a.Task:
				if r.ID != task.ID || r.Status.State != a2a.TaskStateCompleted {
					t.Fatalf("answer: %+v", r)
				}
				reply, _ = taskText(r)
			case *a2a.Message:
				for _, p := range r.Parts {
					reply += p.Text()
				}
			}
			if !strings.Contains(reply, up.AskReply("Ada")) {
				t.Errorf("reply %q, want %q", reply, up.AskReply("Ada"))
			}
			got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil || got.Status.State != a2a.TaskStateCompleted {
				t.Errorf("GetTask after the answer: %+v %v", got, err)
			}
			calls := srv.Executions()
			if len(calls) < 2 {
				t.Fatalf("executions %d", len(calls))
			}
			if last := srv.LastMessage(); last.TaskID == "" || (first != nil && first.TaskID != "" && last.TaskID != first.TaskID) {
				t.Errorf("the answer reached upstream task %q, the question came from %q", last.TaskID, first.TaskID)
			}
		})
	}
}

// TestBridgeCancel: cancelling the pipeline's task of a long agent task
// cancels the agent's task (CancelTask reaches it).
func TestBridgeCancel(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 20 * time.Millisecond, SlowChunks: 1000})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL())
	c := v1Client(t, p, "agent")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var taskID a2a.TaskID
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("slow: x"))}) {
		if err != nil {
			t.Fatal(err)
		}
		if ae, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			taskID = ae.TaskID
			break
		}
	}
	if taskID == "" {
		t.Fatal("no artifact event")
	}
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: taskID}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the agent's task cancelled", func() bool { return len(srv.Cancels()) > 0 })
}
