package a2abridge_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// adkAgent answers as an ADK agent (google-adk's A2A executor and part
// converter) does: working status messages holding the model's parts, a
// thought a text part marked {"adk_thought": true}, a function call and
// its response data parts marked {"adk_type": "function_call"} and
// "function_response"; then its answer as an artifact, completed.
type adkAgent struct{}

func (adkAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	part := func(p *a2a.Part, key string, v any) *a2a.Part {
		p.Metadata = map[string]any{key: v}
		return p
	}
	working := func(parts ...*a2a.Part) a2a.Event {
		return a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, parts...))
	}
	call := map[string]any{"id": "adk-1", "name": "lookup", "args": map[string]any{"q": "x"}}
	resp := map[string]any{"id": "adk-1", "name": "lookup", "response": map[string]any{"result": "found"}}
	answer := a2a.NewArtifactUpdateEvent(ec, "answer", a2a.NewTextPart("It is found."))
	answer.Append, answer.LastChunk = false, true
	return func(yield func(a2a.Event, error) bool) {
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
			yield(working(part(a2a.NewTextPart("Let me look it up."), "adk_thought", true),
				part(a2a.NewDataPart(call), "adk_type", "function_call")), nil) &&
			yield(working(part(a2a.NewDataPart(resp), "adk_type", "function_response")), nil) &&
			yield(answer, nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (adkAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestADKParts: an ADK agent's thought and its function call and
// response, in its working status messages, are marked as the trpc
// spec's markers (thought, type) mark them: the bridge writes the
// status-updates as the agent sent them, the thought marked thought:
// true and the calls type function_call and function_response, so that
// the A2A doors keep them from a client that did not ask for them, and
// an ACP client gets the thought as a thought and the calls as tool
// calls. The answer's text (E2A's text deltas) is the answer alone. The
// thought was written as the answer's text (in e2a.complete's result
// too) and the calls as opaque data parts.
func TestADKParts(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, adkAgent{})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("agent")))
	bridgePool(t, p, "agent", url)
	a := p.Ask(t, "agent", `{"params":{"text":"find x"}}`)
	if got := a.Text(e2a.DeltaText); got != "It is found." {
		t.Errorf("text %q, want only the answer %q", got, "It is found.")
	}
	var marks []string
	for _, pt := range statusParts(t, a.Frames) {
		switch {
		case pt.Text() != "":
			marks = append(marks, fmt.Sprintf("text %q thought=%v", pt.Text(), pt.Metadata["thought"]))
		case pt.Data() != nil:
			d, _ := pt.Data().(map[string]any)
			marks = append(marks, fmt.Sprintf("data %v type=%v", d["id"], pt.Metadata["type"]))
		}
	}
	want := []string{`text "Let me look it up." thought=true`, "data adk-1 type=function_call", "data adk-1 type=function_response"}
	if !slices.Equal(marks, want) {
		t.Errorf("the status-updates' parts %q, want %q", marks, want)
	}
	acpConv := openACP(t, p, "agent").(*acpConv)
	if s := acpConv.send(t, "find x"); s.reasoning != "Let me look it up." || s.text != "It is found." {
		t.Errorf("ACP: thoughts %q, text %q; want the thought and the answer", s.reasoning, s.text)
	}
	var calls []string
	for _, u := range acpConv.last {
		switch {
		case u.ToolCall != nil:
			calls = append(calls, "call "+string(u.ToolCall.ToolCallId))
		case u.ToolCallUpdate != nil:
			calls = append(calls, "update "+string(u.ToolCallUpdate.ToolCallId))
		}
	}
	if len(calls) != 2 {
		t.Errorf("ACP: tool updates %q, want the call and its response", calls)
	}
}
