package acp_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
	"github.com/e2a-pipeline/pipeline/render"
)

// exampleFrame returns frame seq of request req-1 (ACP session sess-1),
// written at 12:00:<seq> on 29 March 2026.
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
		Provenance:      e2a.Provenance{SourceProtocol: e2a.SourceACP},
		Body:            e2a.MarshalBody(body),
		SessionID:       "sess-1",
	}
}

// exampleChunk is exampleFrame of an in-progress e2a.chunk.
func exampleChunk(seq int64, deltaKind string, delta any) *e2a.Response {
	return exampleFrame(seq, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: deltaKind, Delta: delta})
}

// exampleTurn is a turn with a tool call: the agent's reasoning, a call of
// get_weather and its result, the answer's text and the final frame.
func exampleTurn() []*e2a.Response {
	return []*e2a.Response{
		exampleChunk(0, e2a.DeltaReasoning, "Let me check the weather."),
		exampleChunk(1, e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: "call_1", Name: "get_weather", Args: `{"city":"Paris"}`}),
		exampleChunk(2, e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionResponse, ID: "call_1", Name: "get_weather", Response: `{"temp":"18°C"}`}),
		exampleChunk(3, e2a.DeltaText, "It is 18°C in Paris."),
		exampleFrame(4, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "It is 18°C in Paris."}}),
	}
}

// Updates maps each frame to the ACP session updates it stands for
// (the update member of a session/update notification): text to
// agent_message_chunk, reasoning to agent_thought_chunk, a function call
// to a tool_call in progress and its result to the tool_call_update that
// completes it. The final frame has none: it is the session/prompt's
// result (Final).
func ExampleUpdates() {
	for _, f := range exampleTurn() {
		updates, err := acp.Updates(f)
		if err != nil {
			fmt.Println(err)
			return
		}
		if len(updates) == 0 {
			fmt.Println(f.Sequence, "none")
		}
		for _, u := range updates {
			b, err := json.Marshal(u)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Println(f.Sequence, string(b))
		}
	}
	// Output:
	// 0 {"content":{"text":"Let me check the weather.","type":"text"},"sessionUpdate":"agent_thought_chunk"}
	// 1 {"kind":"other","rawInput":{"city":"Paris"},"sessionUpdate":"tool_call","status":"in_progress","title":"get_weather","toolCallId":"call_1"}
	// 2 {"rawOutput":"{\"temp\":\"18°C\"}","sessionUpdate":"tool_call_update","status":"completed","toolCallId":"call_1"}
	// 3 {"content":{"text":"It is 18°C in Paris.","type":"text"},"sessionUpdate":"agent_message_chunk"}
	// 4 none
}

// NewRenderer renders the frames of a session/prompt call as its answer:
// a session/update notification per update, then the JSON-RPC response
// {stopReason}, one message per line (NDJSON; Params.SSE frames each as
// an SSE event instead).
func ExampleNewRenderer() {
	rec := httptest.NewRecorder()
	o := render.NewOutput(rec, 0)
	r := acp.NewRenderer(o, acp.Params{JSONRPCID: json.RawMessage(`3`), SessionID: "sess-1"})
	if err := r.Start(); err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range exampleTurn() {
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
	// Output:
	// 200 application/x-ndjson
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"content":{"text":"Let me check the weather.","type":"text"},"sessionUpdate":"agent_thought_chunk"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"kind":"other","rawInput":{"city":"Paris"},"sessionUpdate":"tool_call","status":"in_progress","title":"get_weather","toolCallId":"call_1"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"rawOutput":"{\"temp\":\"18°C\"}","sessionUpdate":"tool_call_update","status":"completed","toolCallId":"call_1"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"content":{"text":"It is 18°C in Paris.","type":"text"},"sessionUpdate":"agent_message_chunk"}}}
	// {"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}
}

// Final is the JSON-RPC response that ends a turn, from its final frame:
// a completed turn ends with stopReason end_turn, a cancelled one with
// cancelled; any other failure is a JSON-RPC error, the pipeline's error
// code in data.
func ExampleFinal() {
	id := json.RawMessage(`3`)
	for _, f := range []*e2a.Response{
		exampleFrame(1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}),
		exampleFrame(1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: e2a.ErrCodeCancelled, Message: "cancelled by the client"}),
		exampleFrame(1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: e2a.ErrCodeDeadlineExceeded, Message: "the agent did not answer in time", Retryable: true}),
	} {
		b, err := json.Marshal(acp.Final(f, id))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(string(b))
	}
	// Output:
	// {"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}
	// {"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}
	// {"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"the agent did not answer in time","data":{"code":"deadline_exceeded","retryable":true}}}
}
