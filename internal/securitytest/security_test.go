package securitytest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/bench"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// The secrets of the run. Each is searched, raw and base64-encoded, in
// every stored message, the logs and /metrics after the run.
const (
	keyAlice       = "ak_alice_SECRET_7f3c9a1e5b2d4f6a8c0e"
	keyBob         = "ak_bob_SECRET_1a2b3c4d5e6f7a8b9c0d"
	keyCarol       = "ak_carol_SECRET_4d5e6f7a8b9c0d1e2f3a"
	keyMallory     = "ak_mallory_SECRET_disabled_0f1e2d3c" // disabled principal
	keyOps         = "ak_ops_SECRET_audit_role_77aa88bb99" // audit role
	keyDave        = "ak_dave_SECRET_owner_5e6f7a8b9c0d1e" // the other tenant of TestTenantIsolation
	bodyMCPEnv     = "mcp_env_SECRET_0ddba11cafe12345"
	bearerCI       = "bt_ci_SECRET_9e8d7c6b5a4f3e2d1c0b"
	oauthSecret    = "cs_svc_SECRET_5a6b7c8d9e0f1a2b3c4d"
	oauthSigning   = "sk_signing_SECRET_0123456789abcdef0123456789abcdef"
	bodyBearer     = "body_bearer_SECRET_c0ffee0123456789"
	bodyExtra      = "body_extra_header_SECRET_deadbeef42"
	bodyPushToken  = "push_token_SECRET_feedface0123456"
	bodyParamsPass = "params_password_SECRET_abad1dea99"
)

// scanCanary is stored on purpose; the scan must find it.
const scanCanary = "canary_stored_on_purpose_5ca77e57"

var allSecrets = []string{keyDave, keyOps, keyAlice, keyBob, keyCarol, keyMallory, bodyMCPEnv, bearerCI, oauthSecret, oauthSigning, bodyBearer, bodyExtra, bodyPushToken, bodyParamsPass}

// knownFindings are failures reported to the owners (see the package doc):
// case name → what is wrong and where it is to be fixed.
var knownFindings = map[string]string{}

// caseResult is one case tried.
type caseResult struct {
	group, name string
	ok          bool
	detail      string
}

type suite struct {
	t    testing.TB
	base string
	nc   *nats.Conn
	js   jetstream.JetStream
	hc   *http.Client
	logs *testkit.Buffer
	// extraTexts are name, text pairs scanned for secrets too.
	extraTexts []string
	mu         sync.Mutex
	results    []caseResult
}

func (s *suite) check(group, name string, ok bool, format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, caseResult{group: group, name: group + "/" + name, ok: ok, detail: fmt.Sprintf(format, a...)})
}

const (
	pool    = "sec"
	maxBody = 64 << 10
	// readTimeout stands for cmd/e2a's http.Server ReadTimeout (60 s).
	readTimeout = 3 * time.Second
)

