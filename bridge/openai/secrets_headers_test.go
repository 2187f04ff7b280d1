package openai_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestBearerHeaderTokenEchoed: the bridge's credential given as
// E2A_UPSTREAM_HEADERS="Authorization: Bearer <token>" (the way to send a
// bearer token when E2A_UPSTREAM_API_KEY is not used; WithCredentials
// accepts it) is refused by the model server, whose 401 quotes the token
// it got (not the whole header value). The token must reach neither the
// request's e2a.error frame (so the client, the console, the audit
// stream), nor a stored message, nor the logs: the scrub takes the
// credential after a header value's scheme out too.
func TestBearerHeaderTokenEchoed(t *testing.T) {
	const token = "tok-gw-3b8e61d0c5f24a97"
	logs := &testkit.Buffer{}
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{log: logs, client: []bridge.ClientOption{
		bridge.WithCredentials(bridge.Credentials{Headers: map[string]string{"Authorization": "Bearer " + token}})}})
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
		_, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","code":"invalid_api_key"}}`, got)
		return true
	})
	a := read(t, ask(t, p, "", "review-ops-bearer", "hello", nil))
	if a.final.ResponseKind != e2a.KindError || a.errBody.Code != bridge.CodeAuth {
		t.Fatalf("final %s %+v, want e2a.error %s", a.final.ResponseKind, a.errBody, bridge.CodeAuth)
	}
	noSecret(t, p, logs, a.errBody.Message, token, "the bridge's bearer token")
}
