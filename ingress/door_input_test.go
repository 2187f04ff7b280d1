package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/streams"
)

// v1Send is an A2A v1.0 SendMessage's params (the HTTP+JSON body of
// message:send).
const v1Send = `{"message":{"role":"ROLE_USER","messageId":"zz-m1","parts":[{"text":"hi"}]}}`

// restErr is the A2A v1.0 HTTP+JSON binding's error body.
type restErr struct {
	Error *struct {
		Code    int    `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestV1TrailingDataRefused: a body with data after its JSON value is not
// JSON. /a2a, /acp, /v1/requests and /a2e answer it as a parse error; the
// A2A v1.0 bindings (the SDK's json.Decoder reads the first value and stops)
// acted on the call before the garbage: a SendMessage was published and
// answered 200. JSON-RPC: -32700, id null; HTTP+JSON: 400 INVALID_ARGUMENT.
func TestV1TrailingDataRefused(t *testing.T) {
	p := pipetest.Start(t)
	p.Pool("demo", demo.New())
	rpc := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + v1Send + `}`
	for _, tail := range []string{"garbage", "{}", `{"jsonrpc":"2.0","id":2,"method":"GetTask"}`} {
		resp, b := do(t, "POST", p.URL+"/a2a/v1", rpc+tail, "Content-Type", "application/json")
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error *ingress.Error  `json:"error"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.Error == nil ||
			r.Error.Code != jsonrpc.CodeParseError || string(r.ID) != "null" {
			t.Errorf("/a2a/v1 body + %q: %d %.200s, want -32700 with id null", tail, resp.StatusCode, b)
		}
		resp, b = do(t, "POST", p.URL+"/a2a/v1/message:send", v1Send+tail, "Content-Type", "application/json")
		var e restErr
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error == nil ||
			e.Error.Code != http.StatusBadRequest || e.Error.Status != "INVALID_ARGUMENT" {
			t.Errorf("message:send body + %q: %d %.200s, want 400 INVALID_ARGUMENT", tail, resp.StatusCode, b)
		}
	}
	// Invalid UTF-8 is a parse error at every door (docs/protocols.md);
	// the SDK replaced the byte with U+FFFD and sent the text on.
	bad := strings.Replace(v1Send, `"hi"`, "\"h\xffi\"", 1)
	if resp, b := do(t, "POST", p.URL+"/a2a/v1", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`+bad+`}`); !strings.Contains(string(b), `"code":-32700`) {
		t.Errorf("/a2a/v1 body not UTF-8: %d %.200s, want -32700", resp.StatusCode, b)
	}
	if resp, b := do(t, "POST", p.URL+"/a2a/v1/message:send", bad); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("message:send body not UTF-8: %d %.200s, want 400", resp.StatusCode, b)
	}
	if n := streamMsgs(t, p.JS, streams.RequestsStream); n != 0 {
		t.Errorf("%d requests published from bodies that are not JSON", n)
	}
}

// TestV1RPCEnvelopeTypeInvalidRequest: a body that is JSON but no request
// object, or whose "jsonrpc" or "method" is not a string, is an Invalid
// Request (-32600), as /a2a and /acp answer it (and /a2a/v1 answers `null`).
// /a2a/v1 answered -32602 Invalid params, its message a Go decoding error
// naming the SDK's types ("cannot unmarshal number into Go value of type
// jsonrpc.ServerRequest").
func TestV1RPCEnvelopeTypeInvalidRequest(t *testing.T) {
	p := pipetest.Start(t)
	for _, body := range []string{
		`42`, `"x"`, `true`, `null`,
		`{"jsonrpc":2.0,"id":1,"method":"GetTask","params":{"id":"t"}}`,
		`{"jsonrpc":"2.0","id":1,"method":5,"params":{"id":"t"}}`,
	} {
		for _, path := range []string{"/a2a/v1", "/a2a"} {
			resp, b := do(t, "POST", p.URL+path, body, "Content-Type", "application/json")
			var r struct{ Error *ingress.Error }
			if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.Error == nil ||
				r.Error.Code != jsonrpc.CodeInvalidRequest || strings.Contains(r.Error.Message, "Go ") {
				t.Errorf("%s %s: %d %.200s, want -32600 Invalid Request", path, body, resp.StatusCode, b)
			}
		}
	}
}

// TestV1RESTBodyTooLarge413: a body over E2A_MAX_BODY_BYTES is 413 at every
// door (/v1/requests, /a2a, /a2a/v1, /acp, /a2e); the A2A v1.0 HTTP+JSON
// binding answered it 400 "parse error" (the SDK reading the cut body), a
// client told its JSON is malformed when it is only too large. The body of
// exactly the limit is served.
func TestV1RESTBodyTooLarge413(t *testing.T) {
	const limit = 1000
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithMaxBodyBytes(limit)))
	p.Pool("demo", demo.New())
	body := func(n int) string {
		pre, suf := `{"message":{"role":"ROLE_USER","messageId":"zz-big","parts":[{"text":"`, `"}]}}`
		return pre + strings.Repeat("x", n-len(pre)-len(suf)) + suf
	}
	if resp, b := do(t, "POST", p.URL+"/a2a/v1/message:send", body(limit), "Content-Type", "application/json"); resp.StatusCode != http.StatusOK {
		t.Fatalf("message:send of %d bytes (the limit): %d %.200s", limit, resp.StatusCode, b)
	}
	for _, path := range []string{"/a2a/v1/message:send", "/a2a/v1/message:stream"} {
		resp, b := do(t, "POST", p.URL+path, body(limit+1), "Content-Type", "application/json")
		var e restErr
		if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(b, &e) != nil || e.Error == nil ||
			e.Error.Code != http.StatusRequestEntityTooLarge || !strings.Contains(e.Error.Message, "1000 bytes") {
			t.Errorf("%s of %d bytes: %d %.200s, want 413 in the binding's error shape", path, limit+1, resp.StatusCode, b)
		}
	}
}

// TestPostWaitReadsAsGet: `?wait=` of POST /v1/requests is read as the
// read API reads it (GET /v1/requests/{id}?wait=1 waits: strconv.ParseBool);
// the POST took only the exact string "true", so ?wait=1 (or True, t) was
// answered 202 at once while the same parameter on the GET waited.
func TestPostWaitReadsAsGet(t *testing.T) {
	p := pipetest.Start(t)
	p.Pool("demo", demo.New())
	for _, v := range []string{"1", "True", "t"} {
		resp, b := do(t, "POST", p.URL+"/v1/requests?wait="+v, `{"params":{"text":"hi","frames":1}}`)
		var view struct {
			State string `json:"state"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &view) != nil || view.State != "succeeded" {
			t.Errorf("POST ?wait=%s: %d %.200s, want 200 with the finished request", v, resp.StatusCode, b)
		}
	}
}
