package a2av1_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// TestUnsupportedContentTypeEchoesID: a JSON-RPC call on /a2a/v1 whose
// Content-Type is not JSON is refused 415 ContentTypeNotSupportedError
// (-32005) with the call's id (JSON-RPC 2.0 §5: null only when the id
// could not be read), as /a2a answers it and as the gate's refusals on
// /a2a/v1 do (TestRateLimitedCallEchoesID). It answered "id": null
// whatever the body held. A body that is no one call stays null.
func TestUnsupportedContentTypeEchoesID(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("demo")))
	p.Pool("demo", echoAgent())
	for _, c := range []struct{ name, path, body, wantID string }{
		{"number id", a2av1.Path, `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"x"}}`, `7`},
		{"string id", a2av1.Path, `{"jsonrpc":"2.0","id":"a<b","method":"ListTasks","params":{}}`, `"a<b"`},
		{"big id", a2av1.Path, `{"jsonrpc":"2.0","id":12345678901234567890,"method":"ListTasks","params":{}}`, `12345678901234567890`},
		{"v1.0 at /a2a", "/a2a", `{"jsonrpc":"2.0","id":8,"method":"ListTasks","params":{}}`, `8`},
		{"batch", a2av1.Path, `[{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}]`, `null`},
		{"not JSON", a2av1.Path, `id=1`, `null`},
	} {
		code, _, body := rawCall(t, "POST", p.URL+c.path, c.body, map[string]string{"Content-Type": "text/plain", "A2A-Version": "1.0"})
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if code != http.StatusUnsupportedMediaType || json.Unmarshal([]byte(body), &r) != nil || r.Error == nil || r.Error.Code != -32005 {
			t.Errorf("%s: %d %s; want 415 with a JSON-RPC error -32005", c.name, code, body)
			continue
		}
		if string(r.ID) != c.wantID {
			t.Errorf("%s: id %s, want %s (the call's): %s", c.name, r.ID, c.wantID, body)
		}
	}
}