// start runs the pipeline with auth on, wired as cmd/e2a wires `e2a dev`
// (same HTTP server timeouts): ingress, egress, the console, the workflow
// API with its pool, plus /metrics, /healthz and /readyz. Principals:
// alice, bob, carol, dave (API keys), mallory (disabled), ops (API key,
// audit role), ci (bearer), svc (oauth2). mods change the auth configuration.
func start(t testing.TB, mods ...func(*ingress.AuthConfig)) *suite {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	logs := &testkit.Buffer{}
	// The process's logger (cmd/e2a's), with its secret redaction.
	log, err := obs.NewLogger(logs, "json", "debug")
	if err != nil {
		t.Fatal(err)
	}
	acfg := &ingress.AuthConfig{
		Schemes: []string{"apiKey", "bearer", "oauth2"},
		APIKeys: []ingress.Credential{
			{Principal: "alice", Secret: keyAlice},
			{Principal: "bob", Secret: keyBob},
			{Principal: "carol", Secret: keyCarol},
			{Principal: "mallory", Secret: keyMallory, Disabled: true},
			{Principal: "ops", Secret: keyOps},
			{Principal: "dave", Secret: keyDave},
		},
		BearerTokens: []ingress.Credential{{Principal: "ci", Secret: bearerCI}},
		OAuth2: ingress.OAuth2Config{
			SigningKey: oauthSigning,
			Clients:    []ingress.OAuth2Client{{ClientID: "svc", ClientSecret: oauthSecret, Scopes: []string{"agents"}}},
		},
		Roles: map[string][]string{"ops": {"audit"}},
	}
	for _, m := range mods {
		m(acfg)
	}
	auth, err := ingress.NewAuth(acfg)
	if err != nil {
		t.Fatalf("auth: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, streams.RateLimitBucket)
	if err != nil {
		t.Fatalf("rate limit bucket: %v", err)
	}
	limiter := ingress.NewLimiter(kv, ingress.LimiterConfig{
		Limits: ingress.RateLimits{PerMinute: 100000, PerHour: 1000000, PerDay: 10000000},
		Overrides: map[string]ingress.RateLimits{
			"bob":   {PerMinute: 10, PerHour: 100, PerDay: 1000},
			"carol": {PerMinute: 10, PerHour: 100, PerDay: 1000},
		},
	}, ingress.WithLimiterClock(testkit.MidMinute()))
	reg := obs.NewRegistry()
	// Egress's GET endpoints demand the ingress credentials, as cmd/e2a
	// wires them (egressAuthorizer).
	authorize := func(r *http.Request) (tenant.Principal, error) {
		p, err := auth.Tenant(r)
		ingress.StripCredentialHeaders(r.Header)
		return p, err
	}
	eg, err := egress.New(nc, egress.WithRegisterer(reg), egress.WithLogger(log), egress.WithWriteTimeout(time.Second),
		egress.WithAuthorizer(authorize))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eg.Close)
	wf := workflow.New(workflow.Options{Logger: log})
	in, err := ingress.New(nc, eg, ingress.WithAuth(auth), ingress.WithLimiter(limiter), ingress.WithDefaultPool(pool),
		ingress.WithMaxBodyBytes(maxBody), ingress.WithRegisterer(reg), ingress.WithLogger(log), ingress.WithWorkflow(wf))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	eg.Register(mux)
	cctx, ccancel := context.WithCancel(context.Background())
	con, err := console.New(cctx, nc, eg, console.WithLogger(log), console.WithRegisterer(prometheus.NewRegistry()),
		console.WithAuth(func(r *http.Request) (tenant.Principal, int, error) {
			p, err := auth.Tenant(r)
			if err != nil {
				return tenant.Principal{}, ingress.AuthStatus(err), err
			}
			return p, 0, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ccancel(); con.Close() })
	con.Register(mux)
	obs.Register(mux, reg, obs.NATSConnected(nc))
	// cmd/e2a's server settings, but for ReadTimeout: 60 s there, the
	// suite's readTimeout here to keep the slow-body case short.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: readTimeout, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	actx, acancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	wdone := make(chan error, 1)
	go func() {
		done <- agent.Run(actx, nc, pool, bench.Agent(3, 32, 0), agent.WithConcurrency(64), agent.WithLogger(log),
			agent.WithMetrics(prometheus.NewRegistry()), agent.WithDrainTimeout(time.Second))
	}()
	edone := make(chan error, 1)
	go func() {
		edone <- agent.Run(actx, nc, echoPool, echoAgent, agent.WithLogger(log),
			agent.WithMetrics(prometheus.NewRegistry()), agent.WithDrainTimeout(time.Second))
	}()
	go func() {
		wdone <- agent.Run(actx, nc, workflow.Pool, wf, agent.WithLogger(log),
			agent.WithMetrics(prometheus.NewRegistry()), agent.WithDrainTimeout(time.Second))
	}()
	t.Cleanup(func() { acancel(); <-done; <-wdone; <-edone })
	for _, pl := range []string{pool, echoPool, workflow.Pool} {
		waitConsumer(t, js, pl)
	}
	return &suite{t: t, base: "http://" + ln.Addr().String(), nc: nc, js: js, logs: logs,
		hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16}}}
}

// waitConsumer waits for the durable consumer of an agent pool.
func waitConsumer(t testing.TB, js jetstream.JetStream, pool string) {
	cname, _ := streams.AgentConsumerName(pool)
	testkit.Eventually(t, 20*time.Second, "agent consumer "+cname, func() bool {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.Consumer(c, streams.RequestsStream, cname)
		return err == nil
	})
}

// echoPool's agent answers every request with its params as text, so that
// whatever a request carried shows up in its frames too.
const echoPool = "echo"

var echoAgent = agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	b, _ := json.Marshal(env.Params)
	if err := w.Chunk(e2a.DeltaText, "echo: "+string(b)); err != nil {
		return err
	}
	return w.Complete(map[string]any{"echoed": len(b)})
})

// response is what a request got.
type response struct {
	status int
	header http.Header
	body   []byte
	dur    time.Duration
	err    error
}

