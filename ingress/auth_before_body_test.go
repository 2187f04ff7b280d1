package ingress_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestCredentialCheckedBeforeBody: with API keys configured, a request
// that presents no credential is refused 401 in its door's shape before
// any of its body is read, on every door: one over the body bound
// (declared, or chunked) is not answered 413, and one whose body never
// ends is answered while the test holds it open. A2A v0.3's /a2a (its
// per-pool mount too) and ACP's /acp read the body first, to show it to
// the endpoint's Peek: 413 over the bound; and a body that never ends
// held every door's refusal (net/http reads a body left unread before it
// answers; the v1.0 JSON-RPC refusal read it for the call's id).
func TestCredentialCheckedBeforeBody(t *testing.T) {
	_, nc := natstest.RunServer(t)
	const bound = 1024
	base := frontDoor(t, nc, ingress.WithMaxBodyBytes(bound), ingress.WithWorkflow(workflow.New(workflow.Options{})),
		ingress.WithAuth(doorsAuth(t, false)))
	doors := []struct{ path, ctype, want string }{
		{"/v1/requests?agent=demo", "application/json", `"unauthenticated"`},
		{"/pools/demo/v1/requests", "application/json", `"unauthenticated"`},
		{"/a2a?agent=demo", "application/json", `"code":-32002`},
		{"/pools/demo/a2a", "application/json", `"code":-32002`},
		{"/a2a/v1?agent=demo", "application/json", `"code":-31401`},
		{"/pools/demo/a2a/v1", "application/json", `"code":-31401`},
		{"/a2a/v1/message:send?agent=demo", "application/json", `"UNAUTHENTICATED"`},
		{"/acp", "application/json", `"code":-32000`},
		{"/a2e", "application/x-ndjson", `"unauthenticated"`},
		{"/api/v1/workflows/execute", "application/json", `"PermissionError"`},
	}
	over := `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"pad":"` + strings.Repeat("x", 2*bound) + `"}}`
	for _, d := range doors {
		for _, body := range []struct {
			name string
			open func(ctx context.Context) io.Reader
		}{
			{"declared over the bound", func(context.Context) io.Reader { return strings.NewReader(over) }},
			// A reader of unknown length: sent chunked.
			{"chunked over the bound", func(context.Context) io.Reader { return io.MultiReader(strings.NewReader(over)) }},
			{"never ending", func(ctx context.Context) io.Reader {
				pr, pw := io.Pipe()
				go func() { _, _ = pw.Write([]byte(`{"jsonrpc":"2.0","id":7,`)) }()
				// Held open until the case ends (or its deadline: the
				// client's body writer returns then, and so does Do).
				context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
				return pr
			}},
		} {
			// A deadline so that a server waiting for the body fails the
			// case instead of hanging the test.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+d.path, body.open(ctx))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", d.ctype)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("POST %s, %s body, no credential: %v", d.path, body.name, err)
				cancel()
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), d.want) || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("POST %s, %s body, no credential: %d %.300s, want 401 %s with its challenge", d.path, body.name, resp.StatusCode, b, d.want)
			}
		}
	}
}
