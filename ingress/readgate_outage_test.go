package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestReadGateAuthorizerOutage: the read API's authorizer may fail to
// decide (an identity provider's key set unreachable, its own deadline):
// that is no verdict on the caller, and the read gate answered it as one,
// 500 "unauthenticated" (not retryable) with the error's text. A caller
// refused for its credential gets 401 with WWW-Authenticate (403 for a
// disabled one, with the challenges as on the POST); an authorizer that could not decide gets 503
// "unavailable", retryable, with Retry-After and no challenge, as the
// doors answer their own limiter being down, and nothing of the
// authorizer's error.
func TestReadGateAuthorizerOutage(t *testing.T) {
	const (
		key      = "ak_outage_alice_0123456789abcdef"
		disabled = "ak_outage_carol_0123456789abcdef"
	)
	_, nc := natstest.RunServer(t)
	a, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{{Principal: "alice", Secret: key},
		{Principal: "carol", Secret: disabled, Disabled: true}}})
	if err != nil {
		t.Fatal(err)
	}
	outages := map[string]error{
		"jwks":     fmt.Errorf("oauth2: GET https://idp.example/jwks: %w", syscall.ECONNREFUSED),
		"deadline": fmt.Errorf("oauth2: introspection: %w", context.DeadlineExceeded),
	}
	// The authorizer fails to decide for a request naming an outage, and
	// else decides as cmd/e2a's egressAuthorizer.
	url := authFrontWrapped(t, nc, a, func(next readAuthorizer) readAuthorizer {
		return func(r *http.Request) (tenant.Principal, error) {
			if err := outages[r.Header.Get("X-Test-Outage")]; err != nil {
				return tenant.Principal{}, err
			}
			return next(r)
		}
	})
	for _, c := range []struct {
		name      string
		hdr       []string
		status    int
		code      string
		retryable bool
		challenge bool
	}{
		{"no credential", nil, http.StatusUnauthorized, "unauthenticated", false, true},
		{"wrong key", []string{"X-Api-Key", "not-a-key"}, http.StatusUnauthorized, "unauthenticated", false, true},
		{"disabled key", []string{"X-Api-Key", disabled}, http.StatusForbidden, "forbidden", false, true}, // as the POST
		{"key set unreachable", []string{"X-Api-Key", key, "X-Test-Outage", "jwks"}, http.StatusServiceUnavailable, "unavailable", true, false},
		{"authorizer deadline", []string{"X-Api-Key", key, "X-Test-Outage", "deadline"}, http.StatusServiceUnavailable, "unavailable", true, false},
	} {
		for _, path := range []string{"/v1/requests/outage-1", "/v1/requests/outage-1/stream"} {
			resp, b := testkit.Do(t, http.MethodGet, url+path, "", c.hdr...)
			var body egress.APIError
			_ = json.Unmarshal(b, &body)
			challenge := resp.Header.Get("WWW-Authenticate") != ""
			if resp.StatusCode != c.status || body.Error.Code != c.code || body.Error.Retryable != c.retryable || challenge != c.challenge {
				t.Errorf("%s: GET %s: %d %s (WWW-Authenticate %q); want %d %s, retryable %v, a challenge %v",
					c.name, path, resp.StatusCode, b, resp.Header.Get("WWW-Authenticate"), c.status, c.code, c.retryable, c.challenge)
			}
			if c.retryable && resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s: GET %s: %d without Retry-After; want one (the answer is retryable)", c.name, path, resp.StatusCode)
			}
			if strings.Contains(string(b), "idp.example") || strings.Contains(string(b), "introspection") {
				t.Errorf("%s: GET %s: the answer quotes the authorizer's error: %s", c.name, path, b)
			}
		}
	}
}