func (s *suite) do(method, path string, body []byte, hdr map[string]string) response {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return response{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := s.hc.Do(req)
	if err != nil {
		return response{err: err, dur: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return response{status: resp.StatusCode, header: resp.Header, body: b, dur: time.Since(start), err: err}
}

func (r response) String() string {
	if r.err != nil {
		return "error " + r.err.Error()
	}
	b := r.body
	if len(b) > 160 {
		b = b[:160]
	}
	return fmt.Sprintf("HTTP %d %s (%v)", r.status, bytes.TrimSpace(b), r.dur.Round(time.Millisecond))
}

// requestsStored is the number of messages in E2A_REQUESTS.
func (s *suite) requestsStored() uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		s.t.Fatalf("stream info: %v", err)
	}
	return st.CachedInfo().State.Msgs
}

func (s *suite) alive() bool {
	r := s.do(http.MethodGet, "/healthz", nil, nil)
	return r.err == nil && r.status == http.StatusOK
}

// endpoint is a POST endpoint with a valid body and a predicate for a
// successful answer.
type endpoint struct {
	name string
	path string
	body func(id string) []byte
	hdr  map[string]string
	// wrap puts a payload (used for UTF-8 and nesting cases) in a body of
	// the protocol.
	wrap func(raw string) []byte
}

func endpoints() []endpoint {
	return []endpoint{
		{
			name: "POST /v1/requests", path: "/v1/requests",
			body: func(id string) []byte {
				return fmt.Appendf(nil, `{"request_id":%q,"params":{"text":"hi"}}`, id)
			},
			wrap: func(raw string) []byte { return []byte(`{"params":{"text":` + raw + `}}`) },
		},
		{
			name: "POST /a2a message/send", path: "/a2a",
			body: func(id string) []byte {
				return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%q,"method":"message/send","params":{"message":{"kind":"message","messageId":%q,"role":"user","parts":[{"kind":"text","text":"hi"}]}}}`, id, id)
			},
			wrap: func(raw string) []byte {
				return []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":` + raw + `}]}}}`)
			},
		},
		{
			name: "POST /acp session/new", path: "/acp",
			body: func(id string) []byte {
				return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%q,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, id)
			},
			wrap: func(raw string) []byte {
				return []byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":` + raw + `}]}}`)
			},
		},
		{
			name: "POST /a2e", path: "/a2e",
			body: func(id string) []byte {
				return fmt.Appendf(nil, `{"type":"chat/req","id":%q,"text":"hi"}`+"\n", id)
			},
			wrap: func(raw string) []byte { return []byte(`{"type":"chat/req","id":"x1","text":` + raw + `}` + "\n") },
		},
	}
}

func TestSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("security suite: not in -short")
	}
	s := start(t)
	alice := map[string]string{"X-Api-Key": keyAlice}

	// A finished request of alice's, for the read cases.
	owned := "sec-owned-1"
	if r := s.do(http.MethodPost, "/v1/requests?wait=true", fmt.Appendf(nil, `{"request_id":%q,"params":{"text":"mine"}}`, owned), alice); r.status != http.StatusOK {
		t.Fatalf("control request: %s", r)
	}

	s.authCases(alice, owned)
	s.bodyCases(alice)
	s.slowCases(alice)
	s.utf8Cases(alice)
	s.batchCases(alice)
	s.injectionCases(alice)
	s.secretBodies(alice)
	s.check("process", "alive after every case", s.alive(), "/healthz")
	s.scanSecrets()
	s.report()
}

