package normalizer_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

func TestRoutesPrecedence(t *testing.T) {
	r := normalizer.Routes{
		Default:  "dflt",
		Methods:  map[string]string{"chat.send": "chat", "session/*": "acp", "session/prompt": "prompt", "*": "any-method", "_zed/*": "zed"},
		Channels: map[string]string{"feishu": "feishu"},
	}
	for _, tt := range []struct {
		env  e2a.Envelope
		want string
	}{
		{e2a.Envelope{Method: "chat.send", Channel: "feishu"}, "chat"},
		{e2a.Envelope{Method: "session/prompt"}, "prompt"}, // exact beats prefix
		{e2a.Envelope{Method: "session/cancel"}, "acp"},    // longest prefix
		{e2a.Envelope{Method: "tasks/get", Channel: "x"}, "any-method"},
		{e2a.Envelope{Method: "ext", ExtMethod: "_zed/x"}, "zed"}, // ext_method tried first
	} {
		if got := r.Pool(&tt.env); got != tt.want {
			t.Errorf("%+v → %q, want %q", tt.env, got, tt.want)
		}
	}
	r2 := normalizer.Routes{Channels: map[string]string{"feishu": "feishu"}, Methods: map[string]string{"chat.send": "chat"}}
	for _, tt := range []struct {
		env  e2a.Envelope
		want string
	}{
		{e2a.Envelope{Method: "history.get", Channel: "feishu"}, "feishu"},
		{e2a.Envelope{Method: normalizer.MethodWorkflowExecute, Channel: "feishu"}, "feishu"}, // channel beats built-in
		{e2a.Envelope{Method: normalizer.MethodWorkflowExecute}, normalizer.WorkflowPool},
		{e2a.Envelope{}, normalizer.DefaultPool},
	} {
		if got := r2.Pool(&tt.env); got != tt.want {
			t.Errorf("%+v → %q, want %q", tt.env, got, tt.want)
		}
	}
}

func TestParseRoutes(t *testing.T) {
	r, err := normalizer.ParseRoutes(" default=demo , method: a2e.workflow.execute =wf;channel:\tweb=web ;; ")
	if err != nil {
		t.Fatal(err)
	}
	want := normalizer.Routes{Default: "demo", Methods: map[string]string{"a2e.workflow.execute": "wf"}, Channels: map[string]string{"web": "web"}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v", r)
	}
	back, err := normalizer.ParseRoutes(r.String())
	if err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("String round trip: %+v %v", back, err)
	}
	if r, err := normalizer.ParseRoutes(""); err != nil || r.Pool(&e2a.Envelope{}) != normalizer.DefaultPool {
		t.Errorf("empty: %+v %v", r, err)
	}
	for _, bad := range []string{"default", "default=", "default=a.b", "default=a b", "method:=x", "channel:=x", "method: =x", "channel:\t=x", "pool:x=y", "method:m=*", "default=" + string(make([]byte, 65))} {
		if _, err := normalizer.ParseRoutes(bad); err == nil {
			t.Errorf("ParseRoutes(%q) accepted", bad)
		}
	}
}

