package ingress_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestClientMessagesSpeakTheProtocol: what a client reads of a refused
// request is said in its protocol's words, at every door: no package
// prefix of the pipeline ("normalizer a2a \"foo/bar\": …", "egress: bad
// request: …") and no Go type of encoding/json ("cannot unmarshal array
// into Go value of type map[string]json.RawMessage"), but what was wrong
// (the JSON type sent, the field, the method). Codes, statuses and
// retryable stay as they were.
func TestClientMessagesSpeakTheProtocol(t *testing.T) {
	p := pipetest.Start(t)
	rpc := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}
	for _, c := range []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code                     string // the error code as its JSON text
		says                     []string
	}{
		{"e2a array", "POST", "/v1/requests", `[1,2]`, nil, 400, `"invalid_request"`, []string{"object", "array"}},
		{"e2a params string", "POST", "/v1/requests", `{"params":"x"}`, nil, 400, `"invalid_request"`, []string{"params", "object", "string"}},
		{"e2a provenance field", "POST", "/v1/requests", `{"provenance":{"source_protocol":1}}`, nil, 400, `"invalid_request"`, []string{"source_protocol", "string", "number"}},
		{"e2a not JSON", "POST", "/v1/requests", `{"params":`, nil, 400, `"invalid_request"`, []string{"JSON"}},
		{"a2a unknown method", "POST", "/a2a", rpc("foo/bar", `{}`), nil, 200, `-32601`, []string{"method not found", "foo/bar"}},
		{"a2a params scalar", "POST", "/a2a", rpc("message/send", `"x"`), nil, 200, `-32600`, []string{"params", "object"}},
		{"acp params", "POST", "/acp", rpc("session/prompt", `{"sessionId":"s1","prompt":"hi"}`), nil, 200, `-32602`, []string{"prompt"}},
		{"acp block type", "POST", "/acp", rpc("session/prompt", `{"sessionId":"s1","prompt":[{"type":"text","text":5}]}`), nil, 200, `-32602`, []string{"text", "string"}},
		{"acp not JSON", "POST", "/acp", `{"jsonrpc":`, nil, 200, `-32700`, []string{"JSON"}},
		{"a2e not JSON", "POST", "/a2e", `{"type":`, nil, 200, `"parse_error"`, []string{"JSON"}},
		{"a2e Last-Event-ID", "POST", "/a2e", `{"type":"ping"}`, []string{"Last-Event-ID", "x7"}, 400, `"invalid_request"`, []string{"Last-Event-ID", "x7"}},
		{"a2a invalid agent", "POST", "/a2a?agent=a.b", rpc("message/send", `{"message":{"role":"user","messageId":"m-cm1","parts":[{"kind":"text","text":"hi"}]}}`), nil, 200, `-32602`, []string{"a.b"}},
		{"a2e invalid agent", "POST", "/a2e?agent=a.b", `{"type":"task","req_id":"r-cm1","task":"hi"}`, nil, 200, `"invalid_agent"`, []string{"a.b"}},
		{"Last-Event-ID", "GET", "/v1/requests/some-req/stream", "", []string{"Last-Event-ID", "x7"}, 400, `"bad_request"`, []string{"Last-Event-ID", "x7"}},
	} {
		resp, b := do(t, c.method, p.URL+c.path, c.body, c.hdr...)
		var msg struct {
			Message string `json:"message"`
			Error   struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		line, _, _ := strings.Cut(strings.TrimPrefix(string(b), "data: "), "\n") // an A2E stream's first line
		if json.Unmarshal([]byte(line), &msg) != nil {
			t.Errorf("%s: %d %.300s: no JSON error", c.name, resp.StatusCode, b)
			continue
		}
		m := msg.Error.Message + msg.Message
		t.Logf("%s: %d %s", c.name, resp.StatusCode, b)
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.code) || m == "" {
			t.Errorf("%s: %d %.300s, want %d with %s", c.name, resp.StatusCode, b, c.status, c.code)
		}
		for _, bad := range []string{"normalizer ", "egress:", "e2a:", "json:", "host:", "ingress:", "Go value", "Go struct", "map[string]"} {
			if strings.Contains(m, bad) {
				t.Errorf("%s: message %q has %q", c.name, m, bad)
			}
		}
		for _, s := range c.says {
			if !strings.Contains(m, s) {
				t.Errorf("%s: message %q does not say %q", c.name, m, s)
			}
		}
	}
}

// TestAuthRefusalSpeaksToTheClient: a call without credentials, with a
// wrong key or with a disabled principal's is refused at every door in
// the client's words (what was wrong with its credentials), without the
// "ingress: " prefix of the Go error, as the console answers it: every
// door wrote "ingress: unauthenticated: missing credentials" (design.md,
// Guarantees 7).
func TestAuthRefusalSpeaksToTheClient(t *testing.T) {
	p, _ := startGRPCPipeline(t, ingress.WithAuth(doorsAuth(t, false)))
	rpc := func(method string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{}}`
	}
	for _, key := range []struct{ name, value, says string }{
		{"no key", "", "missing credentials"},
		{"wrong key", "ak_wrong_doors_0123456789abcdef", "invalid API key"},
		{"disabled key", disabledKey, "disabled"},
	} {
		var hdr []string
		if key.value != "" {
			hdr = []string{"X-Api-Key", key.value}
		}
		for _, c := range []struct{ name, method, path, body string }{
			{"e2a", "POST", "/v1/requests", `{"params":{"text":"x"}}`},
			{"a2a", "POST", "/a2a", rpc("message/send")},
			{"a2a v1.0 JSON-RPC", "POST", "/a2a/v1", rpc("SendMessage")},
			{"a2a v1.0 HTTP+JSON", "GET", "/a2a/v1/tasks", ""},
			{"acp", "POST", "/acp", rpc("session/new")},
			{"a2e", "POST", "/a2e", `{"type":"ping"}`},
		} {
			resp, b := do(t, c.method, p.url+c.path, c.body, append([]string{"A2A-Version", "1.0"}, hdr...)...)
			var msg struct {
				Message string `json:"message"`
				Error   struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			line, _, _ := strings.Cut(strings.TrimPrefix(string(b), "data: "), "\n")
			if json.Unmarshal([]byte(line), &msg) != nil {
				t.Errorf("%s, %s: %d %.300s: no JSON error", key.name, c.name, resp.StatusCode, b)
				continue
			}
			if m := msg.Error.Message + msg.Message; strings.Contains(m, "ingress:") || !strings.Contains(m, key.says) {
				t.Errorf("%s, %s: message %q; want it to say %q without the package's prefix", key.name, c.name, m, key.says)
			}
		}
		_, err := grpcClient(t, p, key.value).SendMessage(t.Context(), userMessage("refused"))
		if err == nil || strings.Contains(err.Error(), "ingress:") || !strings.Contains(err.Error(), key.says) {
			t.Errorf("%s, gRPC: %v; want a refusal saying %q without the package's prefix", key.name, err, key.says)
		}
	}
}