// authCases: every endpoint, every way around the credentials.
func (s *suite) authCases(alice map[string]string, owned string) {
	forgedNone := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"alice","iss":"e2a-pipeline","exp":9999999999}`)) + "."
	forgedHS := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"svc","iss":"e2a-pipeline","exp":9999999999,"scope":"agents"}`)) + "." +
		base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	attempts := []struct {
		name  string
		hdr   map[string]string
		query string
		want  []int
	}{
		{"no credentials", nil, "", []int{401}},
		{"wrong API key", map[string]string{"X-Api-Key": "ak_wrong_0000000000000000000000"}, "", []int{401}},
		{"API key of a disabled principal", map[string]string{"X-Api-Key": keyMallory}, "", []int{401, 403}},
		{"wrong bearer token", map[string]string{"Authorization": "Bearer bt_wrong_000000000000000000"}, "", []int{401}},
		{"empty bearer", map[string]string{"Authorization": "Bearer "}, "", []int{401}},
		{"API key sent as a bearer token", map[string]string{"Authorization": "Bearer " + keyAlice}, "", []int{401}},
		{"Basic with the API key", map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+keyAlice))}, "", []int{401}},
		{"API key in the query string", nil, "api_key=" + url.QueryEscape(keyAlice), []int{401}},
		{"JWT alg none", map[string]string{"Authorization": "Bearer " + forgedNone}, "", []int{401}},
		{"JWT signed with another key", map[string]string{"Authorization": "Bearer " + forgedHS}, "", []int{401}},
		{"valid key plus a wrong bearer", map[string]string{"X-Api-Key": keyAlice, "Authorization": "Bearer bt_wrong_000000000000000000"}, "", []int{400, 401}},
	}
	for _, ep := range endpoints() {
		before := s.requestsStored()
		for i, a := range attempts {
			path := ep.path
			if a.query != "" {
				path += "?" + a.query
			}
			r := s.do(http.MethodPost, path, ep.body(fmt.Sprintf("auth-%s-%d", strings.Trim(ep.path, "/v1"), i)), a.hdr)
			ok := r.err == nil && contains(a.want, r.status)
			if r.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				ok = false
			}
			s.check("auth", ep.name+": "+a.name, ok, "want %v with a challenge: %s", a.want, r)
		}
		after := s.requestsStored()
		s.check("auth", ep.name+": nothing published by refused attempts", after == before, "E2A_REQUESTS %d → %d", before, after)
		// Positive control: the valid credential works, so the refusals above mean something.
		r := s.do(http.MethodPost, ep.path, ep.body("auth-ok-"+strings.ReplaceAll(strings.Trim(ep.path, "/"), "/", "-")), alice)
		s.check("auth", ep.name+": valid API key accepted (control)", r.err == nil && r.status < 300 && !bytes.Contains(r.body, []byte(`"error"`)), "%s", r)
	}
	// OAuth2: the token endpoint itself, then its token.
	r := s.do(http.MethodPost, "/oauth/token", []byte("grant_type=client_credentials&client_id=svc&client_secret=wrong"),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	s.check("auth", "POST /oauth/token with a wrong client secret", r.status == 401 || r.status == 400, "%s", r)
	r = s.do(http.MethodPost, "/oauth/token", []byte("grant_type=password&username=alice&password=x"),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	s.check("auth", "POST /oauth/token with grant_type=password", r.status == 400 || r.status == 401, "%s", r)
	r = s.do(http.MethodPost, "/oauth/token", []byte("grant_type=client_credentials&client_id=svc&client_secret="+oauthSecret),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.Unmarshal(r.body, &tok)
	s.check("auth", "POST /oauth/token issues a token to a valid client (control)", r.status == 200 && tok.AccessToken != "", "%s", r)
	if tok.AccessToken != "" {
		allSecretsExtra = append(allSecretsExtra, tok.AccessToken)
		r = s.do(http.MethodPost, "/v1/requests", []byte(`{"params":{"text":"svc"}}`), map[string]string{"Authorization": "Bearer " + tok.AccessToken})
		s.check("auth", "OAuth2 access token accepted (control)", r.status < 300, "%s", r)
		tampered := tok.AccessToken[:len(tok.AccessToken)-2] + "xx"
		r = s.do(http.MethodPost, "/v1/requests", []byte(`{"params":{"text":"svc"}}`), map[string]string{"Authorization": "Bearer " + tampered})
		s.check("auth", "tampered OAuth2 token", r.status == 401, "%s", r)
	}
	// Reads: the egress endpoints.
	for _, path := range []string{"/v1/requests/" + owned + "/stream", "/v1/requests/" + owned} {
		name := "GET /v1/requests/{id}"
		if strings.HasSuffix(path, "/stream") {
			name += "/stream"
		}
		r := s.do(http.MethodGet, path, nil, map[string]string{"Accept": "text/event-stream"})
		s.check("read", name+" without credentials", r.status == 401, "%s", r)
		r = s.do(http.MethodGet, path, nil, map[string]string{"Accept": "text/event-stream", "X-Api-Key": keyBob})
		s.check("read", name+" as another principal", r.status == 403 || r.status == 404, "%s", r)
	}
	// Public by design: the agent card; it must not carry a secret.
	r = s.do(http.MethodGet, "/.well-known/agent-card.json", nil, nil)
	s.check("auth", "GET /.well-known/agent-card.json is public and names the schemes", r.status == 200 && bytes.Contains(r.body, []byte("securitySchemes")), "%s", r)
	s.extraTexts = append(s.extraTexts, "agent card", string(r.body))
	r = s.do(http.MethodGet, "/metrics", nil, nil)
	s.extraTexts = append(s.extraTexts, "/metrics", string(r.body))
}

var allSecretsExtra []string

// bodyCases: oversized and deeply nested bodies on every POST endpoint.
func (s *suite) bodyCases(alice map[string]string) {
	for _, ep := range endpoints() {
		before := s.requestsStored()
		big := ep.wrap(`"` + strings.Repeat("a", maxBody+1) + `"`)
		r := s.do(http.MethodPost, ep.path, big, alice)
		s.check("body", ep.name+": body over the limit → 413", r.status == 413, "%s", r)
		// Chunked: no Content-Length, 4 MiB.
		req, _ := http.NewRequest(http.MethodPost, s.base+ep.path, io.MultiReader(bytes.NewReader(ep.wrap(`"`)[:len(ep.wrap(`"`))-2]), &repeatReader{b: 'a', n: 4 << 20}))
		req.Header.Set("X-Api-Key", keyAlice)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := s.hc.Do(req)
		st := 0
		if err == nil {
			st = resp.StatusCode
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		s.check("body", ep.name+": 4 MiB chunked body → 413", st == 413 || (err != nil && st == 0 && time.Since(start) < 5*time.Second), "HTTP %d err %v in %v", st, err, time.Since(start).Round(time.Millisecond))
		for _, nest := range []struct {
			name string
			raw  string
		}{
			{"arrays nested 20,000 deep", strings.Repeat("[", 20000) + strings.Repeat("]", 20000)},
			{"objects nested 10,000 deep", strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)},
		} {
			r := s.do(http.MethodPost, ep.path, ep.wrap(nest.raw), alice)
			ok := r.err == nil && r.status < 500 && r.dur < 3*time.Second
			s.check("body", ep.name+": "+nest.name+" in a string field", ok, "want < 500 within 3 s: %s", r)
		}
		whole := []byte(strings.Repeat("[", 30000) + strings.Repeat("]", 30000))
		r = s.do(http.MethodPost, ep.path, whole, alice)
		refused := (r.status >= 400 && r.status < 500) || bytes.Contains(r.body, []byte(`"code":-32700`)) || bytes.Contains(r.body, []byte(`"code":-32600`)) || bytes.Contains(r.body, []byte(`"type":"error"`))
		s.check("body", ep.name+": whole body 30,000 nested arrays refused in the protocol's error shape", r.err == nil && refused && r.status < 500 && r.dur < 3*time.Second, "%s", r)
		after := s.requestsStored()
		s.check("body", ep.name+": no request published by oversized bodies", after-before <= 2, "E2A_REQUESTS %d → %d (the two nested-string cases may be accepted)", before, after)
	}
}

type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n)
	for i := range k {
		p[i] = r.b
	}
	r.n -= k
	return k, nil
}

