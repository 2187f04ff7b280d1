package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	acp "github.com/coder/acp-go-sdk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// Authentication at the front doors, checked door by door.

const (
	disabledKey  = "ak_mallory_disabled_0123456789"
	aliceDoorKey = "ak_alice_doors_0123456789abcdef"
)

// doorsAuth is apiKey auth with alice enabled and mallory disabled, none
// optionally enabled too.
func doorsAuth(t *testing.T, none bool) *ingress.Auth {
	t.Helper()
	cfg := &ingress.AuthConfig{APIKeys: []ingress.Credential{
		{Principal: "alice", Secret: aliceDoorKey},
		{Principal: "mallory", Secret: disabledKey, Disabled: true},
	}}
	if none {
		cfg.Schemes = []string{ingress.SchemeNone, ingress.SchemeAPIKey}
	}
	a, err := ingress.NewAuth(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestWorkflowDisabledPrincipal403: a disabled principal's API key is 403
// on the workflow REST API as on every front door (AUTH.md, "403 for a
// disabled principal"). It was 401 "authentication required", as if the
// key were wrong: every Authenticate error became
// workflow.ErrUnauthenticated, ErrForbidden included.
func TestWorkflowDisabledPrincipal403(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc, ingress.WithWorkflow(workflow.New(workflow.Options{})), ingress.WithAuth(doorsAuth(t, false)))

	// The E2A door: 403 forbidden.
	if resp, b := do(t, "POST", url+"/v1/requests?agent=demo", `{"params":{"text":"x"}}`, "X-Api-Key", disabledKey); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("E2A door: %d %s", resp.StatusCode, b)
	}
	for _, hdr := range [][]string{{"X-Api-Key", disabledKey}, {"Authorization", "Bearer " + disabledKey}} {
		resp, b := do(t, "GET", url+"/api/v1/capabilities", "", hdr...)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("workflow API, disabled principal (%s): %d %s, want 403 as on every other door", hdr[0], resp.StatusCode, b)
		}
	}
}

// TestWorkflowChallenge: the workflow REST API's 401 carries the front
// doors' challenges for the same wrong key (AUTH.md: the configured realm,
// and `ApiKey realm=…, header="X-Api-Key"` when apiKey is enabled). It
// carried a fixed `Bearer realm="a2e"`.
func TestWorkflowChallenge(t *testing.T) {
	_, nc := natstest.RunServer(t)
	a, err := ingress.NewAuth(&ingress.AuthConfig{Realm: "corp", APIKeys: []ingress.Credential{{Principal: "alice", Secret: aliceDoorKey}}})
	if err != nil {
		t.Fatal(err)
	}
	url := frontDoor(t, nc, ingress.WithWorkflow(workflow.New(workflow.Options{})), ingress.WithAuth(a))
	front, _ := do(t, "POST", url+"/v1/requests?agent=demo", `{"params":{"text":"x"}}`, "X-Api-Key", "ak_wrong_0123456789abcdef")
	wf, b := do(t, "GET", url+"/api/v1/capabilities", "", "X-Api-Key", "ak_wrong_0123456789abcdef")
	if front.StatusCode != 401 || wf.StatusCode != 401 {
		t.Fatalf("statuses %d, %d %s", front.StatusCode, wf.StatusCode, b)
	}
	want := front.Header.Values("WWW-Authenticate")
	got := wf.Header.Values("WWW-Authenticate")
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("workflow API challenge %q, the front door's (and AUTH.md's) %q", got, want)
	}
}

// TestACPAuthenticateAnonymous: with optional auth (none + apiKey), an
// ACP client that presents no credential and calls
// authenticate{methodId:"apiKey"} is refused (ACP auth_required): it stays
// the shared anonymous principal, whatever it creates next owned by (and
// readable by) every unauthenticated caller. It was told it succeeded.
func TestACPAuthenticateAnonymous(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc, ingress.WithAuth(doorsAuth(t, true)))
	resp, b := do(t, "POST", url+"/acp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"apiKey"`) {
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
	resp, b = do(t, "POST", url+"/acp", `{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"apiKey"}}`)
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("authenticate: %d %s", resp.StatusCode, b)
	}
	if r.Error == nil {
		t.Errorf("authenticate apiKey without any credential answered success %s: the caller is still anonymous", r.Result)
	}
}

