package a2a

import (
	"fmt"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// avStep is one chunk of an interleaved scenario: its delta kind, text
// and llm_response_id.
type avStep struct{ kind, text, llm string }

// avInterleaved is request id's frames: a chunk per step, then the final
// frame end (its sequence set here).
func avInterleaved(id string, steps []avStep, end *e2a.Response) []*e2a.Response {
	var frames []*e2a.Response
	for i, s := range steps {
		frames = append(frames, conformance.Chunk(id, int64(i), s.kind, s.text, s.llm))
	}
	end.Sequence = int64(len(steps))
	end.ResponseID = fmt.Sprintf("rsp-%s-%d", id, end.Sequence)
	return append(frames, end)
}

// avInterleavedScenarios are turns whose model responses interleave
// reasoning and answer text chunks (reasoning, text, reasoning, text
// within one llm_response_id), completed, failed and interrupted, with and
// without llm_response_id, each with the number of agent messages
// tasks/get has.
func avInterleavedScenarios() []struct {
	sc   conformance.Scenario
	msgs int
} {
	r, x := e2a.DeltaReasoning, e2a.DeltaText
	one := func(llm string) []avStep {
		return []avStep{{r, "Let me ", llm}, {x, "Hello", llm}, {r, "think.", llm}, {x, ", world", llm}}
	}
	done := func(id, result string) *e2a.Response {
		return conformance.Frame(id, 0, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": result}}, nil)
	}
	two := append(one("chatcmpl-1"), avStep{x, "Then ", "chatcmpl-2"}, avStep{r, "Sum ", "chatcmpl-2"},
		avStep{x, "done", "chatcmpl-2"}, avStep{r, "up.", "chatcmpl-2"}, avStep{x, ".", "chatcmpl-2"})
	failed := conformance.Frame("req_il_fail", 0, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: "handler_error", Message: "model overloaded"}, nil)
	input := conformance.Frame("req_il_input", 0, e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, e2a.InterruptBody(e2a.StateInputRequired, "Which city?"), nil)
	return []struct {
		sc   conformance.Scenario
		msgs int
	}{
		{conformance.Scenario{Name: "one_response", Frames: avInterleaved("req_il_one", one("chatcmpl-1"), done("req_il_one", "Hello, world"))}, 2},
		{conformance.Scenario{Name: "two_responses", Frames: avInterleaved("req_il_two", two, done("req_il_two", "Hello, worldThen done."))}, 4},
		{conformance.Scenario{Name: "no_llm_response_id", Frames: avInterleaved("req_il_nollm", one(""), done("req_il_nollm", "Hello, world"))}, 2},
		{conformance.Scenario{Name: "failed", Frames: avInterleaved("req_il_fail", one("chatcmpl-1"), failed)}, 3},
		{conformance.Scenario{Name: "input_required", Frames: avInterleaved("req_il_input", two, input)}, 5},
	}
}

// TestAgentVaultInterleavedIsTheTask: when reasoning and answer text
// chunks interleave within one model response, the tasks/sendSubscribe
// stream writes that response's messages as tasks/get has them (the
// reasoning, then the answer, each one task_message: not one per run of
// chunks), for one response and two, completed, failed and interrupted,
// without llm_response_id too; and a client that resumes after any event
// id rebuilds the same messages and artifacts as one that read it whole.
func TestAgentVaultInterleavedIsTheTask(t *testing.T) {
	for _, c := range avInterleavedScenarios() {
		sc := c.sc
		sc.Final = true
		t.Run(sc.Name, func(t *testing.T) {
			env := &e2a.Envelope{RequestID: sc.RequestID(), Params: map[string]any{"text": "question"}}
			task := a2amap.V03Task(a2amap.BuildTask("task-002", "ctx-001", []a2amap.Request{{Envelope: env, Frames: sc.Frames}}, nil))
			avStreamIsTask(t, sc, task)
			if msgs, _ := avRebuilt(t, avRender(t, sc, 0)); len(msgs) != c.msgs {
				t.Errorf("%d task_message events, want %d: %s", len(msgs), c.msgs, mustJSON(msgs))
			}
			avResumeEveryID(t, sc)
		})
	}
}

// TestAgentVaultTextFramesResume: the text fast paths' frames
// (conformance.TextFrames: runs of text with and without
// llm_response_id, split by reasoning, another response and a tool call)
// resumed after any event id rebuild what the whole stream does. (Not
// compared with tasks/get: it places the reply of a response without
// reasoning after those with, where the stream has it in order.)
func TestAgentVaultTextFramesResume(t *testing.T) {
	avResumeEveryID(t, conformance.Scenario{Name: "text_frames", Frames: conformance.TextFrames(), Final: true})
}
