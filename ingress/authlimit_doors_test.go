package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/tenant"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// Failed credentials throttled per client address at every door
// (authlimit.go): after authLimitMax refused credentials from one address,
// the next is 429 with Retry-After in the door's own error shape, the
// credential unchecked (a correct one is refused too), until the window
// passes; then a correct one works at once.

const (
	authLimitMax = 3
	wrongDoorKey = "ak_wrong_doors_0123456789abcdef"
)

// authClock is a clock the test moves (WithAuthClock): the doors run over
// a real pipeline, outside a synctest bubble.
type authClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *authClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *authClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// limitedAuth is alice's API key auth under a failure limiter of
// authLimitMax a minute, trusting the proxies given, its metrics on reg.
func limitedAuth(t *testing.T, clock *authClock, reg prometheus.Registerer, proxies ...string) *ingress.Auth {
	t.Helper()
	trusted, err := ingress.ParseTrustedProxies(proxies)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ingress.DefaultAuthLimitConfig()
	cfg.MaxFailures, cfg.TrustedProxies = authLimitMax, trusted
	a, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{{Principal: "alice", Secret: aliceDoorKey}}},
		ingress.WithAuthLimit(cfg), ingress.WithAuthClock(clock.Now), ingress.WithAuthRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// door is one front door: call sends one request with key from the client
// address addr (X-Forwarded-For, the test's peer a trusted proxy) and
// returns the answer's status (HTTP, or gRPC's mapped by the test), its
// Retry-After in seconds and what identifies its error shape.
type door struct {
	name string
	call func(t *testing.T, key, addr string) (status int, retryAfter int, shape string)
}

func httpDoor(name, method, path, body string, shape func(b []byte) string) func(p *pipetest.Pipeline) door {
	return func(p *pipetest.Pipeline) door {
		return door{name, func(t *testing.T, key, addr string) (int, int, string) {
			resp, b := testkit.Do(t, method, p.URL+path, body, "Content-Type", "application/json",
				"X-Api-Key", key, "X-Forwarded-For", "198.51.100.9, "+addr)
			ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			return resp.StatusCode, ra, shape(b)
		}}
	}
}

// e2aCode is the code of an E2A error body; rpcCode a JSON-RPC error's.
func e2aCode(b []byte) string {
	var v struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &v)
	return v.Error.Code
}

func rpcCode(b []byte) string {
	var v struct {
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &v)
	return strconv.Itoa(v.Error.Code)
}

