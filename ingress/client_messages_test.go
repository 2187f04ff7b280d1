package ingress_test

import (
	"encoding/json"
	"strings"
	"testing"

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
