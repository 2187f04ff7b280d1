package bridge_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

// TestTokenFetchShared: the calls that need a token while one is being
// asked for wait for that one (the source is called once for them all),
// each no longer than its own context (a cancelled call returns its
// cause at once, the others still get the token); a source that gives no
// token and no error fails the calls, it does not panic. Every call used
// to wait its turn on a lock and ask the source itself: with a token
// endpoint that does not answer, the fourth of four calls returned after
// four timeouts.
func TestTokenFetchShared(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var asked atomic.Int64
		down := errors.New("the token endpoint did not answer")
		c, err := bridge.NewClient("https://agent.example", bridge.WithTokenSource(bridge.TokenSourceFunc(func() (*oauth2.Token, error) {
			n := asked.Add(1)
			<-release
			if n == 1 {
				return nil, down
			}
			return &oauth2.Token{AccessToken: "shared-token-81f2", Expiry: time.Now().Add(time.Hour)}, nil
		})))
		if err != nil {
			t.Fatal(err)
		}
		// Four calls wait on one fetch, which fails: they share its
		// failure; then four wait on one that succeeds, and a fifth whose
		// context has ended returns at once.
		authorize := func(out chan<- error) {
			h := http.Header{}
			err := c.Authorize(context.Background(), h)
			if err == nil && h.Get("Authorization") != "Bearer shared-token-81f2" {
				err = errors.New("authorization " + h.Get("Authorization"))
			}
			out <- err
		}
		failed, got := make(chan error, 4), make(chan error, 4)
		for range 4 {
			go authorize(failed)
		}
		synctest.Wait() // all four wait on the fetch
		release <- struct{}{}
		for range 4 {
			if err := <-failed; !errors.Is(err, bridge.ErrNoToken) || !errors.Is(err, down) {
				t.Errorf("a call waiting on a failed fetch: %v", err)
			}
		}
		for range 4 {
			go authorize(got)
		}
		synctest.Wait()
		ctx, cancel := context.WithCancelCause(context.Background())
		gone := errors.New("the request ended")
		cancel(gone)
		if err := c.Authorize(ctx, http.Header{}); !errors.Is(err, gone) {
			t.Errorf("a call whose context ended: %v, want its cause", err)
		}
		close(release)
		for range 4 {
			if err := <-got; err != nil {
				t.Error(err)
			}
		}
		if n := asked.Load(); n != 2 {
			t.Errorf("the source was asked %d times, want twice (one fetch for each four calls)", n)
		}
	})

	none, err := bridge.NewClient("https://agent.example", bridge.WithTokenSource(bridge.TokenSourceFunc(func() (*oauth2.Token, error) { return nil, nil })))
	if err != nil {
		t.Fatal(err)
	}
	if err := none.Authorize(context.Background(), http.Header{}); !errors.Is(err, bridge.ErrNoToken) {
		t.Errorf("a source that gives nil: %v, want ErrNoToken", err)
	}
}

