package a2a

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// BenchmarkV03Request: what answering one request costs in A2A v0.3, per
// request (the mean over the conformance scenarios' requests that finish
// from their first frame): "stream", message/stream's SSE (NewStream);
// "send", message/send's JSON (NewSend); "task", tasks/get's task
// (a2amap.BuildTask) encoded; all over decoded frames.
func BenchmarkV03Request(b *testing.B) {
	var frames [][]*render.Frame
	for _, sc := range conformance.Scenarios() {
		if !sc.Final || sc.From > 0 || len(sc.Frames) == 0 {
			continue
		}
		var fs []*render.Frame
		for j, f := range sc.Frames {
			raw, err := json.Marshal(f)
			if err != nil {
				b.Fatal(err)
			}
			fs = append(fs, &render.Frame{Response: f, Raw: raw, StreamSeq: uint64(j + 1)})
		}
		frames = append(frames, fs)
	}
	p := a2amap.Params{JSONRPCID: json.RawMessage(`1`), TaskID: "task-1", ContextID: "ctx-1", Submitted: conformance.Time(), Interaction: true}
	rec := httptest.NewRecorder()
	run := func(b *testing.B, newRenderer func(o *render.Output, requestID string) render.Renderer) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			fs := frames[i%len(frames)]
			rec.Body.Reset()
			rend := newRenderer(render.NewOutput(rec, time.Second), fs[0].Response.RequestID)
			if err := rend.Start(); err != nil {
				b.Fatal(err)
			}
			for _, f := range fs {
				if err := rend.Frame(f); err != nil {
					b.Fatal(err)
				}
			}
			if err := rend.End(nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("stream", func(b *testing.B) {
		run(b, func(o *render.Output, id string) render.Renderer { return NewStream(o, id, p, 0) })
	})
	b.Run("send", func(b *testing.B) {
		run(b, func(o *render.Output, id string) render.Renderer { return NewSend(o, id, p) })
	})
	b.Run("task", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			fs := frames[i%len(frames)]
			env := &e2a.Envelope{RequestID: fs[0].Response.RequestID, Params: map[string]any{"text": "question"}}
			req := a2amap.Request{Envelope: env}
			for _, f := range fs {
				req.Frames = append(req.Frames, f.Response)
			}
			if _, err := json.Marshal(benchTask("task-1", "ctx-1", []a2amap.Request{req})); err != nil {
				b.Fatal(err)
			}
		}
	})
}
