package a2a_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// exampleFrames are the frames of request req-1 as the conformance
// scenarios build them (task task-002, context ctx-001, one second apart
// from conformance.Time): a reasoning chunk, two text chunks of one model
// response (llm_response_id chatcmpl-1) and the final e2a.complete.
func exampleFrames() []*e2a.Response {
	return []*e2a.Response{
		conformance.Chunk("req-1", 0, e2a.DeltaReasoning, "The user greets me.", "chatcmpl-1"),
		conformance.Chunk("req-1", 1, e2a.DeltaText, "Hello", "chatcmpl-1"),
		conformance.Chunk("req-1", 2, e2a.DeltaText, " world", "chatcmpl-1"),
		conformance.Frame("req-1", 3, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "Hello world"}}, nil),
	}
}

// renderExample renders frames with the renderer newRenderer builds as
// egress drives it (Start, each frame in order, End), through
// conformance.Run, and prints the status, the Content-Type and the body.
// Not conformance.RenderFrames: that one stops before End, where
// message/send writes its one answer, and gives the body only, while the
// Content-Type is what tells the stream (text/event-stream) from that
// answer (application/json).
func renderExample(newRenderer render.NewRenderer, frames []*e2a.Response) {
	steps := []conformance.Step{{Kind: conformance.StepStart}}
	for i := range frames {
		steps = append(steps, conformance.Step{Kind: conformance.StepFrame, Frame: i})
	}
	steps = append(steps, conformance.Step{Kind: conformance.StepEnd})
	run, err := conformance.Run(conformance.Scenario{Frames: frames, Steps: steps}, newRenderer)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(run.Status, run.Header.Get("Content-Type"))
	fmt.Print(string(run.Body))
}

// NewStream renders the frames of a message/stream call as A2A v0.3 SSE:
// one JSON-RPC response per event, carrying the call's id, opening with
// the submitted status-update and ending with the final one. Each frame's
// last event has the frame's sequence as SSE id, from which a client
// resumes (Last-Event-ID). The client below did not declare the trpc
// interaction spec (Params.Interaction), so the agent's reasoning is not
// sent: frame 0 has no event, and the stream opens with frame 1.
func ExampleNewStream() {
	p := a2amap.Params{
		JSONRPCID: json.RawMessage(`"call-7"`),
		TaskID:    "task-002",
		ContextID: "ctx-001",
		Submitted: conformance.Time().Add(-time.Second),
	}
	renderExample(func(o *render.Output) render.Renderer {
		return a2a.NewStream(o, "req-1", p, 0)
	}, exampleFrames())
	// Output:
	// 200 text/event-stream
	// : ok
	//
	// data: {"jsonrpc":"2.0","id":"call-7","result":{"kind":"status-update","contextId":"ctx-001","final":false,"status":{"state":"submitted","timestamp":"2025-01-23T10:29:59Z"},"taskId":"task-002"}}
	//
	// id: 1
	// data: {"jsonrpc":"2.0","id":"call-7","result":{"kind":"artifact-update","artifact":{"artifactId":"chatcmpl-1","parts":[{"kind":"text","text":"Hello"}]},"contextId":"ctx-001","taskId":"task-002","metadata":{"llm_response_id":"chatcmpl-1","object_type":"chat.completion.chunk","tag":""}}}
	//
	// id: 2
	// data: {"jsonrpc":"2.0","id":"call-7","result":{"kind":"artifact-update","append":true,"artifact":{"artifactId":"chatcmpl-1","parts":[{"kind":"text","text":" world"}]},"contextId":"ctx-001","taskId":"task-002","metadata":{"llm_response_id":"chatcmpl-1","object_type":"chat.completion.chunk","tag":""}}}
	//
	// id: 3
	// data: {"jsonrpc":"2.0","id":"call-7","result":{"kind":"status-update","contextId":"ctx-001","final":true,"status":{"state":"completed","timestamp":"2025-01-23T10:30:03Z"},"taskId":"task-002"}}
}

// NewSend renders the frames of a message/send call as its one JSON-RPC
// response: the agent's text as a Message, since the request completed
// with one content message (a Task otherwise).
func ExampleNewSend() {
	p := a2amap.Params{JSONRPCID: json.RawMessage(`1`)}
	renderExample(func(o *render.Output) render.Renderer {
		return a2a.NewSend(o, "req-1", p)
	}, exampleFrames())
	// Output:
	// 200 application/json
	// {"jsonrpc":"2.0","id":1,"result":{"kind":"message","messageId":"rsp-req-1-0","contextId":"ctx-001","metadata":{"llm_response_id":"chatcmpl-1","object_type":"chat.completion","tag":""},"parts":[{"kind":"text","text":"Hello world"}],"role":"agent"}}
}

// Error maps the pipeline's errors to the JSON-RPC errors of A2A's error
// table, the pipeline's own code in data.
func ExampleError() {
	for _, err := range []error{
		egress.ErrNotFound,
		egress.ErrNotCancelable,
		fmt.Errorf("%w: Last-Event-ID %q is not a sequence", egress.ErrBadRequest, "x"),
		errors.New("boom"),
	} {
		b, _ := json.Marshal(a2a.Error(err))
		fmt.Println(string(b))
	}
	// Output:
	// {"code":-32001,"message":"Task not found","data":{"code":"not_found"}}
	// {"code":-32002,"message":"Task cannot be canceled","data":{"code":"not_cancelable"}}
	// {"code":-32602,"message":"bad request: Last-Event-ID \"x\" is not a sequence","data":{"code":"bad_request"}}
	// {"code":-32603,"message":"boom","data":{"code":"internal"}}
}
