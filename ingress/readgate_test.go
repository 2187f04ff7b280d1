package ingress_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// The read API (egress's GET /v1/requests/{id} and its stream) behind
// ingress's gate (egress.ReadGate, installed by ingress.New): the rate
// limit, the stream slots, the challenge of a 401.

const keyAliceGated = "ak_gated_alice_00123456789abcdef"

// gatedFront serves ingress and egress as cmd/e2a wires them with
// authentication on: egress's read API behind the same API keys
// (egress.WithAuthorizer over ingress.Auth.Tenant, as egressAuthorizer),
// with iopts added to ingress. No agent runs: an accepted request stays
// without frames, so its streams stay open.
func gatedFront(t *testing.T, iopts ...ingress.Option) string {
	t.Helper()
	_, nc := natstest.RunServer(t)
	return authFront(t, nc, pipetest.KeyAuth(t, map[string]string{"alice": keyAliceGated}, nil), iopts...)
}

// authFront serves ingress and egress on nc as cmd/e2a wires them with
// authentication a: egress's read API behind the same Auth.
func authFront(t *testing.T, nc *nats.Conn, a *ingress.Auth, iopts ...ingress.Option) string {
	t.Helper()
	return authFrontWrapped(t, nc, a, nil, iopts...)
}

// readAuthorizer is the authorizer of egress's read API
// (egress.WithAuthorizer).
type readAuthorizer = func(*http.Request) (tenant.Principal, error)

// authFrontWrapped is authFront with egress's authorizer (a.Tenant, then
// the credential headers stripped, as cmd/e2a's egressAuthorizer) wrapped
// by wrap (nil: as it is).
func authFrontWrapped(t *testing.T, nc *nats.Conn, a *ingress.Auth, wrap func(readAuthorizer) readAuthorizer, iopts ...ingress.Option) string {
	t.Helper()
	authorize := readAuthorizer(func(r *http.Request) (tenant.Principal, error) {
		p, err := a.Tenant(r)
		ingress.StripCredentialHeaders(r.Header)
		return p, err
	})
	if wrap != nil {
		authorize = wrap(authorize)
	}
	eopts := []egress.Option{egress.WithRegisterer(prometheus.NewRegistry()), egress.WithAuthorizer(authorize)}
	iopts = append([]ingress.Option{ingress.WithRegisterer(prometheus.NewRegistry()), ingress.WithAuth(a)}, iopts...)
	return pipetest.ServeFront(t, nc, eopts, iopts...).URL
}

// TestE2AReadStreamAndWaitTakeAStreamSlot: E2A_MAX_STREAMS_PER_PRINCIPAL
// bounds "every streamed answer ... an E2A stream or wait" (ingress/AUTH.md,
// docs/configuration.md), as A2A's tasks/resubscribe and SubscribeToTask
// take a slot: GET /v1/requests/{id}/stream, E2A's way to resume a stream,
// and GET /v1/requests/{id}?wait=true take one too. With a bound of 1 held
// by a streamed POST, each is refused 429 at once (else one principal would
// open as many read streams as it likes, each holding a connection, a live
// subscription and goroutines for up to the 5 min first-frame wait).
func TestE2AReadStreamAndWaitTakeAStreamSlot(t *testing.T) {
	url := gatedFront(t, ingress.WithStreamLimiter(ingress.NewStreamLimiter(1)))
	resp, b := do(t, "POST", url+"/v1/requests", `{"request_id":"slot-1","params":{"text":"hi"}}`, "X-Api-Key", keyAliceGated)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	// Alice's one slot: a streamed POST of another request (no agent
	// answers, so it stays open).
	held := testkit.Open(t, "POST", url+"/v1/requests", `{"request_id":"slot-2","params":{"text":"hi"}}`,
		"X-Api-Key", keyAliceGated, "Accept", "text/event-stream")
	if held.StatusCode != http.StatusOK {
		t.Fatalf("streamed POST: %d", held.StatusCode)
	}
	resp, b = do(t, "POST", url+"/v1/requests", `{"request_id":"slot-3","params":{"text":"hi"}}`,
		"X-Api-Key", keyAliceGated, "Accept", "text/event-stream")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second streamed POST with the slot held: %d %s (the limiter is not on)", resp.StatusCode, b)
	}
	var codes []int
	for i := 0; i < 3; i++ {
		r := testkit.Open(t, "GET", url+"/v1/requests/slot-1/stream", "", "X-Api-Key", keyAliceGated, "Accept", "text/event-stream")
		codes = append(codes, r.StatusCode)
	}
	for _, c := range codes {
		if c != http.StatusTooManyRequests {
			t.Errorf("GET /v1/requests/{id}/stream x3 while alice holds her one stream slot: statuses %v, all open at once; "+
				"want 429 too_many_streams: every streamed E2A answer (\"an E2A stream or wait\", ingress/AUTH.md) takes one of "+
				"the principal's E2A_MAX_STREAMS_PER_PRINCIPAL slots, as A2A's tasks/resubscribe does", codes)
			break
		}
	}
	// The wait (GET ?wait=true) is a streamed answer too: refused at once,
	// not left waiting for a final frame that no agent will write.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/requests/slot-1?wait=true", nil)
	req.Header.Set("X-Api-Key", keyAliceGated)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("GET ?wait=true while alice holds her one stream slot: no answer in 5 s (%v): it waits, holding no slot; want 429 too_many_streams", err)
		return
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("GET ?wait=true while alice holds her one stream slot: status %d; want 429 too_many_streams", r.StatusCode)
	}
}

