package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestV1GateRefusalsNameTheirError: a refusal of the gate on A2A v1.0's
// HTTP bindings (a credential missing, a content coding, a body over the
// bound) carries the google.rpc.ErrorInfo of the A2A error it is, as the
// binding's other errors and the SDK's own server's do (a2asrv writes one
// on every error): an HTTP+JSON answer carried none, so a2a-go/v2's
// HTTP+JSON client, which tells the error by that ErrorInfo's reason alone,
// read a 401 as an internal error, not ErrUnauthenticated.
func TestV1GateRefusalsNameTheirError(t *testing.T) {
	_, nc := natstest.RunServer(t)
	base := frontDoor(t, nc, withAPIKey(t), ingress.WithMaxBodyBytes(1024))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, _ := url.Parse(base + ingress.A2AV1Path)
	_, err := a2aclient.NewRESTTransport(u, http.DefaultClient).SendMessage(ctx, nil, userMessage("hi"))
	if !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Errorf("a2a-go/v2 HTTP+JSON SendMessage without a key: %v, want ErrUnauthenticated", err)
	}
	key := []string{"X-Api-Key", testKey, "Content-Type", "application/json"}
	send := `{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"hi"}]}}`
	call := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + send + `}`
	big := strings.Replace(send, `"hi"`, `"`+strings.Repeat("x", 2048)+`"`, 1)
	gzip := append([]string{"Content-Encoding", "gzip"}, key...)
	for _, c := range []struct {
		name, path, body string
		hdr              []string
		status           int
		reason           string
	}{
		{"REST no key", "/message:send", send, []string{"Content-Type", "application/json"}, 401, "UNAUTHENTICATED"},
		{"REST gzip", "/message:send", send, gzip, 415, "CONTENT_TYPE_NOT_SUPPORTED"},
		{"REST over the bound", "/message:send", big, key, 413, "INVALID_REQUEST"},
		{"JSON-RPC no key", "", call, []string{"Content-Type", "application/json"}, 401, "UNAUTHENTICATED"},
		{"JSON-RPC gzip", "", call, gzip, 415, "CONTENT_TYPE_NOT_SUPPORTED"},
		{"JSON-RPC over the bound", "", strings.Replace(call, `"hi"`, `"`+strings.Repeat("x", 2048)+`"`, 1), key, 413, "INVALID_REQUEST"},
	} {
		resp, b := do(t, "POST", base+ingress.A2AV1Path+c.path, c.body, c.hdr...)
		if resp.StatusCode != c.status || errorInfoReason(b) != c.reason {
			t.Errorf("%s: %d %s, want %d with an ErrorInfo of reason %s", c.name, resp.StatusCode, b, c.status, c.reason)
		}
	}
}

// errorInfoReason is the reason of the A2A ErrorInfo in an HTTP+JSON
// error's details or a JSON-RPC error's data ("" for none).
func errorInfoReason(body []byte) string {
	var e struct {
		Error struct {
			Details []map[string]any `json:"details"`
			Data    []map[string]any `json:"data"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	for _, d := range append(e.Error.Details, e.Error.Data...) {
		if d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" && d["domain"] == "a2a-protocol.org" {
			r, _ := d["reason"].(string)
			return r
		}
	}
	return ""
}
