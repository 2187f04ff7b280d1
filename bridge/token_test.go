package bridge_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/oauthtest"
)

const (
	oauthClient = "e2a-bridge"
	oauthSecret = "client-secret-5c1e7a"
)

// tokenClient is a bridge client of url whose tokens come from as's
// token endpoint by the client-credentials grant of golang.org/x/oauth2.
func tokenClient(t *testing.T, as *oauthtest.Server, url, secret string) *bridge.Client {
	t.Helper()
	cfg := &clientcredentials.Config{ClientID: oauthClient, ClientSecret: secret, TokenURL: as.TokenURL(), Scopes: []string{"agents"}}
	c, err := bridge.NewClient(url, bridge.WithTokenSource(bridge.TokenSourceFunc(func() (*oauth2.Token, error) { return cfg.Token(context.Background()) })))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get calls url's root with c.
func get(t *testing.T, c *bridge.Client, url string) (string, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/", nil)
	resp, err := c.Do(req, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestTokenSource: with WithTokenSource every call carries a bearer token
// of a real authorization server (go-oauth2's), which the upstream checks:
// one token serves many calls until it is about to expire, or until the
// upstream refuses it (revoked), then another is asked for; a client the token endpoint refuses fails its calls
// upstream_auth (not retryable, ErrNoToken, the upstream never called), a
// token endpoint that is down fails them retryable; the secret is in no
// message, nor is the token an upstream's error page echoes.
func TestTokenSource(t *testing.T) {
	t.Parallel()
	long := oauthtest.Start(t, oauthClient, oauthSecret, time.Hour)
	var calls atomic.Int64
	var token atomic.Value
	upstream := httptest.NewServer(long.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		token.Store(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if r.URL.Query().Has("echo") {
			http.Error(w, "refused "+r.Header.Get("Authorization"), http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})))
	t.Cleanup(upstream.Close)

	c := tokenClient(t, long, upstream.URL, oauthSecret)
	for i := range 3 {
		if body, err := get(t, c, upstream.URL); err != nil || body != "ok" {
			t.Fatalf("call %d: %q, %v", i, body, err)
		}
	}
	if long.Issued() != 1 {
		t.Errorf("three calls asked for %d tokens, want 1 (kept until it expires)", long.Issued())
	}
	req, _ := http.NewRequest(http.MethodGet, upstream.URL+"/?echo=1", nil)
	_, err := c.Do(req, nil)
	tok, _ := token.Load().(string)
	if be := new(bridge.Error); len(tok) < 6 || !errors.As(err, &be) || be.Code != bridge.CodeUnavailable || strings.Contains(err.Error(), tok) ||
		!strings.Contains(err.Error(), "refused [redacted]") {
		t.Errorf("an error page echoing the token %q: %v", tok, err)
	}
	if s := c.Scrub("quoted: " + tok); strings.Contains(s, tok) {
		t.Errorf("Scrub left the token: %s", s)
	}

	// A token the upstream refuses (revoked) is not sent again: that call
	// fails upstream_auth, the next gets a new token.
	long.Revoke(t, tok)
	if _, err := get(t, c, upstream.URL); !isCode(err, bridge.CodeAuth) {
		t.Errorf("a revoked token: %v, want upstream_auth", err)
	}
	if body, err := get(t, c, upstream.URL); err != nil || body != "ok" || long.Issued() != 2 {
		t.Errorf("after a refused token: %q, %v, %d tokens issued; want ok with a second token", body, err, long.Issued())
	}

	// Tokens that expire within oauth2's margin (10 s) are asked for again.
	short := oauthtest.Start(t, oauthClient, oauthSecret, 5*time.Second)
	shortUp := httptest.NewServer(short.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })))
	t.Cleanup(shortUp.Close)
	sc := tokenClient(t, short, shortUp.URL, oauthSecret)
	for range 2 {
		if body, err := get(t, sc, shortUp.URL); err != nil || body != "ok" {
			t.Fatalf("a short-lived token: %q, %v", body, err)
		}
	}
	if short.Issued() != 2 {
		t.Errorf("two calls with tokens about to expire asked for %d, want 2", short.Issued())
	}

	before := calls.Load()
	_, err = get(t, tokenClient(t, long, upstream.URL, "not-the-secret-93"), upstream.URL)
	if be := new(bridge.Error); !errors.As(err, &be) || be.Code != bridge.CodeAuth || be.Retryable || !errors.Is(err, bridge.ErrNoToken) ||
		!strings.Contains(err.Error(), "token endpoint at 127.0.0.1:") || strings.Contains(err.Error(), "not-the-secret-93") {
		t.Errorf("a refused client: %v; want upstream_auth from the token endpoint, not retryable, without the secret", err)
	}
	if calls.Load() != before {
		t.Errorf("the upstream was called without a token")
	}

	short.SetDown(true)
	_, err = get(t, sc, shortUp.URL)
	if be := new(bridge.Error); !errors.As(err, &be) || be.Code != bridge.CodeUnavailable || !be.Retryable || !errors.Is(err, bridge.ErrNoToken) {
		t.Errorf("a token endpoint that is down: %v; want retryable upstream_unavailable", err)
	}
}

// TestTokenSourceRefused: a token source beside an API key sent as a
// bearer token, or an Authorization header, is refused, as is a nil one;
// beside an API key in a header of its own it is not.
func TestTokenSourceRefused(t *testing.T) {
	ts := (&clientcredentials.Config{ClientID: "x", ClientSecret: "y", TokenURL: "https://auth.example/token"}).TokenSource(context.Background())
	for name, opts := range map[string][]bridge.ClientOption{
		"nil":           {bridge.WithTokenSource(nil)},
		"api key":       {bridge.WithCredentials(bridge.Credentials{APIKey: "k-123456"}), bridge.WithTokenSource(ts)},
		"authorization": {bridge.WithTokenSource(ts), bridge.WithCredentials(bridge.Credentials{Headers: map[string]string{"authorization": "Basic eDp5"}})},
	} {
		if _, err := bridge.NewClient("https://agent.example", opts...); !errors.Is(err, bridge.ErrInvalidOption) {
			t.Errorf("%s: %v, want %v", name, err, bridge.ErrInvalidOption)
		}
	}
	if _, err := bridge.NewClient("https://agent.example", bridge.WithTokenSource(ts),
		bridge.WithCredentials(bridge.Credentials{APIKey: "k-123456", KeyHeader: "X-Api-Key"})); err != nil {
		t.Errorf("a token and an API key in X-Api-Key: %v", err)
	}
}

// isCode reports whether err is a *bridge.Error of code.
func isCode(err error, code string) bool {
	be := new(bridge.Error)
	return errors.As(err, &be) && be.Code == code
}