// TestNoCredentialStored: credentials presented
// at every door (API key and OAuth2 access token headers, Cookie,
// Proxy-Authorization, gRPC x-api-key metadata, the per-pool mount) and the
// client secret of the token endpoint reach no stream or bucket of the
// embedded server once the requests completed.
func TestNoCredentialStored(t *testing.T) {
	const (
		clientSecret = "cs_review_client_secret_0123456789"
		cookie       = "ck_review_cookie_0123456789"
		proxy        = "px_review_proxy_0123456789"
	)
	a, err := ingress.NewAuth(&ingress.AuthConfig{
		APIKeys: []ingress.Credential{{Principal: "alice", Secret: aliceDoorKey}},
		OAuth2: ingress.OAuth2Config{SigningKey: "review-signing-key-0123456789abcdef0123",
			Clients: []ingress.OAuth2Client{{ClientID: "svc", ClientSecret: clientSecret}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := startGRPCPipeline(t, ingress.WithAuth(a))
	resp, b := do(t, "POST", p.url+"/oauth/token", "grant_type=client_credentials&client_id=svc&client_secret="+clientSecret,
		"Content-Type", "application/x-www-form-urlencoded")
	var tok ingress.TokenResponse
	if resp.StatusCode != 200 || json.Unmarshal(b, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("token: %d %s", resp.StatusCode, b)
	}
	bearer := "Bearer " + tok.AccessToken
	extra := []string{"Cookie", "session=" + cookie, "Proxy-Authorization", "Basic " + proxy}
	v03 := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"%s","parts":[{"kind":"text","text":"x"}]}}}`
	v1 := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"%s","parts":[{"text":"x"}]}}}`
	calls := []struct{ path, body string }{
		{"/v1/requests?agent=demo&wait=true", `{"params":{"text":"x"}}`},
		{"/pools/demo/v1/requests?wait=true", `{"params":{"text":"x"}}`},
		{"/a2a?agent=demo", fmt.Sprintf(v03, "m-v03")},
		{"/a2a/v1?agent=demo", fmt.Sprintf(v1, "m-v1")},
		{"/a2a/v1/message:send?agent=demo", `{"message":{"role":"ROLE_USER","parts":[{"text":"x"}],"messageId":"m-rest"}}`},
		{"/pools/demo/a2a/v1", fmt.Sprintf(v1, "m-pool")},
	}
	for _, cred := range [][]string{{"X-Api-Key", aliceDoorKey}, {"Authorization", bearer}} {
		for _, c := range calls {
			resp, b := do(t, "POST", p.url+c.path, c.body, append(append([]string{"Content-Type", "application/json"}, cred...), extra...)...)
			if resp.StatusCode != 200 {
				t.Fatalf("%s with %s: %d %s", c.path, cred[0], resp.StatusCode, b)
			}
		}
	}
	g := grpcClient(t, p, aliceDoorKey)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := g.SendMessage(ctx, userMessage("grpc")); err != nil {
		t.Fatalf("gRPC SendMessage: %v", err)
	}
	if natstest.StoredWith(t, p.js, `"user_id":"svc"`) == 0 || natstest.StoredWith(t, p.js, `"user_id":"alice"`) == 0 {
		t.Fatal("the requests are not stored: the probe below would hold vacuously")
	}
	for _, s := range []string{aliceDoorKey, tok.AccessToken, clientSecret, cookie, proxy} {
		if n := natstest.StoredWith(t, p.js, s); n != 0 {
			t.Errorf("%d stored messages hold the credential %.12s…", n, s)
		}
	}
}

// TestDisabledEverywhere: a disabled API key is
// PermissionDenied on the gRPC binding, nothing published; an OAuth2 token
// issued before its client was disabled is 403 at the door, and the token
// endpoint answers the disabled client unauthorized_client (RFC 6749 §5.2).
func TestDisabledEverywhere(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, _ := startGRPCPipeline(t, ingress.WithAuth(doorsAuth(t, false)), ingress.WithRegisterer(reg))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := streamMsgs(t, p.js, "E2A_REQUESTS")
	_, err := grpcClient(t, p, disabledKey).SendMessage(ctx, userMessage("disabled"))
	if !errors.Is(err, a2a.ErrUnauthorized) { // the SDK's mapping of PermissionDenied
		t.Errorf("gRPC with a disabled key: %v, want PermissionDenied", err)
	}
	// Counted as what it was (it was counted 401).
	if n, wrong := requestsCounted(t, reg, "a2a", "grpc", "403"), requestsCounted(t, reg, "a2a", "grpc", "401"); n != 1 || wrong != 0 {
		t.Errorf("the gRPC refusal counted %v times 403, %v times 401; want once 403", n, wrong)
	}
	if after := streamMsgs(t, p.js, "E2A_REQUESTS"); after != before {
		t.Errorf("published %d requests for a disabled key", after-before)
	}

	cfg := func(disabled bool) *ingress.AuthConfig {
		return &ingress.AuthConfig{OAuth2: ingress.OAuth2Config{SigningKey: "review-signing-key-0123456789abcdef0123",
			Clients: []ingress.OAuth2Client{{ClientID: "svc", ClientSecret: "cs_review_client_secret_0123456789", Disabled: disabled}}}}
	}
	enabled, err := ingress.NewAuth(cfg(false))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := enabled.IssueToken("svc", "cs_review_client_secret_0123456789", "")
	if err != nil {
		t.Fatal(err)
	}
	disabled, err := ingress.NewAuth(cfg(true))
	if err != nil {
		t.Fatal(err)
	}
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc, ingress.WithAuth(disabled))
	if resp, b := do(t, "POST", url+"/v1/requests?agent=demo", `{"params":{"text":"x"}}`, "Authorization", "Bearer "+tok.AccessToken); resp.StatusCode != 403 {
		t.Errorf("token of a disabled client: %d %s", resp.StatusCode, b)
	}
	resp, b := do(t, "POST", url+"/oauth/token", "grant_type=client_credentials", "Content-Type", "application/x-www-form-urlencoded",
		"Authorization", "Basic c3ZjOmNzX3Jldmlld19jbGllbnRfc2VjcmV0XzAxMjM0NTY3ODk=")
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"unauthorized_client"`) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("token endpoint, disabled client: %d %v %s", resp.StatusCode, resp.Header, b)
	}
}

// TestACPInitializeWithoutCredential: under auth (an API key required),
// POST /acp answers initialize, and only it, to a caller that presents no
// credential, so that an ACP client learns the authMethods from its
// result (ACP: initialize, then authenticate, then sessions) rather than
// from WWW-Authenticate alone; it was 401 like every other call.
// Everything else stays as it was: every other method without a
// credential is 401 -32000 (session/new, session/load, session/prompt,
// authenticate, an extension method, initialize as a notification, in a
// batch, in a body over the refusal bound or of unknown length), nothing
// is published; a wrong key is 401 on initialize too and counts against
// its address (the failure limit then refuses it 429); and the anonymous
// initialize calls are charged to the anonymous principal's rate limit
// (429 once it is spent).
func TestACPInitializeWithoutCredential(t *testing.T) {
	const perMinute = 3
	clock := &authClock{now: time.Now()}
	lim := ingress.NewLimiter(nil, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: perMinute}}, ingress.WithLimiterClock(testkit.MidMinute()))
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(limitedAuth(t, clock, prometheus.NewRegistry())), ingress.WithLimiter(lim)))
	p.Pool("demo", demo.New())
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`
	post := func(body string, hdr ...string) (int, []byte) {
		resp, b := do(t, "POST", p.URL+"/acp", body, hdr...)
		return resp.StatusCode, b
	}

	// alice's session, which the calls below name.
	status, b := post(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`, "X-Api-Key", aliceDoorKey)
	var sess acp.NewSessionResponse
	if err := json.Unmarshal(rpcResult(b), &sess); status != 200 || err != nil || sess.SessionId == "" {
		t.Fatalf("alice's session/new: %d %s", status, b)
	}

	status, b = post(initialize)
	var ini acp.InitializeResponse
	if err := json.Unmarshal(rpcResult(b), &ini); status != 200 || err != nil || len(ini.AuthMethods) != 1 ||
		ini.AuthMethods[0].Agent == nil || ini.AuthMethods[0].Agent.Id != "apiKey" {
		t.Fatalf("initialize without a credential: %d %s; want 200 with the apiKey auth method", status, b)
	}

	before := streamMsgs(t, p.JS, "E2A_REQUESTS")
	pad := `,"_meta":{"pad":"` + strings.Repeat("x", 70<<10) + `"}`
	for name, body := range map[string]string{
		"session/new":    `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`,
		"session/load":   `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"` + string(sess.SessionId) + `","cwd":"/w","mcpServers":[]}}`,
		"session/prompt": `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + string(sess.SessionId) + `","prompt":[{"type":"text","text":"hi"}]}}`,
		"authenticate":   `{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"apiKey"}}`,
		"extension":      `{"jsonrpc":"2.0","id":2,"method":"_e2a/echo","params":{}}`,
		"notification":   `{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":1}}`,
		"batch":          `[` + initialize + `]`,
		"mixed batch":    `[` + initialize + `,{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}]`,
		"large":          `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1` + pad + `}}`,
	} {
		if status, b := post(body); status != http.StatusUnauthorized || rpcCode(b) != "-32000" {
			t.Errorf("%s without a credential: %d %.200s; want 401 -32000", name, status, b)
		}
	}
	req, err := http.NewRequest("POST", p.URL+"/acp", io.MultiReader(strings.NewReader(initialize)))
	if err != nil {
		t.Fatal(err)
	}
	if resp, b := testkit.Send(t, req); resp.StatusCode != http.StatusUnauthorized || req.ContentLength != 0 {
		t.Errorf("initialize of unknown length (chunked) without a credential: %d %s; want 401", resp.StatusCode, b)
	}
	if after := streamMsgs(t, p.JS, "E2A_REQUESTS"); after != before {
		t.Errorf("%d requests published for calls without a credential", after-before)
	}

	// A wrong key is checked, and counted, on initialize too.
	for i := 0; i < authLimitMax; i++ {
		if status, b := post(initialize, "X-Api-Key", wrongDoorKey); status != http.StatusUnauthorized {
			t.Fatalf("initialize with a wrong key: %d %s; want 401", status, b)
		}
	}
	if status, b := post(initialize, "X-Api-Key", wrongDoorKey); status != http.StatusTooManyRequests {
		t.Errorf("initialize with a wrong key over the failure limit: %d %s; want 429", status, b)
	}

	// The anonymous initialize calls spend the anonymous principal's rate
	// limit (the first above was one).
	for i := 1; i < perMinute; i++ {
		if status, b := post(initialize); status != 200 {
			t.Fatalf("initialize %d without a credential: %d %s", i+1, status, b)
		}
	}
	if status, b := post(initialize); status != http.StatusTooManyRequests {
		t.Errorf("initialize without a credential over the rate limit: %d %s; want 429", status, b)
	}
}

// rpcResult is the result of a JSON-RPC response b.
func rpcResult(b []byte) json.RawMessage {
	var v struct {
		Result json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(b, &v)
	return v.Result
}
