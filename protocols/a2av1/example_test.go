package a2av1_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/a2aproject/a2a-go/v2/errordetails"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// exampleFrames are the frames of request req-1 as the conformance
// scenarios build them (task task-002, context ctx-001, one second apart
// from conformance.Time): two text chunks of one model response
// (llm_response_id chatcmpl-1) and the final e2a.complete.
func exampleFrames() []*e2a.Response {
	return []*e2a.Response{
		conformance.Chunk("req-1", 0, e2a.DeltaText, "Hello", "chatcmpl-1"),
		conformance.Chunk("req-1", 1, e2a.DeltaText, " world", "chatcmpl-1"),
		conformance.Frame("req-1", 2, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "Hello world"}}, nil),
	}
}

// renderExample drives the renderer newRenderer builds as egress does
// for a stream resumed at sequence from: Start, the frames before from to
// Prime (a render.Primer's: they are not written, the client has them),
// each frame from there in order, End; and prints the response. A local
// driver, not conformance.RenderFrames or conformance.Run: neither gives
// frames to Prime, which is what the resumed stream below shows.
func renderExample(newRenderer render.NewRenderer, frames []*e2a.Response, from int64) {
	rec := httptest.NewRecorder()
	o := render.NewOutput(rec, 0)
	r := newRenderer(o)
	if err := r.Start(); err != nil {
		fmt.Println("start:", err)
		return
	}
	for _, f := range frames {
		raw, err := json.Marshal(f)
		if err != nil {
			panic(err)
		}
		fr := &render.Frame{Response: f, Raw: raw}
		if f.Sequence < from {
			if p, ok := r.(render.Primer); ok {
				if err := p.Prime(fr); err != nil {
					fmt.Println("prime:", err)
					return
				}
			}
			continue
		}
		if err := r.Frame(fr); err != nil {
			fmt.Println("frame:", err)
			return
		}
	}
	if err := r.End(nil); err != nil {
		fmt.Println("end:", err)
		return
	}
	if err := o.Flush(); err != nil {
		fmt.Println("flush:", err)
		return
	}
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Print(rec.Body.String())
}

// NewStream renders the frames of a SendStreamingMessage call on the
// JSON-RPC binding as A2A v1.0 SSE: one JSON-RPC response per event,
// carrying the call's id as sent, whose result is a v1.0 StreamResponse
// (proto JSON names: task, artifactUpdate, statusUpdate, TASK_STATE_…).
// The stream opens with the Task, submitted (at Params.Submitted), then
// each frame's events; each frame's last event has the frame's sequence
// as SSE id, from which a client resumes (Last-Event-ID).
func ExampleNewStream() {
	p := a2amap.Params{
		TaskID:    "task-002",
		ContextID: "ctx-001",
		Submitted: conformance.Time().Add(-time.Second),
	}
	renderExample(func(o *render.Output) render.Renderer {
		return a2av1.NewStream(o, "req-1", p, json.RawMessage(`7`), 0)
	}, exampleFrames(), 0)
	// Output:
	// 200 text/event-stream
	// data: {"jsonrpc":"2.0","id":7,"result":{"task":{"id":"task-002","contextId":"ctx-001","status":{"state":"TASK_STATE_SUBMITTED","timestamp":"2025-01-23T10:29:59Z"}}}}
	//
	// id: 0
	// data: {"jsonrpc":"2.0","id":7,"result":{"artifactUpdate":{"artifact":{"artifactId":"chatcmpl-1","parts":[{"text":"Hello"}]},"contextId":"ctx-001","taskId":"task-002","metadata":{"llm_response_id":"chatcmpl-1","object_type":"chat.completion.chunk","tag":""}}}}
	//
	// id: 1
	// data: {"jsonrpc":"2.0","id":7,"result":{"artifactUpdate":{"append":true,"artifact":{"artifactId":"chatcmpl-1","parts":[{"text":" world"}]},"contextId":"ctx-001","taskId":"task-002","metadata":{"llm_response_id":"chatcmpl-1","object_type":"chat.completion.chunk","tag":""}}}}
	//
	// id: 2
	// data: {"jsonrpc":"2.0","id":7,"result":{"statusUpdate":{"contextId":"ctx-001","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2025-01-23T10:30:02Z"},"taskId":"task-002"}}}
}

