package push

import (
	"fmt"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// benchFrames is a demo-like answer of n frames, each stored alone: a
// reasoning chunk, a tool call and its response, text chunks, and the
// final frame.
func benchFrames(id string, n int) []*e2a.Response {
	fs := []*e2a.Response{
		conformance.Chunk(id, 0, e2a.DeltaReasoning, "Thinking about: the question", ""),
		conformance.Chunk(id, 1, e2a.DeltaTool, map[string]any{"type": "function_call", "id": "call-1", "name": "lookup", "args": map[string]any{"query": "q"}}, ""),
		conformance.Chunk(id, 2, e2a.DeltaTool, map[string]any{"type": "function_response", "id": "call-1", "name": "lookup", "response": map[string]any{"ok": true}}, ""),
	}
	for i := int64(len(fs)); i < int64(n-1); i++ {
		fs = append(fs, conformance.Chunk(id, i, e2a.DeltaText, fmt.Sprintf("word%d ", i), ""))
	}
	return append(fs, conformance.Frame(id, int64(n-1), e2a.KindComplete, e2a.StatusSucceeded, true,
		e2a.CompleteBody{Result: map[string]any{"content": "done"}}, nil))
}

// BenchmarkV03PushBody measures what the stage spends on the updates of a
// task with an A2A v0.3 config (renderFrame: the mapper, the v1.0 event
// and the v0.3 body, the whole Task after the update), over answers of
// 100, 1,000 and 4,000 frames each stored alone. An op is one answer;
// ns/update is the mean cost of one frame's updates over it.
func BenchmarkV03PushBody(b *testing.B) {
	for _, n := range []int{100, 1000, 4000} {
		b.Run(fmt.Sprintf("frames=%d", n), func(b *testing.B) {
			id := "req-bench"
			fs := benchFrames(id, n)
			env := &e2a.Envelope{RequestID: id, TaskID: "task-002", ContextID: "ctx-001", Params: map[string]any{"text": "the question"}}
			p := a2amap.Params{TaskID: env.TaskID, ContextID: env.ContextID}
			updates := 0
			b.ReportAllocs()
			for b.Loop() {
				st := newBenchState(id, p, env)
				for _, f := range fs {
					evs, err := st.renderFrame(id, p, f, nil)
					if err != nil {
						b.Fatal(err)
					}
					updates += len(evs)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/update")
			if updates < b.N*(n-4) {
				b.Fatalf("%d updates of %d answers of %d frames", updates, b.N, n)
			}
		})
	}
}

// newBenchState is the state of a first turn of a task with a v0.3 config,
// as render makes it.
func newBenchState(id string, p a2amap.Params, env *e2a.Envelope) *mapState {
	st := &mapState{m: a2amap.NewStreamMapper(id, p, 0), tasks: true}
	st.tb = a2amap.NewTaskBuilder(st.m.TaskID(), st.m.ContextID(), nil, env)
	return st
}
