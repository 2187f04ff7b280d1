package a2e_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/render"
)

// exampleFrame returns frame seq of request req-1, written at 12:00:<seq>
// on 29 March 2026.
func exampleFrame(seq int64, kind, status string, final bool, body any) *e2a.Response {
	return &e2a.Response{
		ProtocolVersion: e2a.ProtocolVersion,
		ResponseID:      "rsp-" + strconv.FormatInt(seq, 10),
		RequestID:       "req-1",
		Sequence:        seq,
		IsFinal:         final,
		Status:          status,
		ResponseKind:    kind,
		Timestamp:       e2a.FormatTime(time.Date(2026, 3, 29, 12, 0, int(seq), 0, time.UTC)),
		Provenance:      e2a.Provenance{SourceProtocol: e2a.SourceA2E},
		Body:            e2a.MarshalBody(body),
	}
}

// exampleChunk is exampleFrame of an in-progress e2a.chunk.
func exampleChunk(seq int64, deltaKind string, delta any) *e2a.Response {
	return exampleFrame(seq, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: deltaKind, Delta: delta})
}

// renderExample renders frames with the A2E renderer of the request p
// describes, as egress drives it (Start, each frame, End), and prints the
// NDJSON answer.
func renderExample(p a2e.Params, frames ...*e2a.Response) {
	rec := httptest.NewRecorder()
	o := render.NewOutput(rec, 0)
	r := a2e.NewRenderer(o, p)
	if err := r.Start(); err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range frames {
		raw, err := json.Marshal(f)
		if err != nil {
			panic(err)
		}
		if err := r.Frame(&render.Frame{Response: f, Raw: raw}); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := r.End(nil); err != nil {
		fmt.Println(err)
		return
	}
	if err := o.Flush(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Print(rec.Body.String())
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
		exampleChunk(0, e2a.DeltaReasoning, "Looking up the file."),
		exampleChunk(1, e2a.DeltaText, "Found 3 files"),
		exampleFrame(2, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"files": 3}}),
	)
	// Output:
	// 200 application/x-ndjson
	// {"a2e":"1.0","id":"rsp0","type":"invoke/event","version":"1.0","ts":1774785600,"req_id":"a1b2c3","kind":"log","data":{"level":"thought","text":"Looking up the file."},"seq":0}
	// {"a2e":"1.0","id":"rsp1","type":"invoke/event","version":"1.0","ts":1774785601,"req_id":"a1b2c3","kind":"progress","data":{"text":"Found 3 files"},"seq":1}
	// {"a2e":"1.0","id":"rsp2","type":"tool/call/resp","version":"1.0","ts":1774785602,"req_id":"a1b2c3","result":{"files":3}}
}

// A request that fails ends with an error line instead of the response:
// the frame's code, message and details, whether a retry may succeed, and
// the capability namespace of the request's type (tool of tool/call/req).
func ExampleNewRenderer_error() {
	renderExample(a2e.Params{ReqID: "a1b2c3", ReqType: "tool/call/req"},
		exampleChunk(0, e2a.DeltaText, "Working"),
		exampleFrame(1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{
			Code: e2a.ErrCodeDeadlineExceeded, Message: "the agent did not answer in time",
			Details: map[string]any{"timeout_s": 30}, Retryable: true,
		}),
	)
	// Output:
	// 200 application/x-ndjson
	// {"a2e":"1.0","id":"rsp0","type":"invoke/event","version":"1.0","ts":1774785600,"req_id":"a1b2c3","kind":"progress","data":{"text":"Working"},"seq":0}
	// {"a2e":"1.0","id":"rsp1","type":"error","version":"1.0","ts":1774785601,"req_id":"a1b2c3","code":"deadline_exceeded","message":"the agent did not answer in time","detail":{"timeout_s":30},"retryable":true,"capability_name":"tool"}
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
