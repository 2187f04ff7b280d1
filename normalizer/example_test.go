package normalizer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

func printJSON(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// An A2A message/send with the trpc-agent-go headers becomes an envelope
// for the default pool; the Authorization header is never copied. The new
// task is named by its first request's id.
func ExampleNormalizer_FromA2A() {
	n := normalizer.New(normalizer.Config{Routes: normalizer.Routes{Default: "demo"}})
	ids := []string{"req-1"}
	res, err := n.FromA2A(normalizer.Input{
		Body: []byte(`{"jsonrpc":"2.0","id":"req-001","method":"message/send","params":{"message":{"kind":"message","messageId":"msg-001","role":"user","contextId":"ctx-001","parts":[{"kind":"text","text":"What's the weather in Beijing?"}],"metadata":{"invocation_id":"inv-001"}}}}`),
		Header: http.Header{
			"X-User-Id":     {"user_12345"},
			"Authorization": {"Bearer secret"},
		},
		Now:   func() time.Time { return time.Date(2026, 3, 30, 10, 0, 0, 0, time.UTC) },
		NewID: func() string { id := ids[0]; ids = ids[1:]; return id },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pool:", res.Pool, "op:", res.Op)
	printJSON(res.Envelope)
	// Output:
	// pool: demo op: submit
	// {
	//   "protocol_version": "1.0",
	//   "request_id": "req-1",
	//   "jsonrpc_id": "req-001",
	//   "correlation_id": "inv-001",
	//   "task_id": "req-1",
	//   "context_id": "ctx-001",
	//   "channel": "a2a",
	//   "method": "message/send",
	//   "message_id": "msg-001",
	//   "timestamp": "2026-03-30T10:00:00+00:00",
	//   "identity_origin": "user",
	//   "user_id": "user_12345",
	//   "params": {
	//     "text": "What's the weather in Beijing?"
	//   },
	//   "provenance": {
	//     "source_protocol": "a2a",
	//     "converter": "e2a-pipeline/normalizer/a2a",
	//     "converted_at": "2026-03-30T10:00:00+00:00",
	//     "details": {
	//       "a2a_version": "0.3",
	//       "jsonrpc_method": "message/send",
	//       "op": "submit",
	//       "task_created": true
	//     }
	//   },
	//   "a2a_metadata": {
	//     "invocation_id": "inv-001"
	//   }
	// }
}

// Errors carry the sentinel for the answer's shape and the request's id.
func ExampleJSONRPCCode() {
	n := normalizer.New(normalizer.Config{})
	_, err := n.FromA2A(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{}}`)})
	fmt.Println(errors.Is(err, normalizer.ErrInvalidParams))
	fmt.Println(normalizer.JSONRPCCode(err), string(normalizer.ErrorJSONRPCID(err)), normalizer.HTTPStatus(err))
	fmt.Println(err)
	// Output:
	// true
	// -32602 7 400
	// normalizer a2a "tasks/get": invalid params: id is required
}

// §7: content_blocks become the prompt, the session id and acp_meta are
// merged; the envelope itself is not changed.
func ExampleMergeParamsToACPPrompt() {
	env, _ := e2a.FromJSON([]byte(`{"method":"session/prompt","session_id":"s1","params":{"content_blocks":[{"type":"text","text":"Describe this image"}]},"acp_meta":{"trace":"t1"}}`))
	printJSON(normalizer.MergeParamsToACPPrompt(env))
	// Output:
	// {
	//   "_meta": {
	//     "trace": "t1"
	//   },
	//   "content_blocks": [
	//     {
	//       "text": "Describe this image",
	//       "type": "text"
	//     }
	//   ],
	//   "prompt": [
	//     {
	//       "text": "Describe this image",
	//       "type": "text"
	//     }
	//   ],
	//   "session_id": "s1"
	// }
}

// §11.4, and the explicit chat.send → session/prompt mapping for a pure ACP
// peer.
func ExampleEnvelopeToACPJSONRPCCall() {
	env, _ := e2a.FromJSON([]byte(`{"method":"session/prompt","jsonrpc_id":42,"session_id":"s1","params":{"session_id":"s1","prompt":[{"type":"text","text":"hi"}]}}`))
	call, _ := normalizer.EnvelopeToACPJSONRPCCall(env)
	b, _ := json.Marshal(call)
	fmt.Println(string(b))

	chat, _ := e2a.FromJSON([]byte(`{"request_id":"req_abc_01","session_id":"sess_xyz","method":"chat.send","params":{"content":"Hello","mode":"plan"}}`))
	peer, _ := normalizer.EnvelopeToACPPeerCall(chat)
	b, _ = json.Marshal(peer)
	fmt.Println(string(b))
	// Output:
	// {"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{"prompt":[{"text":"hi","type":"text"}],"session_id":"s1"}}
	// {"jsonrpc":"2.0","id":"req_abc_01","method":"session/prompt","params":{"_meta":{"e2a_params":{"mode":"plan"}},"prompt":[{"text":"Hello","type":"text"}],"sessionId":"sess_xyz"}}
}

// The routing rule, configured from one string.
func ExampleParseRoutes() {
	routes, err := normalizer.ParseRoutes("default=demo; method:tool/*=tools; method:chat.send=chat; channel:feishu=feishu")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, env := range []*e2a.Envelope{
		{Method: "chat.send", Channel: "feishu"}, // exact method beats channel
		{Method: "tool/call/req"},                // method prefix
		{Method: "history.get", Channel: "feishu"},
		{Method: normalizer.MethodWorkflowExecute}, // built-in rule
		{Method: "message/send"},                   // default
	} {
		fmt.Println(env.Method, "→", routes.Pool(env))
	}
	fmt.Println(routes)
	// Output:
	// chat.send → chat
	// tool/call/req → tools
	// history.get → feishu
	// a2e.workflow.execute → workflow
	// message/send → demo
	// default=demo;method:chat.send=chat;method:tool/*=tools;channel:feishu=feishu
}

// Plugins register their A2E types at start-up; an unknown type is still
// normalized, as a generic message.
func ExampleRegistry_Register() {
	reg := normalizer.NewRegistry()
	if err := reg.Register(normalizer.A2EType{Type: "tool/call/req", Model: "ToolCallRequest", Required: []string{"req_id", "name"}}); err != nil {
		fmt.Println(err)
	}
	fmt.Println(reg.Register(normalizer.A2EType{Type: "ping"}))
	n := normalizer.New(normalizer.Config{A2ETypes: reg})
	for _, line := range []string{
		`{"a2e":"1.0","id":"a1","type":"tool/call/req","ts":1716123456.789,"req_id":"a1","name":"search"}`,
		`{"a2e":"1.0","id":"p1","type":"ping"}`,
		`{"a2e":"1.0","id":"m1","type":"memory/read/req","req_id":"m1"}`,
	} {
		res, err := n.FromA2E(normalizer.Input{Body: []byte(line)})
		if err != nil {
			fmt.Println(err)
			continue
		}
		d := res.Envelope.Provenance.Details
		fmt.Println(res.Envelope.Method, res.Op, d["a2e_model"], res.Envelope.CorrelationID, res.Envelope.Timestamp != "")
	}
	// Output:
	// normalizer: A2E type already registered: "ping"
	// tool/call/req submit ToolCallRequest a1 true
	// ping local Ping  true
	// memory/read/req submit A2EMessage m1 true
}

// A workflow with a structural error is refused line by line.
func ExampleParseWorkflow() {
	_, errs := normalizer.ParseWorkflow(`{"type":"operationUpdate","operationId":"fetch","operation":{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}}
{"type":"beginExecution","executionId":"exec 1","operationOrder":["fetch","filter"]}`)
	for _, e := range errs {
		fmt.Println(e.String())
	}
	// Output:
	// line 2: executionId: required, must match ^[a-zA-Z0-9_-]+$
	// line 2: operationOrder[1]: operation "filter" is not defined by an earlier operationUpdate
}