// slowCases: a client that does not read its stream, a client that
// trickles its body.
func (s *suite) slowCases(alice map[string]string) {
	// A stream of ~48 MB that the client never reads: egress must cut it
	// after its write timeout (1 s here) rather than buffer or block.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		s.t.Fatal(err)
	}
	body := `{"request_id":"sec-slow-reader","params":{"text":"x","frames":3000,"frame_bytes":16000}}`
	fmt.Fprintf(conn, "POST /v1/requests HTTP/1.1\r\nHost: x\r\nX-Api-Key: %s\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", keyAlice, len(body), body)
	time.Sleep(4 * time.Second) // the behaviour: a client that reads nothing for longer than the write timeout
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, rerr := io.Copy(io.Discard, conn)
	conn.Close()
	cut := rerr == nil || !isTimeout(rerr) // EOF or reset: the server closed
	s.check("slow", "stream never read is disconnected after the write timeout", cut && n < 40<<20, "read %d bytes after 4 s, then %v", n, rerr)
	m := s.do(http.MethodGet, "/metrics", nil, nil)
	s.check("slow", "slow client disconnect counted", bytes.Contains(m.body, []byte("e2a_egress_slow_client_disconnects_total{")), "metric e2a_egress_slow_client_disconnects_total")

	// A stream that outlives the read timeout is not cut by it (the read
	// deadline covers reading the request only).
	r := s.do(http.MethodPost, "/v1/requests", []byte(`{"request_id":"sec-long-stream","params":{"text":"x","frames":5,"delay_ms":1000}}`),
		map[string]string{"X-Api-Key": keyAlice, "Accept": "text/event-stream"})
	s.check("slow", fmt.Sprintf("a stream lasting longer than the read timeout (%v) is served to its final frame", readTimeout),
		r.status == 200 && r.dur > readTimeout && bytes.Contains(r.body, []byte(`"is_final":true`)), "%s", r)

	// A body trickled one byte per 250 ms.
	conn, err = net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		s.t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/requests HTTP/1.1\r\nHost: x\r\nX-Api-Key: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", keyAlice)
	start := time.Now()
	closed := false
	for time.Since(start) < readTimeout+2*time.Second {
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write([]byte(" ")); err != nil {
			closed = true
			break
		}
		_ = conn.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
		buf := make([]byte, 512)
		if n, err := conn.Read(buf); n > 0 || (err != nil && !isTimeout(err)) {
			closed = true
			break
		}
	}
	conn.Close()
	s.check("slow", fmt.Sprintf("body trickled 1 B per 250 ms is cut by the read timeout (%v)", readTimeout), closed,
		"closed %v after %v", closed, time.Since(start).Round(time.Millisecond))
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// utf8Cases: invalid UTF-8 in text, ids and pool names.
func (s *suite) utf8Cases(alice map[string]string) {
	for _, ep := range endpoints() {
		r := s.do(http.MethodPost, ep.path, ep.wrap("\"a\xffb\xc3\x28c\xed\xa0\x80\""), alice)
		s.check("utf8", ep.name+": invalid UTF-8 in the text", r.err == nil && r.status < 500, "want 4xx or accepted with valid UTF-8 stored: %s", r)
	}
	r := s.do(http.MethodPost, "/v1/requests", []byte("{\"request_id\":\"id-\xff\xfe\",\"params\":{\"text\":\"x\"}}"), alice)
	s.check("utf8", "POST /v1/requests: invalid UTF-8 in request_id", r.err == nil && r.status < 500, "%s", r)
	r = s.do(http.MethodPost, "/v1/requests?agent=%FF%FE", []byte(`{"params":{"text":"x"}}`), alice)
	s.check("utf8", "POST /v1/requests: invalid UTF-8 in ?agent=", r.status == 400, "%s", r)
	r = s.do(http.MethodGet, "/v1/requests/%FF%FE/stream", nil, alice)
	s.check("utf8", "GET /v1/requests/%FF%FE/stream", r.err == nil && r.status < 500, "%s", r)
	r = s.do(http.MethodPost, "/v1/requests", []byte(`{"params":{"text":"x"}}`), map[string]string{"X-Api-Key": keyAlice, "traceparent": "00-\xff\xfe-01"})
	s.check("utf8", "POST /v1/requests: invalid UTF-8 in traceparent", r.err == nil && r.status < 500, "%s", r)
}