// TestE2AReadsCountAgainstTheRateLimit: with E2A_RATE_LIMIT_* set,
// "every endpoint, the workflow API included, counts against the one
// limiter" (ingress/AUTH.md, Rate limits): E2A's read API (GET
// /v1/requests/{id}, GET /v1/requests/{id}/stream) too, else a principal
// over its limit, whose POSTs are refused, would still poll and open
// streams without end, each read a JetStream lookup (and a History lookup
// for an unknown id).
func TestE2AReadsCountAgainstTheRateLimit(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(context.Background(), streams.RateLimitBucket)
	if err != nil {
		t.Fatal(err)
	}
	a := pipetest.KeyAuth(t, map[string]string{"alice": keyAliceGated}, nil)
	eopts := []egress.Option{egress.WithRegisterer(prometheus.NewRegistry()),
		egress.WithAuthorizer(func(r *http.Request) (tenant.Principal, error) {
			p, err := a.Tenant(r)
			ingress.StripCredentialHeaders(r.Header)
			return p, err
		})}
	url := pipetest.ServeFront(t, nc, eopts, ingress.WithRegisterer(prometheus.NewRegistry()), ingress.WithAuth(a),
		ingress.WithLimiter(ingress.NewLimiter(kv, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 3}}, ingress.WithLimiterClock(testkit.MidMinute())))).URL
	resp, b := do(t, "POST", url+"/v1/requests", `{"request_id":"rl-1","params":{"text":"hi"}}`, "X-Api-Key", keyAliceGated)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	var codes []int
	for i := 0; i < 5; i++ {
		resp, _ := do(t, "GET", url+"/v1/requests/rl-1", "", "X-Api-Key", keyAliceGated)
		codes = append(codes, resp.StatusCode)
	}
	// The limit is spent: a POST is refused now.
	resp, b = do(t, "POST", url+"/v1/requests", `{"request_id":"rl-2","params":{"text":"hi"}}`, "X-Api-Key", keyAliceGated)
	postCode := resp.StatusCode
	for i := 0; i < 3; i++ {
		resp, _ := do(t, "GET", url+"/v1/requests/rl-1", "", "X-Api-Key", keyAliceGated)
		codes = append(codes, resp.StatusCode)
	}
	refused := 0
	for _, c := range codes {
		if c == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("1 POST then 8 GET /v1/requests/{id} under a limit of 3 per minute: GET statuses %v (a POST after them: %d), none 429; "+
			"want the reads counted against the principal's rate limit like every endpoint (429 rate_limit_exceeded past it)", codes, postCode)
	}
}