func TestRegistry(t *testing.T) {
	r := normalizer.NewRegistry()
	want := []string{"error", "handshake/req", "handshake/resp", "invoke/event", "ping", "pong", "shutdown"}
	if got := r.Types(); !reflect.DeepEqual(got, want) {
		t.Errorf("base map = %v", got)
	}
	if err := r.Register(normalizer.A2EType{Type: "error"}); !errors.Is(err, normalizer.ErrDuplicateType) {
		t.Errorf("base type overridden: %v", err)
	}
	if err := r.Register(normalizer.A2EType{Type: "a"}, normalizer.A2EType{Type: "a"}); !errors.Is(err, normalizer.ErrDuplicateType) {
		t.Errorf("duplicate in one call: %v", err)
	}
	if _, ok := r.Lookup("a"); ok {
		t.Error("a failed Register added something")
	}
	if err := r.Register(normalizer.A2EType{Type: ""}); err == nil {
		t.Error("empty type accepted")
	}
	req := []string{"req_id"}
	if err := r.Register(normalizer.A2EType{Type: "tool/call/req", Required: req}); err != nil {
		t.Fatal(err)
	}
	req[0] = "changed"
	got, ok := r.Lookup("tool/call/req")
	if !ok || got.Op != normalizer.OpSubmit || got.Model != normalizer.A2EGenericModel || got.Required[0] != "req_id" {
		t.Errorf("registered = %+v", got)
	}
	// Registering at start-up while requests are already served is safe.
	n := normalizer.New(normalizer.Config{A2ETypes: r})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func(i int) {
			defer wg.Done()
			_ = r.Register(normalizer.A2EType{Type: "plugin/" + string(rune('a'+i))})
		}(i)
		go func() {
			defer wg.Done()
			if _, err := n.FromA2E(normalizer.Input{Body: []byte(`{"type":"plugin/a","req_id":"x"}`)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func TestErrorMapping(t *testing.T) {
	lineErr := &normalizer.Error{Kind: normalizer.ErrInvalidParams, Lines: []normalizer.LineError{{Line: 1, Message: "x"}}}
	for _, tt := range []struct {
		err  error
		code int
		http int
		a2e  string
	}{
		{&normalizer.Error{Kind: normalizer.ErrParse}, -32700, 400, "parse_error"},
		{&normalizer.Error{Kind: normalizer.ErrInvalidRequest}, -32600, 400, "invalid_request"},
		{&normalizer.Error{Kind: normalizer.ErrMethodNotFound}, -32601, 404, "unknown_method"},
		{&normalizer.Error{Kind: normalizer.ErrInvalidParams}, -32602, 400, "invalid_params"},
		{lineErr, -32602, 422, "validation_error"},
		{&normalizer.Error{Kind: normalizer.ErrUnsupportedOperation}, -32004, 501, "unsupported"},
		{&normalizer.Error{Kind: normalizer.ErrPushNotificationNotSupported}, -32003, 501, "unsupported"},
		{&normalizer.Error{Kind: normalizer.ErrExtendedCardNotConfigured}, -32007, 501, "unsupported"},
		{&normalizer.Error{Kind: normalizer.ErrContentTypeNotSupported}, -32005, 415, "unsupported"},
		{errors.New("other"), -32603, 500, "internal_error"},
	} {
		if c := normalizer.JSONRPCCode(tt.err); c != tt.code {
			t.Errorf("%v: code %d", tt.err, c)
		}
		if s := normalizer.HTTPStatus(tt.err); s != tt.http {
			t.Errorf("%v: status %d", tt.err, s)
		}
		if a := normalizer.A2ECode(tt.err); a != tt.a2e {
			t.Errorf("%v: a2e %q", tt.err, a)
		}
	}
	if id := normalizer.ErrorJSONRPCID(errors.New("x")); string(id) != "null" {
		t.Errorf("id of a foreign error = %s", id)
	}
}

// TestMergeParamsToACPPrompt pins each rule of spec §7.
func TestMergeParamsToACPPrompt(t *testing.T) {
	for _, tt := range []struct {
		name, env, want string
	}{
		{"prompt kept", `{"method":"session/prompt","params":{"prompt":[{"type":"text","text":"a"}],"content_blocks":[{"type":"text","text":"b"}],"text":"c"}}`,
			`{"prompt":[{"type":"text","text":"a"}],"content_blocks":[{"type":"text","text":"b"}],"text":"c"}`},
		{"null prompt replaced", `{"method":"session/prompt","params":{"prompt":null,"text":"c"}}`,
			`{"prompt":[{"type":"text","text":"c"}],"text":"c"}`},
		{"content_blocks before text", `{"method":"session/prompt","params":{"content_blocks":[{"type":"text","text":"b"}],"text":"c"}}`,
			`{"prompt":[{"type":"text","text":"b"}],"content_blocks":[{"type":"text","text":"b"}],"text":"c"}`},
		{"empty content_blocks skipped", `{"method":"session/prompt","params":{"content_blocks":[],"content":"c"}}`,
			`{"prompt":[{"type":"text","text":"c"}],"content_blocks":[],"content":"c"}`},
		{"text before content before query", `{"method":"session/prompt","params":{"query":"q","content":"c","text":"t"}}`,
			`{"prompt":[{"type":"text","text":"t"}],"query":"q","content":"c","text":"t"}`},
		{"empty strings skipped", `{"method":"session/prompt","params":{"text":"","content":5,"query":"q"}}`,
			`{"prompt":[{"type":"text","text":"q"}],"text":"","content":5,"query":"q"}`},
		{"no source, no prompt", `{"method":"session/prompt","params":{"mode":"x"}}`, `{"mode":"x"}`},
		{"session_id set", `{"method":"session/prompt","session_id":"s1","params":{}}`, `{"session_id":"s1"}`},
		{"session_id not overwritten", `{"method":"session/prompt","session_id":"s1","params":{"session_id":"s0"}}`, `{"session_id":"s0"}`},
		{"acp_meta merged, wins", `{"method":"session/prompt","params":{"_meta":{"a":1,"b":1}},"acp_meta":{"b":2}}`, `{"_meta":{"a":1,"b":2}}`},
		{"acp_meta replaces a non-object _meta", `{"method":"session/prompt","params":{"_meta":"x"},"acp_meta":{"b":2}}`, `{"_meta":{"b":2}}`},
		{"other method: shallow copy only", `{"method":"session/new","session_id":"s1","params":{"text":"t"},"acp_meta":{"b":2}}`, `{"text":"t"}`},
		{"chat.send is not session/prompt", `{"method":"chat.send","session_id":"s1","params":{"text":"t"}}`, `{"text":"t"}`},
		{"nil params", `{"method":"initialize"}`, `{}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env, err := e2a.FromJSON([]byte(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(env)
			got, _ := json.Marshal(normalizer.MergeParamsToACPPrompt(env))
			if !jsonEq(t, got, []byte(tt.want)) {
				t.Errorf("got %s\nwant %s", got, tt.want)
			}
			if after, _ := json.Marshal(env); string(after) != string(before) {
				t.Errorf("envelope modified: %s", after)
			}
		})
	}
	// The _meta map of the result is a copy.
	env, _ := e2a.FromJSON([]byte(`{"method":"session/prompt","params":{"_meta":{"a":1}},"acp_meta":{"b":2}}`))
	out := normalizer.MergeParamsToACPPrompt(env)
	out["_meta"].(map[string]any)["c"] = 3
	if _, ok := env.Params["_meta"].(map[string]any)["c"]; ok {
		t.Error("_meta shared with the envelope")
	}
}

func TestEnvelopeFromACPJSONRPC(t *testing.T) {
	env, err := normalizer.EnvelopeFromACPJSONRPC([]byte(`{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{"session_id":"s1","prompt":[{"type":"text","text":"hi"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if env.Method != "session/prompt" || string(env.JSONRPCID) != "42" || env.SessionID != "s1" ||
		env.Provenance.SourceProtocol != "acp" || env.Provenance.Details["jsonrpc_method"] != "session/prompt" || env.RequestID == "" {
		t.Errorf("%+v", env)
	}
	if _, err := normalizer.EnvelopeFromACPJSONRPC([]byte(`{}`)); !errors.Is(err, normalizer.ErrInvalidRequest) {
		t.Errorf("empty object: %v", err)
	}
}

// TestIdentity covers the identity rule of Principal.
func TestIdentity(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}],"metadata":{"user_id":"meta-user"}}}}`)
	for _, tt := range []struct {
		name      string
		principal *normalizer.Principal
		header    string
		user      string
		origin    string
	}{
		{"metadata only", nil, "", "meta-user", "user"},
		{"header before metadata", nil, "hdr-user", "hdr-user", "user"},
		{"principal wins", &normalizer.Principal{UserID: "alice"}, "hdr-user", "alice", "user"},
		{"service principal", &normalizer.Principal{UserID: "svc", IdentityOrigin: "service"}, "", "svc", "service"},
		{"gateway asserts user", &normalizer.Principal{UserID: "gw", IdentityOrigin: "service", AssertsUser: true}, "hdr-user", "hdr-user", "user"},
	} {
		in := normalizer.Input{Body: body, Principal: tt.principal, Header: http.Header{}}
		if tt.header != "" {
			in.Header.Set("X-User-ID", tt.header)
		}
		res, err := n.FromA2A(in)
		if err != nil {
			t.Fatal(err)
		}
		if res.Envelope.UserID != tt.user || res.Envelope.IdentityOrigin != tt.origin {
			t.Errorf("%s: user %q origin %q", tt.name, res.Envelope.UserID, res.Envelope.IdentityOrigin)
		}
	}
	// A gateway without a claimed user falls back to itself.
	res, err := n.FromE2A(normalizer.Input{Body: []byte(`{"method":"m"}`), Principal: &normalizer.Principal{UserID: "gw", IdentityOrigin: "service", AssertsUser: true}})
	if err != nil || res.Envelope.UserID != "gw" || res.Envelope.IdentityOrigin != "service" {
		t.Errorf("gateway fallback: %+v %v", res.Envelope, err)
	}
}

func TestIsSecretKey(t *testing.T) {
	for k, want := range map[string]bool{
		"Authorization": true, "authorization": true, "X-Api-Key": true, "x_api_key": true, "API_KEY": true,
		"apiKey": true, "bearer_token": true, "Access-Token": true, "password": true, "Cookie": true,
		"Set-Cookie": true, "client_secret": true, "Proxy-Authorization": true,
		"api_key_ref": false, "credential_ref": false, "credentialRef": false, "token_count": false,
		"author": false, "": false, "keys": false, "passwords": true,
		"secret": true, "token": true, "auth_token": true, "session_token": true, "passwd": true, "credentials": true,
		"auth": true, "max_tokens": false, "session_id": false, "sessionId": false, "contextId": false,
	} {
		if got := normalizer.IsSecretKey(k); got != want {
			t.Errorf("IsSecretKey(%q) = %v", k, got)
		}
	}
}

// TestAgentVaultWebhookAndMCP checks the AgentVault specifics beyond the
// goldens: mcp_context is copied (not shared), the webhook loses credentials.
func TestAgentVaultWebhookAndMCP(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	res, err := n.FromAgentVault(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"x"}],"metadata":{"mcp_context":{"user_pref":"celsius"}}},"webhookUrl":"https://u:p@h/hook?token=t"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	env := res.Envelope
	env.Params["mcp_context"].(map[string]any)["user_pref"] = "changed"
	if env.A2AMetadata["mcp_context"].(map[string]any)["user_pref"] != "celsius" {
		t.Error("mcp_context shared between params and a2a_metadata")
	}
	if got := env.Provenance.Details[normalizer.DetailWebhookURL]; got != "https://h/…" {
		t.Errorf("webhook = %v", got)
	}
}

// TestWebhookURLsStoredAsSchemeAndHost: an inline A2A push config's URL and
// AgentVault's webhookUrl are stored as redact.URL shows them (scheme and
// host): a webhook's path and query may be its secret (Slack's hooks), and
// the envelope reaches the streams, the audit role and the upstream agent;
// the push stage registers the config from the call itself.
func TestWebhookURLsStoredAsSchemeAndHost(t *testing.T) {
	const hook = "http://u:PW_SECRET@127.0.0.1:59000/services/T0/B0/WEBHOOK_PATH_SECRET?code=QUERY_SECRET&token=TOKEN_SECRET"
	n := normalizer.New(normalizer.Config{})
	for name, c := range map[string]struct {
		ad   normalizer.Adapter
		body string
		url  func(*e2a.Envelope) any
	}{
		"a2a push config": {n.FromA2A, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user",` +
			`"parts":[{"kind":"text","text":"hi"}]},"configuration":{"pushNotificationConfig":{"url":` + jsonString(hook) + `}}}}`,
			func(env *e2a.Envelope) any { return env.Params["push_notification_config"].(map[string]any)["url"] }},
		"agentvault webhookUrl": {n.FromAgentVault, `{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":{"role":"user",` +
			`"parts":[{"type":"text","content":"hi"}]},"webhookUrl":` + jsonString(hook) + `}}`,
			func(env *e2a.Envelope) any { return env.Provenance.Details[normalizer.DetailWebhookURL] }},
	} {
		res, err := c.ad(normalizer.Input{Body: []byte(c.body)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := json.Marshal(res.Envelope)
		for _, secret := range []string{"PW_SECRET", "WEBHOOK_PATH_SECRET", "QUERY_SECRET", "TOKEN_SECRET", "services"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s: %s stored: %s", name, secret, b)
			}
		}
		if got := c.url(res.Envelope); got != "http://127.0.0.1:59000/…" {
			t.Errorf("%s: url %v, want http://127.0.0.1:59000/…", name, got)
		}
	}
}

func TestErrorMessageBounded(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	long := strings.Repeat("m", 1<<20)
	_, err := n.FromA2A(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"` + long + `"}`)})
	if !errors.Is(err, normalizer.ErrMethodNotFound) || len(err.Error()) > 300 {
		t.Errorf("error of %d bytes: %.100v", len(err.Error()), err)
	}
}

// TestRoutesWildcardTieExtMethodFirst: an ext envelope whose ext_method
// and method "ext" are each prefixed by a wildcard rule as long goes to
// ext_method's pool every time (it went to either, by the map's order;
// found by FuzzRoutes).
func TestRoutesWildcardTieExtMethodFirst(t *testing.T) {
	r := normalizer.Routes{Methods: map[string]string{"a*": "first", "e*": "second"}}
	env := &e2a.Envelope{Method: "ext", ExtMethod: "abc"}
	for range 100 {
		if got := r.Pool(env); got != "first" {
			t.Fatalf("ext_method abc went to %q, want first (a*, tied with e* for ext)", got)
		}
	}
}