// batchCases: JSON-RPC batch abuse on /a2a and /acp.
func (s *suite) batchCases(alice map[string]string) {
	send := func(i int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"kind":"message","messageId":"b%d","role":"user","parts":[{"kind":"text","text":"b"}]}}}`, i, i)
	}
	stream := func(i int) string { return strings.Replace(send(i), "message/send", "message/stream", 1) }
	prompt := func(i int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"bs%d","prompt":[{"type":"text","text":"b"}]}}`, i, i)
	}
	batch := func(n int, f func(int) string) []byte {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return []byte("[" + strings.Join(parts, ",") + "]")
	}
	for _, ep := range []struct {
		name, path string
		elem       func(int) string
		streaming  func(int) string
	}{{"/a2a", "/a2a", send, stream}, {"/acp", "/acp", prompt, nil}} {
		before := s.requestsStored()
		r := s.do(http.MethodPost, ep.path, batch(101, ep.elem), alice)
		s.check("batch", ep.name+": batch of 101 refused", r.status >= 400 || bytes.Contains(r.body, []byte("-32600")), "%s", r)
		r = s.do(http.MethodPost, ep.path, []byte(`[]`), alice)
		s.check("batch", ep.name+": empty batch → -32600", bytes.Contains(r.body, []byte("-32600")), "%s", r)
		r = s.do(http.MethodPost, ep.path, batch(20000, func(int) string { return "1" }), alice)
		s.check("batch", ep.name+": 20,000 junk elements refused fast", r.err == nil && r.status < 500 && r.dur < 2*time.Second && bytes.Contains(r.body, []byte("-32600")), "%s", r)
		r = s.do(http.MethodPost, ep.path, batch(50, func(i int) string { return "[" + ep.elem(i) + "]" }), alice)
		s.check("batch", ep.name+": nested batches are invalid requests", r.err == nil && r.status < 500 && !bytes.Contains(r.body, []byte(`"result"`)), "%s", r)
		if ep.streaming != nil {
			r = s.do(http.MethodPost, ep.path, batch(100, ep.streaming), alice)
			s.check("batch", ep.name+": 100 streaming calls in a batch are refused", r.err == nil && r.status < 500 && !bytes.Contains(r.body, []byte(`"result"`)), "%s", r)
		}
		after := s.requestsStored()
		s.check("batch", ep.name+": refused batches published nothing", after == before, "E2A_REQUESTS %d → %d", before, after)
		r = s.do(http.MethodPost, ep.path, batch(10, ep.elem), alice)
		s.check("batch", ep.name+": batch of 10 answered in bounded time", r.err == nil && r.status == 200 && r.dur < 15*time.Second, "%s", r)
	}
	// carol and bob may make 10 requests a minute. Control: carol's 11th
	// single request is refused.
	var last response
	for range 11 {
		last = s.do(http.MethodPost, "/v1/requests", []byte(`{"params":{"text":"rl"}}`), map[string]string{"X-Api-Key": keyCarol})
	}
	s.check("batch", "rate limit: the 11th single request in a minute → 429 (control)", last.status == 429, "%s", last)
	// A batch must not multiply the limit.
	before := s.requestsStored()
	r := s.do(http.MethodPost, "/a2a", batch(30, send), map[string]string{"X-Api-Key": keyBob})
	after := s.requestsStored()
	s.check("batch", "rate limit holds across a batch of 30 message/send", after-before <= 10, "limit 10/min, %d requests published (%s)", after-before, r)
}