// TestE2AReadRefusalChallenges: a 401 carries a WWW-Authenticate
// challenge (RFC 9110 §15.5.2: the server MUST send one), as ingress's
// refusals of POST /v1/requests do (Auth.SetChallenge): egress's read API,
// behind the same credentials, sends the same (ReadGate.Challenge), for a
// client or proxy that reads the challenge to pick its scheme.
func TestE2AReadRefusalChallenges(t *testing.T) {
	url := gatedFront(t)
	resp, b := do(t, "POST", url+"/v1/requests", `{"request_id":"ch-1","params":{"text":"hi"}}`)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("POST without credentials: %d, WWW-Authenticate %q: %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
	}
	challenge := resp.Header.Get("WWW-Authenticate")
	for _, path := range []string{"/v1/requests/ch-1", "/v1/requests/ch-1/stream"} {
		resp, b := do(t, "GET", url+path, "", "X-Api-Key", "not-a-key")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s with a wrong key: %d %s", path, resp.StatusCode, b)
		}
		if resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s with a wrong key: 401 without WWW-Authenticate; want a challenge, as ingress sends on POST (%q): RFC 9110 §15.5.2",
				path, challenge)
		}
	}
}

// TestReadOfDisabledPrincipalIsForbiddenAsPost: a principal whose key
// is disabled is answered 403 forbidden by POST /v1/requests (the key is
// valid; retrying it, or asking the user for it again, cannot help), and
// docs/protocols.md promises the GETs answer "401/403 (auth, with
// WWW-Authenticate on the GETs as on the POST)". The read API must refuse
// the same credential the same way: 403, not 401 "missing or invalid
// credentials" with a challenge asking for credentials again.
func TestReadOfDisabledPrincipalIsForbiddenAsPost(t *testing.T) {
	const key = "ak_disabled_carol_0123456789abcd"
	_, nc := natstest.RunServer(t)
	a, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{{Principal: "carol", Secret: key, Disabled: true}}})
	if err != nil {
		t.Fatal(err)
	}
	url := authFront(t, nc, a)
	post, pb := testkit.Do(t, http.MethodPost, url+"/v1/requests", `{"params":{"text":"hi"}}`, "X-Api-Key", key)
	if post.StatusCode != http.StatusForbidden {
		t.Fatalf("POST with a disabled key: %d %s (the premise: 403)", post.StatusCode, pb)
	}
	for _, path := range []string{"/v1/requests/any-request", "/v1/requests/any-request/stream"} {
		get, gb := testkit.Do(t, http.MethodGet, url+path, "", "X-Api-Key", key)
		if get.StatusCode != post.StatusCode {
			t.Errorf("GET %s with the disabled key that POST refuses 403: %d %s (WWW-Authenticate %q); "+
				"want 403 forbidden as the POST answers (docs/protocols.md: the GETs answer auth as the POST does), not 401 asking for credentials again",
				path, get.StatusCode, gb, get.Header.Values("WWW-Authenticate"))
		}
	}
}

// TestReadAuthFailuresCounted: e2a_ingress_auth_failures_total counts
// "requests refused by authentication or authorization, by protocol"
// (docs/operations.md): a GET of egress's read API whose credential is
// refused is such a request, counted under e2a as a POST /v1/requests
// refused the same way is (and as its rate-limit refusals are counted in
// e2a_ingress_rate_limited_total); else a client guessing keys, or one
// retrying a revoked key, on the reads was invisible on the dashboard's
// auth-failures panel.
func TestReadAuthFailuresCounted(t *testing.T) {
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	url := authFront(t, nc, pipetest.KeyAuth(t, map[string]string{"alice": keyAliceGated}, nil), ingress.WithRegisterer(reg))
	refused := 0
	for _, path := range []string{"/v1/requests/af-1", "/v1/requests/af-1/stream"} {
		resp, b := do(t, "GET", url+path, "", "X-Api-Key", "not-a-key-of-anyone-0123456789")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s with a wrong key: %d %s", path, resp.StatusCode, b)
		}
		refused++
	}
	var got float64
	for _, s := range testkit.Series(t, reg, "e2a_ingress_auth_failures_total") {
		if s.Labels["protocol"] == "e2a" {
			got += s.Value
		}
	}
	if got != float64(refused) {
		t.Errorf("%d GETs of the read API refused 401: e2a_ingress_auth_failures_total{protocol=\"e2a\"} = %v; want %d", refused, got, refused)
	}
}