func restStatus(b []byte) string {
	var v struct {
		Error struct {
			Status string `json:"status"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &v)
	return v.Error.Status
}

func grpcDoor(p *pipetest.Pipeline) door {
	return door{"a2a v1.0 gRPC", func(t *testing.T, key, addr string) (int, int, string) {
		c, _ := grpcProtoClient(t, p.GRPCAddr)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", key, "x-forwarded-for", addr)
		_, err := c.SendMessage(ctx, grpcProtoMsg("m-limit-"+addr+key[:9], "hi"))
		st, _ := status.FromError(err)
		code := map[codes.Code]int{codes.OK: 200, codes.Unauthenticated: 401, codes.ResourceExhausted: 429}[st.Code()]
		return code, int(retryDelay(st) / time.Second), st.Code().String()
	}}
}

// TestAuthLimitDoors: every door shares the one limiter of the Auth: each
// door, from its own client address (the peer, loopback, is a trusted
// proxy), answers authLimitMax wrong keys 401, then the next attempt, a
// correct key included, 429 with Retry-After in its own shape (E2A's
// rate_limit_exceeded, JSON-RPC -32029, A2A v1.0 REST RESOURCE_EXHAUSTED,
// gRPC RESOURCE_EXHAUSTED with a RetryInfo), and the correct key works at
// once when the window has passed. Before the limiter every attempt was
// checked, at any rate.
func TestAuthLimitDoors(t *testing.T) {
	clock := &authClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	a := limitedAuth(t, clock, reg, "127.0.0.0/8", "::1")
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithAuth(a),
		ingress.WithWorkflow(workflow.New(workflow.Options{}))),
		// egress's reads authenticated as e2a serve does (cmd/e2a's egressAuthorizer).
		pipetest.WithEgress(egress.WithAuthorizer(func(r *http.Request) (tenant.Principal, error) {
			pr, err := a.Tenant(r)
			ingress.StripCredentialHeaders(r.Header)
			return pr, err
		})))
	p.Pool("demo", demo.New(), agent.WithMetrics(p.Registry))
	v03 := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m-%d","parts":[{"kind":"text","text":"x"}]}}}`
	rpc := strconv.Itoa(jsonrpc.CodeRateLimited)
	doors := []struct {
		door       func(*pipetest.Pipeline) door
		throttled  string // the shape of the 429
		okStatuses []int  // what the correct key gets once the window passed
	}{
		{httpDoor("e2a", "POST", "/v1/requests?agent=demo", `{"params":{"text":"x"}}`, e2aCode), "rate_limit_exceeded", []int{202}},
		{httpDoor("e2a read", "GET", "/v1/requests/req-unknown-1", "", e2aCode), "rate_limit_exceeded", []int{404}},
		{httpDoor("a2a v0.3", "POST", "/a2a?agent=demo", strings.Replace(v03, "%d", "1", 1), rpcCode), rpc, []int{200}},
		{httpDoor("agentvault", "POST", "/a2a?agent=demo", `{"jsonrpc":"2.0","method":"tasks/send","id":"r1","params":{"message":{"role":"user","parts":[{"type":"text","content":"x"}]}}}`, rpcCode), rpc, []int{200}},
		{httpDoor("a2a v1.0 JSON-RPC", "POST", "/a2a/v1?agent=demo", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m-v1","parts":[{"text":"x"}]}}}`, rpcCode), rpc, []int{200}},
		{httpDoor("a2a v1.0 REST", "POST", "/a2a/v1/message:send?agent=demo", `{"message":{"role":"ROLE_USER","parts":[{"text":"x"}],"messageId":"m-rest"}}`, restStatus), "RESOURCE_EXHAUSTED", []int{200}},
		{httpDoor("acp", "POST", "/acp", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`, rpcCode), rpc, []int{200}},
		{grpcDoor, "ResourceExhausted", []int{200}},
	}
	for i, d := range doors {
		dr := d.door(p)
		addr := "203.0.113." + strconv.Itoa(i+1)
		for n := range authLimitMax {
			if st, _, shape := dr.call(t, wrongDoorKey, addr); st != 401 {
				t.Fatalf("%s: wrong key %d: %d %s, want 401", dr.name, n+1, st, shape)
			}
		}
		for _, key := range []string{wrongDoorKey, aliceDoorKey} {
			st, ra, shape := dr.call(t, key, addr)
			if st != 429 || ra < 1 || ra > 60 || shape != d.throttled {
				t.Errorf("%s: after %d wrong keys, key %.8s…: %d, Retry-After %d, shape %q; want 429, 1..60, %q",
					dr.name, authLimitMax, key, st, ra, shape, d.throttled)
			}
		}
		// Another address is not throttled.
		if st, _, shape := dr.call(t, aliceDoorKey, "203.0.113.200"); !containsInt(d.okStatuses, st) {
			t.Errorf("%s: correct key from another address: %d %s", dr.name, st, shape)
		}
		clock.Add(time.Minute)
		if st, _, shape := dr.call(t, aliceDoorKey, addr); !containsInt(d.okStatuses, st) {
			t.Errorf("%s: correct key once the window passed: %d %s, want %v", dr.name, st, shape, d.okStatuses)
		}
	}
	// The workflow API: 429 with Retry-After, retryable, the correct key
	// unchecked (it answered 401, inviting the next guess).
	wf := httpDoor("workflow", "GET", "/api/v1/capabilities", "", e2aCode)(p)
	for range authLimitMax {
		_, _, _ = wf.call(t, wrongDoorKey, "203.0.113.100")
	}
	if st, ra, shape := wf.call(t, aliceDoorKey, "203.0.113.100"); st != 429 || ra < 1 {
		t.Errorf("workflow API, correct key after %d wrong ones: %d %s, Retry-After %d; want 429 with Retry-After", authLimitMax, st, shape, ra)
	}
	if got, want := counterValue(t, reg, "e2a_ingress_auth_limit_failures_total"), float64(authLimitMax*(len(doors)+1)); got != want {
		t.Errorf("failures counted %v, want %v", got, want)
	}
	if got, want := counterValue(t, reg, "e2a_ingress_auth_throttled_total"), float64(2*len(doors)+1); got != want {
		t.Errorf("throttled answers counted %v, want %v", got, want)
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// counterValue is the value of the unlabelled counter name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	series := testkit.Series(t, reg, name)
	if len(series) != 1 {
		t.Fatalf("%s: %d series, want 1 (registered, unlabelled)", name, len(series))
	}
	return series[0].Value
}

// TestAuthLimitForgedForwardedFor: with no trusted proxy, an
// X-Forwarded-For naming another address each time does not move the
// count: the peer's own address is throttled after authLimitMax wrong keys.
func TestAuthLimitForgedForwardedFor(t *testing.T) {
	clock := &authClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := limitedAuth(t, clock, prometheus.NewRegistry())
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(a)))
	e2a := httpDoor("e2a", "POST", "/v1/requests?agent=demo", `{"params":{"text":"x"}}`, e2aCode)(p)
	for n := range authLimitMax {
		if st, _, shape := e2a.call(t, wrongDoorKey, "192.0.2."+strconv.Itoa(n+1)); st != 401 {
			t.Fatalf("wrong key %d: %d %s", n+1, st, shape)
		}
	}
	if st, ra, shape := e2a.call(t, wrongDoorKey, "192.0.2.99"); st != 429 || ra < 1 {
		t.Errorf("a forged X-Forwarded-For from an untrusted peer: %d %s Retry-After %d; want 429, the peer's count", st, shape, ra)
	}
}

// TestAuthLimitConsoleLogin: the console's POST /console/api/login goes
// through the same Auth (as e2a dev wires it, one Auth for every door) and
// the same client address rule: after authLimitMax wrong keys the login is
// 429 with Retry-After, a correct key included, and the X-Forwarded-For of
// the trusted peer names the client.
func TestAuthLimitConsoleLogin(t *testing.T) {
	clock := &authClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := limitedAuth(t, clock, prometheus.NewRegistry(), "127.0.0.1/32")
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(a)))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	con, err := console.New(ctx, p.NC, nil, console.WithAuth(func(r *http.Request) (tenant.Principal, int, error) {
		pr, err := a.Tenant(r)
		if err != nil {
			return tenant.Principal{}, ingress.AuthStatus(err), err
		}
		return pr, 0, nil
	}), console.WithChallenge(a.SetChallenge))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	mux := http.NewServeMux()
	con.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	login := func(key, addr string) (*http.Response, []byte) {
		return testkit.Do(t, "POST", srv.URL+"/console/api/login", `{"scheme":"apiKey","secret":"`+key+`"}`,
			"Content-Type", "application/json", "X-E2A-Console", "1", "X-Forwarded-For", addr)
	}
	for n := range authLimitMax {
		if resp, b := login(wrongDoorKey, "203.0.113.7"); resp.StatusCode != 401 {
			t.Fatalf("login with a wrong key %d: %d %s", n+1, resp.StatusCode, b)
		}
	}
	if resp, b := login(aliceDoorKey, "203.0.113.7"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("login with the correct key after %d wrong ones: %d Retry-After %q %s; want 429 with Retry-After",
			authLimitMax, resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if resp, b := login(aliceDoorKey, "203.0.113.8"); resp.StatusCode != 200 {
		t.Errorf("login from another client behind the proxy: %d %s", resp.StatusCode, b)
	}
	// Any other console call with a credential from the throttled address:
	// 429 with Retry-After too, in the console's error shape.
	resp, b := testkit.Do(t, "GET", srv.URL+"/console/api/requests", "", "X-API-Key", aliceDoorKey, "X-Forwarded-For", "203.0.113.7")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "rate_limit_exceeded") ||
		!strings.Contains(string(b), `"retryable":true`) {
		t.Errorf("a console call from the throttled address: %d Retry-After %q %s; want 429 rate_limit_exceeded, retryable, with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	clock.Add(time.Minute)
	if resp, b := login(aliceDoorKey, "203.0.113.7"); resp.StatusCode != 200 {
		t.Errorf("login once the window passed: %d %s", resp.StatusCode, b)
	}
}
