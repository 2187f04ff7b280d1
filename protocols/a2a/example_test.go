package a2a_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/render"
)

// exampleFrames are the frames of request req-1 (task task-1, context
// ctx-1): a reasoning chunk, two text chunks and the final e2a.complete,
// one second apart from 12:00:00 on 29 March 2026.
func exampleFrames() []*e2a.Response {
	chunk := func(kind, text string) e2a.ChunkBody { return e2a.ChunkBody{DeltaKind: kind, Delta: text} }
	bodies := []any{
		chunk(e2a.DeltaReasoning, "The user greets me."),
		chunk(e2a.DeltaText, "Hello"),
		chunk(e2a.DeltaText, " world"),
		e2a.CompleteBody{Result: map[string]any{"content": "Hello world"}},
	}
	var frames []*e2a.Response
	for i, body := range bodies {
		f := &e2a.Response{
			ProtocolVersion: e2a.ProtocolVersion,
			ResponseID:      "rsp-" + strconv.Itoa(i),
			RequestID:       "req-1",
			Sequence:        int64(i),
			Status:          e2a.StatusInProgress,
			ResponseKind:    e2a.KindChunk,
			Timestamp:       e2a.FormatTime(time.Date(2026, 3, 29, 12, 0, i, 0, time.UTC)),
			Provenance:      e2a.Provenance{SourceProtocol: e2a.SourceA2A},
			Body:            e2a.MarshalBody(body),
			TaskID:          "task-1",
			ContextID:       "ctx-1",
			Metadata:        map[string]any{"llm_response_id": "chatcmpl-1"},
		}
		if i == len(bodies)-1 {
			f.IsFinal, f.Status, f.ResponseKind, f.Metadata = true, e2a.StatusSucceeded, e2a.KindComplete, nil
		}
		frames = append(frames, f)
	}
	return frames
}

// renderExample drives the renderer newRenderer builds as egress does:
// Start, each frame in order, End; and prints the response.
func renderExample(newRenderer render.NewRenderer, frames []*e2a.Response) {
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
		if err := r.Frame(&render.Frame{Response: f, Raw: raw}); err != nil {
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
		TaskID:    "task-1",
		ContextID: "ctx-1",
		Submitted: time.Date(2026, 3, 29, 11, 59, 59, 0, time.UTC),
	}
	renderExample(func(o *render.Output) render.Renderer {
		return a2a.NewStream(o, "req-1", p, 0)
	}, exampleFrames())
	// Output:
	// 200 text/event-stream
	// : ok
	//
	// data: {"jsonrpc":"2.0","id":"call-7","result":{"kind":"status-update","contextId":"ctx-1","final":false,"status":{"state":"submitted","timestamp":"2026-03-29T11:59:59Z"},"taskId":"task-1"}}
	//
	// id: 1
	// data: {"jsonrpc":"2.0","id":"call-7","result":{"kind":"artifact-update","artifact":{"artifactId":"chatcmpl-1","parts":[{"kind":"text","text":"Hello"}]},"contextId":"ctx-1","taskId":"task-1","metadata":{"llm_response_id":"chatcmpl-1","object_type":"chat.completion.chunk","tag":""}}}
	//
	// id: 2
	// data: {"jsonrpc":"2.0","id":"call-7","result":{"kind":"artifact-update","append":true,"artifact":{"artifactId":"chatcmpl-1","parts":[{"kind":"text","text":" world"}]},"contextId":"ctx-1","taskId":"task-1","metadata":{"llm_response_id":"chatcmpl-1","object_type":"chat.completion.chunk","tag":""}}}
	//
	// id: 3
	// data: {"jsonrpc":"2.0","id":"call-7","result":{"kind":"status-update","contextId":"ctx-1","final":true,"status":{"state":"completed","timestamp":"2026-03-29T12:00:03Z"},"taskId":"task-1"}}
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
	// {"jsonrpc":"2.0","id":1,"result":{"kind":"message","messageId":"rsp-0","contextId":"ctx-1","metadata":{"llm_response_id":"chatcmpl-1","object_type":"chat.completion","tag":""},"parts":[{"kind":"text","text":"Hello world"}],"role":"agent"}}
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
