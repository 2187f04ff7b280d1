package a2av1_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// TestNullPartIsInvalidParams: a message whose parts hold a null (what
// a2a-go/v2's client sends for a nil *Part) is InvalidParams on every
// HTTP binding, SendMessage and SendStreamingMessage alike. The SDK's
// v0.3 conversion dereferenced the nil part: the handler panicked and the
// server dropped the connection, the client getting EOF and no answer.
func TestNullPartIsInvalidParams(t *testing.T) {
	p := echoPipeline(t)
	const msg = `{"message":{"role":"ROLE_USER","messageId":"m-null","parts":[{"text":"a"},null]}}`
	for _, method := range []string{"SendMessage", "SendStreamingMessage"} {
		if _, code, body := rpcCall(t, p, method, msg); code != -32602 {
			t.Errorf("JSON-RPC %s: answered %.300s; want error -32602 Invalid params", method, body)
		}
	}
	for _, route := range []string{"/message:send", "/message:stream"} {
		// message:stream answers a refusal before its stream opens as
		// message:send does (bindings.stream).
		status, _, body := rawCall(t, "POST", p.URL+a2av1.Path+route, msg, map[string]string{"A2A-Version": "1.0"})
		want := http.StatusBadRequest
		if status != want || !strings.Contains(body, `"INVALID_PARAMS"`) {
			t.Errorf("HTTP+JSON %s: answered %d %.300s; want %d with an INVALID_PARAMS error", route, status, body, want)
		}
	}
}

// TestSubscribeEmptyIDPlain: SubscribeToTask with an empty id is
// InvalidParams (the id is REQUIRED: TestEmptyTaskIDInvalidParams) as one
// plain JSON-RPC answer, as GetTask's (bindings.refuseFinished). It opened
// a stream whose one event was the error.
func TestSubscribeEmptyIDPlain(t *testing.T) {
	p := echoPipeline(t)
	for _, params := range []string{`{"id":""}`, `{}`} {
		_, code, body := rpcCall(t, p, "SubscribeToTask", params)
		if code != -32602 || !strings.HasPrefix(body, "{") {
			t.Errorf("SubscribeToTask %s: answered %.300s; want one JSON-RPC answer, error -32602", params, body)
		}
	}
}