// injectionCases: ids and pool names that would be subject tokens.
func (s *suite) injectionCases(alice map[string]string) {
	hostile := []string{"a.b", "*", ">", "a b", "a\tb", "e2a.req.sec.x", "foo.>", "..", ".", "$JS.API.STREAM.DELETE.E2A_REQUESTS",
		"ünïcødé", "id\x00nul", "a/../b", strings.Repeat("x", 10000), "%2A"}
	for _, id := range hostile {
		b, _ := json.Marshal(map[string]any{"request_id": id, "params": map[string]any{"text": "inj"}})
		r := s.do(http.MethodPost, "/v1/requests?wait=true", b, alice)
		label := id
		if len(label) > 24 {
			label = label[:24] + "…"
		}
		ok := r.err == nil && r.status < 500
		if r.status == 200 {
			// Accepted: its frames must be its own.
			var agg struct {
				Frames []struct {
					RequestID string `json:"request_id"`
				} `json:"frames"`
			}
			_ = json.Unmarshal(r.body, &agg)
			for _, f := range agg.Frames {
				if f.RequestID != id {
					ok = false
				}
			}
		}
		s.check("inject", fmt.Sprintf("request_id %q", label), ok, "%s", r)
	}
	for _, p := range []string{"sec.x", "*", ">", "sec x", "sec%00", "sec\u00e9", strings.Repeat("p", 100)} {
		r := s.do(http.MethodPost, "/v1/requests?agent="+url.QueryEscape(p), []byte(`{"params":{"text":"inj"}}`), alice)
		s.check("inject", fmt.Sprintf("?agent=%q refused", p), r.status == 400, "%s", r)
	}
	// Wildcard ids on the read side must not read other requests.
	for _, id := range []string{"*", ">", "sec-owned-1.>", "%2A", "sec-owned-*"} {
		r := s.do(http.MethodGet, "/v1/requests/"+id+"?wait=false", nil, alice)
		leaked := bytes.Contains(r.body, []byte(`"sec-owned-1"`))
		s.check("inject", fmt.Sprintf("GET /v1/requests/%s reads no other request", id), r.err == nil && r.status < 500 && !leaked, "%s", r)
	}
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/resubscribe"} {
		for _, id := range []string{"*", ">", "a.b", "..", "e2a.req.>"} {
			b := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":%q,"params":{"id":%q}}`, m, id)
			r := s.do(http.MethodPost, "/a2a", b, alice)
			s.check("inject", fmt.Sprintf("/a2a %s id %q", m, id), r.err == nil && r.status < 500 && !bytes.Contains(r.body, []byte("sec-owned-1")), "%s", r)
		}
	}
	// Every stored subject is e2a.req.<pool>.<one token>.
	bad := 0
	var first string
	s.eachMessage(streams.RequestsStream, func(subj string, _ nats.Header, _ []byte) {
		toks := strings.Split(subj, ".")
		if len(toks) != 4 || toks[0] != "e2a" || toks[1] != "req" {
			if bad == 0 {
				first = subj
			}
			bad++
			return
		}
		if _, _, err := subjects.ParseRequest(subj); err != nil {
			bad++
		}
	})
	s.check("inject", "every E2A_REQUESTS subject is e2a.req.<pool>.<id token>", bad == 0, "%d bad, first %q", bad, first)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range []string{streams.RequestsStream, streams.ResponsesStream, streams.ControlStream} {
		_, err := s.js.Stream(ctx, name)
		s.check("inject", name+" still exists", err == nil, "%v", err)
	}
}

// secretBodies sends secrets inside request bodies, as clients do, for the
// final scan.
func (s *suite) secretBodies(alice map[string]string) {
	bodies := []struct{ name, path, body string }{
		{"E2A auth block", "/v1/requests?wait=true", fmt.Sprintf(`{"request_id":"sec-secret-1","params":{"text":"s","password":%q},"auth":{"bearer_token":%q,"api_key_ref":"ref","extra_headers":{"X-Upstream-Key":%q}}}`, bodyParamsPass, bodyBearer, bodyExtra)},
	}
	// A push config inline: this pipeline has no push store, so the message
	// is refused (PushNotificationNotSupported) before anything is
	// published; the scan below finds the token nowhere.
	r0 := s.do(http.MethodPost, "/a2a", fmt.Appendf(nil, `{"jsonrpc":"2.0","id":9,"method":"message/send","params":{"message":{"kind":"message","messageId":"sm1","role":"user","parts":[{"kind":"text","text":"s"}]},"configuration":{"pushNotificationConfig":{"url":"https://hook.example/x","token":%q,"authentication":{"schemes":["Bearer"],"credentials":%q}}}}}`, bodyPushToken, bodyBearer), alice)
	s.check("secrets", "A2A message with a push notification token refused without a push store", r0.err == nil && bytes.Contains(r0.body, []byte(`"code":-32003`)), "%s", r0)
	// ACP: a session whose MCP server carries a secret, then a prompt with
	// one in _meta.
	r := s.do(http.MethodPost, "/acp", fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[{"name":"m","command":"mcp","args":[],"env":[{"name":"API_KEY","value":%q}]}]}}`, bodyMCPEnv), alice)
	var sess struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	_ = json.Unmarshal(r.body, &sess)
	s.check("secrets", "ACP session/new with an MCP server env secret accepted", sess.Result.SessionID != "", "%s", r)
	if sess.Result.SessionID != "" {
		bodies = append(bodies, struct{ name, path, body string }{"ACP prompt _meta authorization", "/acp",
			fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"s"}],"_meta":{"authorization":"Bearer %s","e2a_params":{"api_key":%q}}}}`, sess.Result.SessionID, bodyBearer, bodyBearer)})
	}
	for _, b := range bodies {
		r := s.do(http.MethodPost, b.path, []byte(b.body), alice)
		s.check("secrets", "request carrying secrets accepted: "+b.name, r.err == nil && r.status < 300 && !bytes.Contains(r.body, []byte(`"error"`)), "%s", r)
	}
	// A canary that is no secret and must be found: proof that the scan
	// below reads what is stored.
	r = s.do(http.MethodPost, "/v1/requests?wait=true", []byte(`{"params":{"text":"`+scanCanary+`"}}`), alice)
	s.check("secrets", "canary request accepted", r.status == 200, "%s", r)
	// The credential headers themselves travel on every request above.
	r = s.do(http.MethodPost, "/v1/requests?wait=true", []byte(`{"params":{"text":"hdr"}}`), map[string]string{"Authorization": "Bearer " + bearerCI, "Cookie": "session=" + bodyBearer})
	s.check("secrets", "request with bearer and cookie headers accepted", r.status < 300, "%s", r)
}