// NewRESTStream is the same stream for the HTTP+JSON binding's
// message:stream: each data: is the StreamResponse alone. Resumed from
// sequence 2 (a client that has frames 0 and 1, the streamed text), it
// writes only the final frame's status-update: the frames before the
// resume point are given to Prime, not written, so that the result is not
// sent again as an artifact.
func ExampleNewRESTStream() {
	p := a2amap.Params{TaskID: "task-002", ContextID: "ctx-001"}
	renderExample(func(o *render.Output) render.Renderer {
		return a2av1.NewRESTStream(o, "req-1", p, 2)
	}, exampleFrames(), 2)
	// Output:
	// 200 text/event-stream
	// id: 2
	// data: {"statusUpdate":{"contextId":"ctx-001","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2025-01-23T10:30:02Z"},"taskId":"task-002"}}
}

// Error maps the pipeline's errors to the JSON-RPC errors of A2A v1.0's
// error table, as a stream of the JSON-RPC binding ends with them: the
// code, the message a client reads, and details ending with a
// google.rpc.ErrorInfo whose reason names the A2A error (its metadata,
// the time of the error, is left out here).
func ExampleError() {
	for _, err := range []error{
		egress.ErrNotFound,
		egress.ErrNotCancelable,
		host.ErrTaskTerminal,
		fmt.Errorf("%w: Last-Event-ID %q is not a sequence", egress.ErrBadRequest, "x"),
		errors.New("disk on fire"),
	} {
		e := a2av1.Error(err)
		fmt.Printf("%d %q", e.Code, e.Message)
		details, _ := e.Data.([]*errordetails.Typed)
		for _, d := range details {
			if d.TypeURL == errordetails.ErrorInfoType {
				fmt.Printf(" reason=%v domain=%v", d.Value["reason"], d.Value["domain"])
			}
		}
		fmt.Println()
	}
	// Output:
	// -32001 "task not found" reason=TASK_NOT_FOUND domain=a2a-protocol.org
	// -32002 "task cannot be canceled" reason=TASK_NOT_CANCELABLE domain=a2a-protocol.org
	// -32004 "this operation is not supported: task is in a terminal state" reason=UNSUPPORTED_OPERATION domain=a2a-protocol.org
	// -32602 "invalid params: bad request: Last-Event-ID \"x\" is not a sequence" reason=INVALID_PARAMS domain=a2a-protocol.org
	// -32000 "server error: the pipeline could not answer; retry later" reason=SERVER_ERROR domain=a2a-protocol.org
}

// AddCard makes an A2A v0.3 agent card (package protocols/a2a's Card) one
// card for both generations of A2A, adding the v1.0 interfaces; V1Card is
// the card as a v1.0 client gets it, without the v0.3 members.
func ExampleV1Card() {
	card := a2a.Card(host.CardInfo{Base: "https://agents.example.com", Version: "1.2.3", DefaultPool: "echo"})
	a2av1.AddCard(card, "https://agents.example.com", "")
	fmt.Println("v0.3 url:", card["url"])

	v1, err := a2av1.V1Card(card)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("name:", v1.Name)
	for _, in := range v1.SupportedInterfaces {
		fmt.Println(in.ProtocolVersion, in.ProtocolBinding, in.URL)
	}
	b, _ := json.Marshal(v1)
	var members map[string]any
	_ = json.Unmarshal(b, &members)
	_, url := members["url"]
	_, preferred := members["preferredTransport"]
	fmt.Println("v0.3 members in the v1.0 card:", url || preferred)
	// Output:
	// v0.3 url: https://agents.example.com/a2a
	// name: E2A Pipeline
	// 1.0 JSONRPC https://agents.example.com/a2a/v1
	// 1.0 HTTP+JSON https://agents.example.com/a2a/v1
	// 0.3 JSONRPC https://agents.example.com/a2a
	// v0.3 members in the v1.0 card: false
}
