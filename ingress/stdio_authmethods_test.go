package ingress_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// TestStdioAuthMethodsNameTheEnvironment: over stdio (`e2a acp`, the
// editor's credential in its environment) initialize's authMethods, as
// acp-go-sdk's client reads them, tell the editor's user to set
// E2A_ACP_API_KEY or E2A_ACP_BEARER_TOKEN, and so does authenticate's
// auth_required for a method the connection did not authenticate with;
// over HTTP they still name the headers. The stdio ones said "send the key
// in the X-Api-Key header", which an editor's user cannot do.
func TestStdioAuthMethodsNameTheEnvironment(t *testing.T) {
	auth := pipetest.KeyAndOAuth(t, map[string]string{"alice": stdioAliceKey})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	p.Pool("demo", demo.New())
	s := openStdioAs(t, p, http.Header{"X-Api-Key": {stdioAliceKey}})
	res, err := s.Conn.Initialize(s.Ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ingress.SchemeAPIKey: ingress.EnvACPAPIKey, ingress.SchemeOAuth2: ingress.EnvACPBearerToken}
	if len(res.AuthMethods) != len(want) {
		t.Fatalf("authMethods %+v, want one per scheme of %v", res.AuthMethods, want)
	}
	for _, m := range res.AuthMethods {
		if m.Agent == nil || m.Agent.Description == nil {
			t.Fatalf("auth method %+v: no description", m)
		}
		if d := *m.Agent.Description; !strings.Contains(d, want[m.Agent.Id]) || strings.Contains(d, "header") {
			t.Errorf("stdio auth method %s: description %q, want it to name %s (no header)", m.Agent.Id, d, want[m.Agent.Id])
		}
	}
	_, err = s.Conn.Authenticate(s.Ctx, acp.AuthenticateRequest{MethodId: ingress.SchemeOAuth2})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != jsonrpc.CodeACPAuthRequired || !strings.Contains(re.Message, ingress.EnvACPBearerToken) {
		t.Errorf("stdio authenticate oauth2 with an API key: %v, want -32000 naming %s", err, ingress.EnvACPBearerToken)
	}

	_, m := postACP(t, p.URL, stdioAliceKey, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if len(m) != 1 || !strings.Contains(string(m[0].Result), "send the key in the X-Api-Key header") {
		t.Errorf("HTTP initialize: %+v, want the API key method to name its header", m)
	}
}

// TestStdioRefusalNamesTheVariable: when the editor's credential stops
// authenticating mid-session (an OAuth 2.0 access token expired), the
// -32000 acp-go-sdk's client gets for its next prompt tells the user to
// set E2A_ACP_BEARER_TOKEN, the variable it came from: it said only
// "token expired", with nothing an editor's user can act on.
func TestStdioRefusalNamesTheVariable(t *testing.T) {
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	cfg := &ingress.AuthConfig{OAuth2: pipetest.OAuth2()}
	cfg.OAuth2.TokenTTL = "10m"
	auth, err := ingress.NewAuth(cfg, ingress.WithAuthClock(now))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := auth.IssueToken("svc", pipetest.OAuth2Secret, "agents")
	if err != nil {
		t.Fatal(err)
	}
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	p.Pool("demo", demo.New())
	s := openStdioAs(t, p, http.Header{"Authorization": {"Bearer " + tok.AccessToken}})
	skew.Store(int64(time.Hour))
	_, err = s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != jsonrpc.CodeACPAuthRequired || !strings.Contains(re.Message, ingress.EnvACPBearerToken) ||
		strings.Contains(re.Message, ingress.EnvACPAPIKey) {
		t.Fatalf("prompt with an expired token: %v, want -32000 naming %s alone", err, ingress.EnvACPBearerToken)
	}
}

// openStdioAs opens an ACP session of acp-go-sdk's client over stdio to
// p's ingress, as `e2a acp` does with the editor's credential cred.
func openStdioAs(t *testing.T, p *pipetest.Pipeline, cred http.Header) *acptest.Session {
	t.Helper()
	return acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		ctx, err := ingress.WithStdioCredential(ctx, cred)
		if err != nil {
			return err
		}
		return ingress.ServeACPStdio(ctx, in, out, p.Ingress)
	})
}