// eachMessage calls fn with every message of stream.
func (s *suite) eachMessage(stream string, fn func(subj string, h nats.Header, data []byte)) {
	natstest.EachMessage(s.t, s.js, stream, func(m *jetstream.RawStreamMsg) { fn(m.Subject, m.Header, m.Data) })
}

// scanSecrets looks for every secret in every message of every stream (KV
// buckets included), in the logs, /metrics and the agent card.
func (s *suite) scanSecrets() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var names []string
	for n := range s.js.StreamNames(ctx).Name() {
		names = append(names, n)
	}
	sort.Strings(names)
	secrets := append(append([]string(nil), allSecrets...), allSecretsExtra...)
	needles := map[string]string{}
	for _, sec := range secrets {
		needles[sec] = sec
		needles[base64.StdEncoding.EncodeToString([]byte(sec))] = sec + " (base64)"
		needles[base64.RawURLEncoding.EncodeToString([]byte(sec))] = sec + " (base64url)"
	}
	total, invalidUTF8 := 0, 0
	found := map[string][]string{}
	for _, name := range names {
		s.eachMessage(name, func(subj string, h nats.Header, data []byte) {
			total++
			if name == streams.RequestsStream && !utf8.Valid(data) {
				invalidUTF8++
			}
			var hb bytes.Buffer
			_ = http.Header(h).Write(&hb)
			for n, what := range needles {
				if bytes.Contains(data, []byte(n)) || bytes.Contains(hb.Bytes(), []byte(n)) || strings.Contains(subj, n) {
					found[what] = append(found[what], name+" "+subj)
				}
			}
		})
	}
	texts := append([]string{"logs", s.logs.String()}, s.extraTexts...)
	for i := 0; i+1 < len(texts); i += 2 {
		for n, what := range needles {
			if strings.Contains(texts[i+1], n) {
				found[what] = append(found[what], texts[i])
			}
		}
	}
	for _, sec := range secrets {
		var where []string
		for what, w := range found {
			if strings.HasPrefix(what, sec) {
				where = append(where, w...)
			}
		}
		label := sec
		if len(label) > 16 {
			label = label[:16] + "…"
		}
		s.check("secrets", fmt.Sprintf("secret %s in no stored message, log line or page", label), len(where) == 0, "found in %v", firstN(where, 5))
	}
	canaries := 0
	for _, name := range names {
		s.eachMessage(name, func(_ string, _ nats.Header, data []byte) {
			if bytes.Contains(data, []byte(scanCanary)) {
				canaries++
			}
		})
	}
	s.check("secrets", fmt.Sprintf("scanned %d messages of %d streams/buckets; the canary was found %d times", total, len(names), canaries), total > 0 && canaries > 0, "streams %v", names)
	s.check("utf8", "every stored request envelope is valid UTF-8", invalidUTF8 == 0, "%d invalid", invalidUTF8)
}

func firstN(s []string, n int) []string { return s[:min(len(s), n)] }

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// report prints every case and fails the test for unexpected failures.
func (s *suite) report() {
	var b strings.Builder
	pass, fail, known := 0, 0, 0
	var unexpected []string
	for _, r := range s.results {
		mark := "PASS "
		switch {
		case r.ok:
			pass++
			if _, ok := knownFindings[r.name]; ok {
				mark = "FIXED" // a known finding that no longer reproduces
			}
		case knownFindings[r.name] != "":
			known++
			mark = "KNOWN"
		default:
			fail++
			mark = "FAIL "
			unexpected = append(unexpected, r.name)
		}
		fmt.Fprintf(&b, "%s %s", mark, r.name)
		if !r.ok || testing.Verbose() {
			fmt.Fprintf(&b, " — %s", r.detail)
		}
		if mark == "KNOWN" {
			fmt.Fprintf(&b, " [known: %s]", knownFindings[r.name])
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "security suite: %d cases, %d passed, %d known findings, %d failures\n", len(s.results), pass, known, fail)
	s.t.Log("\n" + b.String())
	for _, name := range unexpected {
		s.t.Errorf("failed: %s", name)
	}
}
