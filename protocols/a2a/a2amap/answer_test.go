package a2amap_test

import (
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// TestAnswerAfterTraceAlone: an agent that streams only its reasoning, or
// a tool call and its result, then completes with the answer as its result
// (no text chunk) has that answer sent: the stream's one result
// artifact-update (lastChunk), to a client with or without the interaction
// spec, and the task's artifact (BuildTask, TaskBuilder, the Aggregator's
// Task behind message/send), the trace in history. Reasoning and tool
// events are not the answer's text, which the result repeats. The stream
// dropped it after either; the task dropped it after reasoning.
func TestAnswerAfterTraceAlone(t *testing.T) {
	const answer = "The answer is 42."
	for _, c := range []struct {
		name  string
		trace []*e2a.Response
	}{
		{"tool call", []*e2a.Response{
			conformance.Chunk("q1", 0, e2a.DeltaTool, map[string]any{"type": "function_call", "id": "c1", "name": "f", "args": "{}"}, ""),
			conformance.Chunk("q1", 1, e2a.DeltaTool, map[string]any{"type": "function_response", "id": "c1", "name": "f", "response": "42"}, ""),
		}},
		{"reasoning", []*e2a.Response{conformance.Chunk("q1", 0, e2a.DeltaReasoning, "Let me think.", "")}},
	} {
		name, trace := c.name, c.trace
		final := conformance.Frame("q1", int64(len(trace)), e2a.KindComplete, e2a.StatusSucceeded, true,
			e2a.CompleteBody{Result: map[string]any{"content": answer}}, nil)
		frames := append(slices.Clone(trace), final)
		for _, interaction := range []bool{true, false} {
			p := a2amap.Params{TaskID: "task-1", ContextID: "ctx-1", Interaction: interaction}
			m := a2amap.NewStreamMapper("q1", p, 0)
			hidden := a2amap.HiddenPart(p)
			var got string
			for _, f := range frames {
				evs, err := m.Events(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
						for _, pt := range au.Artifact.Parts {
							if (hidden == nil || !hidden(pt)) && pt.Metadata[a2amap.MetaThought] != true {
								got += pt.Text()
							}
						}
					}
				}
			}
			if got != answer {
				t.Errorf("%s, interaction %v: the stream's text %q, want %q", name, interaction, got, answer)
			}
		}
		q1 := turnRequest("q1", frames...)
		task := a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{q1}, nil)
		_, res := builtEachWay(t, task, q1, frames)
		for how, tk := range map[string]*a2a.Task{"BuildTask": task, "Aggregator": res} {
			if tk == nil {
				t.Errorf("%s, %s: no task", name, how)
				continue
			}
			if got := artifactTexts(tk); !slices.Equal(got, []string{"q1=" + answer}) {
				t.Errorf("%s, %s: artifacts %q, want the answer", name, how, got)
			}
		}
	}
}
