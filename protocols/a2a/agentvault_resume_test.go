package a2a_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols"
)

// avResumeAgent streams its answer's text, then a tool call (as a model
// does that answers and calls a tool: the OpenAI bridge passes its
// tool_calls on), then completes with the answer as its result, as the
// model bridges and the demo agent do.
func avResumeAgent(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	for _, d := range []string{"Sunny ", "today."} {
		if err := w.Chunk(e2a.DeltaText, d); err != nil {
			return err
		}
		if err := w.Sync(); err != nil {
			return err
		}
	}
	if err := w.Chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: "call_9", Name: "lookup", Args: map[string]any{"q": "x"}}); err != nil {
		return err
	}
	if err := w.Sync(); err != nil {
		return err
	}
	return w.Complete("Sunny today.")
}

// avSSEIDs are the (event, id) of an SSE body's events with an id.
func avSSEIDs(t *testing.T, resp *http.Response) (events, ids []string) {
	t.Helper()
	defer resp.Body.Close()
	for _, ev := range testkit.MustReadSSE(t, resp.Body) {
		if ev.Event != "" && ev.ID != "" {
			events, ids = append(events, ev.Event), append(ids, ev.ID)
		}
	}
	return events, ids
}

// TestAgentVaultResumeAfterToolCall: an AgentVault client that lost
// tasks/sendSubscribe right after the tool call's task_artifact (the last
// event before the turn's end) resumes after its id (Last-Event-ID): it
// has the answer's task_message already and gets only the end (COMPLETED),
// not the final frame's result again as the answer (the renderer is a
// render.Primer: its mapper learns of the content before the resume
// point), so it rebuilds what tasks/get has.
func TestAgentVaultResumeAfterToolCall(t *testing.T) {
	auth := pipetest.KeyAuth(t, map[string]string{"alice": "alice-key-0123456789"}, nil)
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	p.Pool("av", agent.HandlerFunc(avResumeAgent))
	alice := avClient{t, p.URL, "alice-key-0123456789"}

	whole := readAV(t, alice.post("tasks/sendSubscribe", `{"message":`+avText("weather?")+`}`, true), nil)
	id := whole.taskID
	task := alice.get(id)
	sameView(t, task, whole) // read whole, the stream is the task

	resp := alice.post("tasks/sendSubscribe", `{"id":"`+id+`"}`, true)
	events, ids := avSSEIDs(t, resp)
	last := ""
	for i, e := range events {
		if e == "task_artifact" {
			last = ids[i]
		}
	}
	if last == "" {
		t.Fatalf("no task_artifact with an id: %v %v", events, ids)
	}
	resp = avResume(t, p.URL, alice.key, id, last)
	rest := readAV(t, resp, nil)
	if len(rest.messages) != 0 {
		t.Errorf("resumed after the tool call's event %s: %d task_message, want none (the client has the answer): %s\ntasks/get: %s",
			last, len(rest.messages), avJSON(rest.messages), avJSON(agentMessages(task)))
	}
	if n := len(rest.states); n == 0 || rest.states[n-1] != task.State {
		t.Errorf("resumed: states %v, want the end %s", rest.states, task.State)
	}
}

// TestAgentVaultErrorMidMessage: a tasks/sendSubscribe stream that ends
// on an error while a message's text is held (here egress's idle limit
// passes while the agent pauses mid-answer) writes the error event, not the
// text held so far: the client resumes after the last id it has
// (Last-Event-ID) once the agent goes on and gets the whole message then,
// one task_message ("Working on it."), as tasks/get has it, never its two
// halves.
func TestAgentVaultErrorMidMessage(t *testing.T) {
	auth := pipetest.KeyAuth(t, map[string]string{"alice": "alice-key-0123456789"}, nil)
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	release := make(chan struct{})
	p.Pool("av", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		say := func(d string) error {
			if err := w.Chunk(e2a.DeltaText, d); err != nil {
				return err
			}
			return w.Sync()
		}
		if err := say("Work"); err != nil {
			return err
		}
		if err := say("ing"); err != nil {
			return err
		}
		select { // a pause mid-answer, past egress's idle limit
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := say(" on it."); err != nil {
			return err
		}
		return w.Complete("Working on it.")
	}))
	// A front whose egress ends a stream idle for 300ms (its idle limit).
	f := pipetest.ServeFront(t, p.NC, []egress.Option{egress.WithWaitLimits(30*time.Second, 300*time.Millisecond),
		egress.WithProjections(protocols.FillProjections)}, ingress.WithAuth(auth))
	alice := avClient{t, f.URL, "alice-key-0123456789"}

	first := readAV(t, alice.post("tasks/sendSubscribe", `{"message":`+avText("go")+`}`, true), nil)
	last := first.lastID
	if len(first.errors) == 0 {
		t.Fatalf("the first stream did not end on an error: %v", first.events)
	}
	close(release)
	resp := avResume(t, p.URL, alice.key, first.taskID, last)
	rest := readAV(t, resp, nil)
	task := alice.get(first.taskID)
	t.Logf("first stream %v (last id %s), resumed %v", first.events, last, rest.events)
	sameView(t, task, first, rest)
}

// avResume resubscribes (tasks/sendSubscribe) to task id with key after
// event id last (Last-Event-ID).
func avResume(t *testing.T, url, key, id, last string) *http.Response {
	t.Helper()
	return testkit.Open(t, http.MethodPost, url+"/a2a?agent=av",
		fmt.Sprintf(`{"jsonrpc":"2.0","id":"req-2","method":"tasks/sendSubscribe","params":{"id":%q}}`, id),
		"Content-Type", "application/json", "X-Api-Key", key, "Accept", "text/event-stream", "Last-Event-ID", last)
}