// TestTokenSlot: a refusal reported with the token the refused call
// carried (TokenSlot, as a2abridge's interceptor reports an SDK's call)
// drops that token only: one that another call has since replaced leaves
// the new one kept. Refused(nil) used to drop whatever was kept.
func TestTokenSlot(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	c, err := bridge.NewClient("https://agent.example", bridge.WithTokenSource(bridge.TokenSourceFunc(func() (*oauth2.Token, error) {
		return &oauth2.Token{AccessToken: "slot-token-" + strconv.FormatInt(n.Add(1), 10), Expiry: time.Now().Add(time.Hour)}, nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, slot := bridge.WithTokenSlot(context.Background())
	if err := c.Authorize(ctx, http.Header{}); err != nil || slot.Header().Get("Authorization") != "Bearer slot-token-1" {
		t.Fatalf("slot %v, %v", slot.Header(), err)
	}
	c.Refused(slot.Header()) // token 1 refused: the next call gets token 2
	h := http.Header{}
	if err := c.Authorize(context.Background(), h); err != nil || h.Get("Authorization") != "Bearer slot-token-2" {
		t.Fatalf("after a refusal: %q, %v", h.Get("Authorization"), err)
	}
	c.Refused(slot.Header()) // token 1's refusal again, late: token 2 stays
	h = http.Header{}
	if err := c.Authorize(context.Background(), h); err != nil || h.Get("Authorization") != "Bearer slot-token-2" {
		t.Errorf("a late refusal of the old token dropped the new one: %q, %v", h.Get("Authorization"), err)
	}
	if bridge.TokenSlotOf(context.Background()).Header() != nil {
		t.Error("a context without a slot has a header")
	}
}

// TestTokenSlotErr: a call's failure to get a token is kept in its slot
// as Authorize's *Error (the token endpoint's code and Retry-After), for
// an SDK that makes its own error of it (a2abridge's gRPC calls); the
// call's next request that gets a token clears it.
func TestTokenSlotErr(t *testing.T) {
	t.Parallel()
	var busy atomic.Bool
	busy.Store(true)
	c, err := bridge.NewClient("https://agent.example", bridge.WithTokenSource(bridge.TokenSourceFunc(func() (*oauth2.Token, error) {
		if busy.Load() {
			return nil, &oauth2.RetrieveError{Response: &http.Response{StatusCode: http.StatusTooManyRequests,
				Header: http.Header{"Retry-After": {"3"}}}}
		}
		return &oauth2.Token{AccessToken: "slot-token", Expiry: time.Now().Add(time.Hour)}, nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, slot := bridge.WithTokenSlot(context.Background())
	if slot.Err() != nil {
		t.Fatalf("a new slot has an error: %v", slot.Err())
	}
	aerr := c.Authorize(ctx, http.Header{})
	var be, ae *bridge.Error
	if !errors.As(slot.Err(), &be) || !errors.As(aerr, &ae) || be != ae || be.Code != bridge.CodeRateLimited ||
		!be.Retryable || be.RetryAfter != 3*time.Second {
		t.Fatalf("slot error %#v, Authorize's %v; want Authorize's, rate limited, Retry-After 3s", slot.Err(), aerr)
	}
	busy.Store(false)
	if err := c.Authorize(ctx, http.Header{}); err != nil || slot.Err() != nil {
		t.Errorf("after a token: Authorize %v, slot error %v; want none", err, slot.Err())
	}
	if bridge.TokenSlotOf(context.Background()).Err() != nil {
		t.Error("a context without a slot has an error")
	}
}

// TestTokenScrubbedAfterRotation: an error page that echoes the token its
// call carried is scrubbed of it though another call has since got a new
// token (only the token sent last was), and so is Scrub's text.
func TestTokenScrubbedAfterRotation(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	var c *bridge.Client
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("rotate") {
			// Another call gets a new token while this one is answered.
			c.Refused(r.Header)
			if err := c.Authorize(context.Background(), http.Header{}); err != nil {
				t.Error(err)
			}
		}
		http.Error(w, "debug: "+r.Header.Get("Authorization"), http.StatusInternalServerError)
	}))
	t.Cleanup(upstream.Close)
	var err error
	c, err = bridge.NewClient(upstream.URL, bridge.WithTokenSource(bridge.TokenSourceFunc(func() (*oauth2.Token, error) {
		return &oauth2.Token{AccessToken: "rotated-token-" + strconv.FormatInt(n.Add(1), 10), Expiry: time.Now().Add(time.Hour)}, nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, upstream.URL+"/?rotate=1", nil)
	_, err = c.Do(req, nil)
	if err == nil || strings.Contains(err.Error(), "rotated-token-1") || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("an error page echoing the call's own token after a rotation: %v", err)
	}
	if s := c.Scrub("quoted rotated-token-1 and rotated-token-2"); strings.Contains(s, "rotated-token") {
		t.Errorf("Scrub: %s", s)
	}
}

// TestTokenEndpointCut: a token endpoint whose answer stops mid-body
// (it stalls until the fetch's deadline) fails the call retryable, as an
// endpoint that is down does: it was a protocol error, not retried.
func TestTokenEndpointCut(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":`)
		w.(http.Flusher).Flush()
		<-stop
	}))
	t.Cleanup(endpoint.Close)
	t.Cleanup(func() { close(stop) }) // before Close, which waits for the handler
	cfg := &clientcredentials.Config{ClientID: oauthClient, ClientSecret: oauthSecret, TokenURL: endpoint.URL, AuthStyle: oauth2.AuthStyleInHeader}
	c, err := bridge.NewClient("https://agent.example", bridge.WithTokenSource(bridge.TokenSourceFunc(func() (*oauth2.Token, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return cfg.Token(ctx)
	})))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Authorize(context.Background(), http.Header{})
	if be := new(bridge.Error); !errors.As(err, &be) || !be.Retryable || !errors.Is(err, bridge.ErrNoToken) {
		t.Errorf("an answer cut mid-body: %v, want retryable", err)
	}
}
