package a2e_test

import (
	"encoding/json"
	"fmt"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// renderExample renders frames with the A2E renderer of the request p
// describes (conformance.RenderFrames: Start, then each frame; the End
// egress calls next writes nothing after a final frame), and prints the
// Content-Type and the NDJSON answer.
func renderExample(p a2e.Params, frames ...*e2a.Response) {
	var out *render.Output // the response rendered to, for its Content-Type
	body, err := conformance.RenderFrames(func(o *render.Output) render.Renderer {
		out = o
		return a2e.NewRenderer(o, p)
	}, frames, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Header().Get("Content-Type"))
	fmt.Print(string(body))
}

// NewRenderer answers an A2E request (here a tool/call/req of id a1b2c3)
// from its frames, one NDJSON line each: content as invoke/event lines
// (text as progress, reasoning as log, other deltas as artifact; seq the
// frame's sequence), then the response of the request's type
// (tool/call/resp) with the result. Every line carries the request's id as
// req_id, its frame's id (dashes removed) as id, and its frame's time as
// ts, in Unix seconds.
func ExampleNewRenderer() {
	renderExample(a2e.Params{ReqID: "a1b2c3", ReqType: "tool/call/req"},
		conformance.Chunk("req-1", 0, e2a.DeltaReasoning, "Looking up the file.", ""),
		conformance.Chunk("req-1", 1, e2a.DeltaText, "Found 3 files", ""),
		conformance.Frame("req-1", 2, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"files": 3}}, nil),
	)
	// Output:
	// application/x-ndjson
	// {"a2e":"1.0","id":"rspreq10","type":"invoke/event","version":"1.0","ts":1737628200,"req_id":"a1b2c3","kind":"log","data":{"level":"thought","text":"Looking up the file."},"seq":0}
	// {"a2e":"1.0","id":"rspreq11","type":"invoke/event","version":"1.0","ts":1737628201,"req_id":"a1b2c3","kind":"progress","data":{"text":"Found 3 files"},"seq":1}
	// {"a2e":"1.0","id":"rspreq12","type":"tool/call/resp","version":"1.0","ts":1737628202,"req_id":"a1b2c3","result":{"files":3}}
}

// A request that fails ends with an error line instead of the response:
// the frame's code, message and details, whether a retry may succeed, and
// the capability namespace of the request's type (tool of tool/call/req).
func ExampleNewRenderer_error() {
	renderExample(a2e.Params{ReqID: "a1b2c3", ReqType: "tool/call/req"},
		conformance.Chunk("req-1", 0, e2a.DeltaText, "Working", ""),
		conformance.Frame("req-1", 1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{
			Code: e2a.ErrCodeDeadlineExceeded, Message: "the agent did not answer in time",
			Details: map[string]any{"timeout_s": 30}, Retryable: true,
		}, nil),
	)
	// Output:
	// application/x-ndjson
	// {"a2e":"1.0","id":"rspreq10","type":"invoke/event","version":"1.0","ts":1737628200,"req_id":"a1b2c3","kind":"progress","data":{"text":"Working"},"seq":0}
	// {"a2e":"1.0","id":"rspreq11","type":"error","version":"1.0","ts":1737628201,"req_id":"a1b2c3","code":"deadline_exceeded","message":"the agent did not answer in time","detail":{"timeout_s":30},"retryable":true,"capability_name":"tool"}
}

// NewError builds an error line of the front door's own (a request it
// refuses before publishing it), with a new id and the time now; here they
// are fixed so that the line printed is always the same. An error line
// has every member of A2EError, detail {} and capability_name "" included
// when it has none.
func ExampleNewError() {
	m := a2e.NewError("a1b2c3", "invalid_request", "unknown message type", false, nil)
	m.ID, m.TS = "0195f3e8c9a07b3f8e2d1c4b5a697887", 1774785600
	b, err := json.Marshal(m)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	// Output:
	// {"a2e":"1.0","id":"0195f3e8c9a07b3f8e2d1c4b5a697887","type":"error","version":"1.0","ts":1774785600,"req_id":"a1b2c3","code":"invalid_request","message":"unknown message type","detail":{},"retryable":false,"capability_name":""}
}
