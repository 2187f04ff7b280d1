package acp_test

import (
	"encoding/json"
	"fmt"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// exampleTurn is a turn of request req-1 with a tool call, its frames as
// the conformance scenarios build them (session s1, one second apart from
// conformance.Time): the agent's reasoning, a call of get_weather and its
// result, the answer's text and the final frame.
func exampleTurn() []*e2a.Response {
	return []*e2a.Response{
		conformance.Chunk("req-1", 0, e2a.DeltaReasoning, "Let me check the weather.", ""),
		conformance.Chunk("req-1", 1, e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: "call_1", Name: "get_weather", Args: `{"city":"Paris"}`}, ""),
		conformance.Chunk("req-1", 2, e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionResponse, ID: "call_1", Name: "get_weather", Response: `{"temp":"18°C"}`}, ""),
		conformance.Chunk("req-1", 3, e2a.DeltaText, "It is 18°C in Paris.", ""),
		conformance.Frame("req-1", 4, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "It is 18°C in Paris."}}, nil),
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
	// 2 {"content":[{"content":{"text":"{\n  \"temp\": \"18°C\"\n}","type":"text"},"type":"content"}],"rawOutput":{"temp":"18°C"},"sessionUpdate":"tool_call_update","status":"completed","toolCallId":"call_1"}
	// 3 {"content":{"text":"It is 18°C in Paris.","type":"text"},"sessionUpdate":"agent_message_chunk"}
	// 4 none
}

// NewRenderer renders the frames of a session/prompt call as its answer:
// a session/update notification per update, then the JSON-RPC response
// {stopReason}, one message per line (NDJSON; Params.SSE frames each as
// an SSE event instead).
func ExampleNewRenderer() {
	// RenderFrames: Start, then each frame (the End egress calls next
	// writes nothing after a final frame).
	var out *render.Output // the response rendered to, for its Content-Type
	body, err := conformance.RenderFrames(func(o *render.Output) render.Renderer {
		out = o
		return acp.NewRenderer(o, acp.Params{JSONRPCID: json.RawMessage(`3`), SessionID: "s1"})
	}, exampleTurn(), false)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Header().Get("Content-Type"))
	fmt.Print(string(body))
	// Output:
	// application/x-ndjson
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"content":{"text":"Let me check the weather.","type":"text"},"sessionUpdate":"agent_thought_chunk"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"kind":"other","rawInput":{"city":"Paris"},"sessionUpdate":"tool_call","status":"in_progress","title":"get_weather","toolCallId":"call_1"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"content":[{"content":{"text":"{\n  \"temp\": \"18°C\"\n}","type":"text"},"type":"content"}],"rawOutput":{"temp":"18°C"},"sessionUpdate":"tool_call_update","status":"completed","toolCallId":"call_1"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"content":{"text":"It is 18°C in Paris.","type":"text"},"sessionUpdate":"agent_message_chunk"}}}
	// {"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}
}

// Final is the JSON-RPC response that ends a turn, from its final frame:
// a completed turn ends with stopReason end_turn, a cancelled one with
// cancelled; any other failure is a JSON-RPC error, the pipeline's error
// code in data.
func ExampleFinal() {
	id := json.RawMessage(`3`)
	for _, f := range []*e2a.Response{
		conformance.Frame("req-1", 1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}, nil),
		conformance.Frame("req-1", 1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: e2a.ErrCodeCancelled, Message: "cancelled by the client"}, nil),
		conformance.Frame("req-1", 1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: e2a.ErrCodeDeadlineExceeded, Message: "the agent did not answer in time", Retryable: true}, nil),
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
