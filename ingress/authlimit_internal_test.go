package ingress

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const limitGoodKey = "ak_limit_good_0123456789abcdef"

// testClock is the limiter's clock, moved by the test (WithAuthClock): the
// limiter has no timer, it compares the times it is given.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// limitAuth is an apiKey Auth under a failure limiter of max a minute over
// at most addrs addresses.
func limitAuth(t testing.TB, max, addrs int, reg prometheus.Registerer, opts ...AuthOption) *Auth {
	t.Helper()
	cfg := AuthLimitConfig{MaxFailures: max, Window: time.Minute, MaxAddresses: addrs}
	a, err := NewAuth(&AuthConfig{APIKeys: []Credential{{Principal: "alice", Secret: limitGoodKey}}},
		append([]AuthOption{WithAuthLimit(cfg), WithAuthRegisterer(reg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func keyFrom(a *Auth, key, remote string) error {
	_, err := a.AuthenticateFrom(http.Header{HeaderAPIKey: {key}}, remote)
	return err
}

// TestAuthLimiterWindow: successes neither count nor are throttled; the
// max-th failure is answered 401, the next attempt (a correct key too)
// ErrAuthThrottled with the rest of the window as RetryAfter; once the
// window has passed the correct key works at once; a request with no
// credential is never throttled.
func TestAuthLimiterWindow(t *testing.T) {
	{
		clk := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		reg := prometheus.NewRegistry()
		a := limitAuth(t, 3, 10, reg, WithAuthClock(clk.Now))
		const peer = "192.0.2.1:5000"
		for range 10 {
			if err := keyFrom(a, limitGoodKey, peer); err != nil {
				t.Fatalf("correct key: %v", err)
			}
		}
		for n := range 3 {
			if err := keyFrom(a, "ak_wrong_0123456789abcdef", peer); !errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrAuthThrottled) {
				t.Fatalf("wrong key %d: %v, want a checked 401", n+1, err)
			}
		}
		clk.Add(20 * time.Second)
		err := keyFrom(a, limitGoodKey, peer)
		var ae *AuthError
		if !errors.Is(err, ErrAuthThrottled) || !errors.As(err, &ae) || ae.RetryAfter != 40*time.Second || AuthStatus(err) != 429 {
			t.Fatalf("correct key from a throttled address: %v (%+v), want ErrAuthThrottled, RetryAfter 40s, 429", err, ae)
		}
		h := http.Header{}
		f, ok := ThrottledRefusal(h, err)
		if !ok || f.Status != 429 || h.Get("Retry-After") != "40" || f.RetryAfter != 40*time.Second {
			t.Errorf("refusal %+v, Retry-After %q", f, h.Get("Retry-After"))
		}
		// The JSON-RPC data (and A2A v1.0's Struct detail) says retryable
		// as the refusal does; it said false while E2A's body said true.
		if d, ok := f.Data.(RateLimitExceeded); !ok || !d.Retryable || !f.Retryable {
			t.Errorf("refusal data %+v, want retryable", f.Data)
		}
		if _, err := a.AuthenticateFrom(http.Header{}, peer); !errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrAuthThrottled) {
			t.Errorf("no credential from a throttled address: %v, want the usual 401", err)
		}
		if err := keyFrom(a, limitGoodKey, "192.0.2.2:5000"); err != nil {
			t.Errorf("another address: %v", err)
		}
		clk.Add(40 * time.Second)
		if err := keyFrom(a, limitGoodKey, peer); err != nil {
			t.Errorf("correct key once the window passed: %v", err)
		}
		if f, th := testutil.ToFloat64(a.limiter.failures), testutil.ToFloat64(a.limiter.throttled); f != 3 || th != 1 {
			t.Errorf("metrics: %v failures, %v throttled; want 3, 1", f, th)
		}
	}
}

// TestAuthLimiterBounded: at most MaxAddresses addresses are tracked,
// the window that ends first forgotten first; expired windows are dropped.
func TestAuthLimiterBounded(t *testing.T) {
	{
		clk := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		a := limitAuth(t, 2, 3, prometheus.NewRegistry(), WithAuthClock(clk.Now))
		for i := range 4 {
			_ = keyFrom(a, "ak_wrong_0123456789abcdef", "192.0.2."+strconv.Itoa(i+1)+":1")
			clk.Add(time.Second)
		}
		if n := a.limiter.tracked(); n != 3 {
			t.Fatalf("%d addresses tracked, want 3", n)
		}
		if testutil.ToFloat64(a.limiter.evicted) != 1 {
			t.Errorf("evictions %v, want 1", testutil.ToFloat64(a.limiter.evicted))
		}
		// 192.0.2.1 was evicted: its second failure is its first again.
		_ = keyFrom(a, "ak_wrong_0123456789abcdef", "192.0.2.1:1")
		if err := keyFrom(a, limitGoodKey, "192.0.2.1:1"); err != nil {
			t.Errorf("evicted address throttled after one more failure: %v", err)
		}
		clk.Add(2 * time.Minute)
		_ = keyFrom(a, "ak_wrong_0123456789abcdef", "192.0.2.9:1")
		if n := a.limiter.tracked(); n != 1 {
			t.Errorf("%d addresses tracked after their windows ended, want 1", n)
		}
	}
}

// TestAuthLimiterRace: concurrent failures from many addresses and
// successes (run with -race) count exactly.
func TestAuthLimiterRace(t *testing.T) {
	a := limitAuth(t, 1000, 100, prometheus.NewRegistry())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				_ = keyFrom(a, "ak_wrong_0123456789abcdef", "192.0.2."+strconv.Itoa(g)+":1")
				if err := keyFrom(a, limitGoodKey, "198.51.100."+strconv.Itoa(i)+":1"); err != nil {
					t.Errorf("correct key: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if f := testutil.ToFloat64(a.limiter.failures); f != 400 {
		t.Errorf("failures %v, want 400", f)
	}
	if n := a.limiter.tracked(); n != 8 {
		t.Errorf("%d tracked, want 8", n)
	}
}

// TestClientAddress: the peer, unless trusted; then the right-most
// forwarded address that is not a trusted proxy. IPv6 clients count by
// their /64.
func TestClientAddress(t *testing.T) {
	trusted, err := ParseTrustedProxies([]string{"10.0.0.0/8, 192.168.1.1", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ peer, xff, want string }{
		{"203.0.113.5:1234", "1.2.3.4", "203.0.113.5"},                // untrusted peer: header ignored
		{"10.1.2.3:1234", "1.2.3.4, 5.6.7.8", "5.6.7.8"},              // right-most
		{"10.1.2.3:1234", "1.2.3.4, 5.6.7.8, 192.168.1.1", "5.6.7.8"}, // skipping trusted hops
		{"10.1.2.3:1234", "10.9.9.9", "10.9.9.9"},                     // all trusted: the left-most
		{"10.1.2.3:1234", "1.2.3.4, junk", "10.1.2.3"},                // no address: the last trusted hop
		{"10.1.2.3:1234", "", "10.1.2.3"},
		{"[::1]:1234", "[2001:db8::1]:443", "2001:db8::1"},
		{"[::ffff:10.0.0.1]:1", "1.2.3.4", "1.2.3.4"}, // mapped peer unmapped
	} {
		h := http.Header{}
		if c.xff != "" {
			h.Set("X-Forwarded-For", c.xff)
		}
		got, ok := ClientAddress(c.peer, h, trusted)
		if !ok || got.String() != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %v %v, want %s", c.peer, c.xff, got, ok, c.want)
		}
	}
	if _, ok := ClientAddress("bufconn", nil, nil); ok {
		t.Error("a peer that is no address was taken")
	}
	if got := limitKey(netip.MustParseAddr("2001:db8:1:2:3:4:5:6")); got.String() != "2001:db8:1:2::" {
		t.Errorf("IPv6 key %v, want its /64", got)
	}
	if _, err := ParseTrustedProxies([]string{"10.0.0.0/33"}); !errors.Is(err, ErrAuthConfig) {
		t.Errorf("bad prefix: %v", err)
	}
}

// TestAuthLimitConfigValidate: negative limit, window and address bounds
// are refused by NewAuth.
func TestAuthLimitConfigValidate(t *testing.T) {
	for _, c := range []AuthLimitConfig{
		{MaxFailures: -1},
		{MaxFailures: 5, Window: time.Millisecond, MaxAddresses: 10},
		{MaxFailures: 5, Window: 48 * time.Hour, MaxAddresses: 10},
		{MaxFailures: 5, Window: time.Minute},
	} {
		_, err := NewAuth(&AuthConfig{APIKeys: []Credential{{Principal: "alice", Secret: limitGoodKey}}}, WithAuthLimit(c))
		if !errors.Is(err, ErrAuthConfig) {
			t.Errorf("%+v: %v, want ErrAuthConfig", c, err)
		}
	}
	if err := DefaultAuthLimitConfig().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestAuthLimitLogsNoCredential: the failure hook (what a log or metric is
// wired to) and the throttled error carry no part of the presented
// credential, checked and throttled alike.
func TestAuthLimitLogsNoCredential(t *testing.T) {
	const secret = "ak_guess_SECRETPART_0123456789"
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	a := limitAuth(t, 1, 10, prometheus.NewRegistry(), WithAuthFailureHook(func(scheme, reason string) {
		log.Warn("auth failure", "scheme", scheme, "reason", reason)
	}))
	var errs []error
	for range 3 {
		errs = append(errs, keyFrom(a, secret, "192.0.2.1:1"))
	}
	if !errors.Is(errs[2], ErrAuthThrottled) {
		t.Fatalf("third attempt: %v, want throttled", errs[2])
	}
	for _, err := range errs {
		log.Warn("refused", "err", err)
	}
	for _, part := range []string{secret, "SECRETPART", secret[:12]} {
		if bytes.Contains(buf.Bytes(), []byte(part)) {
			t.Errorf("the log holds %q: %s", part, buf.String())
		}
	}
}

// TestAuthLimiterForbiddenNotCounted: a valid credential refused 403 (a
// disabled principal) is no guess: however often it is tried, it neither
// counts nor throttles its address, whose correct key keeps working.
func TestAuthLimiterForbiddenNotCounted(t *testing.T) {
	const disabledKey = "ak_limit_disabled_0123456789"
	a, err := NewAuth(&AuthConfig{APIKeys: []Credential{{Principal: "alice", Secret: limitGoodKey},
		{Principal: "bob", Secret: disabledKey, Disabled: true}}},
		WithAuthLimit(AuthLimitConfig{MaxFailures: 2, Window: time.Minute, MaxAddresses: 10}),
		WithAuthRegisterer(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	const peer = "192.0.2.9:5000"
	for n := range 5 {
		if err := keyFrom(a, disabledKey, peer); !errors.Is(err, ErrForbidden) {
			t.Fatalf("disabled key, try %d: %v, want ErrForbidden (checked, never throttled)", n+1, err)
		}
	}
	if err := keyFrom(a, limitGoodKey, peer); err != nil {
		t.Fatalf("correct key after 5 forbidden ones: %v", err)
	}
	if f := testutil.ToFloat64(a.limiter.failures); f != 0 {
		t.Errorf("%v failures counted, want 0", f)
	}
}

// TestAuthLimitTokenEndpoint: POST /oauth/token is under the same limiter.
// Client secrets that do not verify count against the address; past the
// limit the grant is refused 429 with Retry-After, the secret unchecked (a
// correct one too), while another address still gets its token.
func TestAuthLimitTokenEndpoint(t *testing.T) {
	a := newTestAuth(t, nil, WithAuthLimit(AuthLimitConfig{MaxFailures: 2, Window: time.Minute, MaxAddresses: 10}),
		WithAuthRegisterer(prometheus.NewRegistry()))
	grant := func(secret, remote string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/oauth/token",
			strings.NewReader("grant_type=client_credentials&client_id=svc-a&client_secret="+url.QueryEscape(secret)))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = remote
		rec := httptest.NewRecorder()
		a.TokenHandler().ServeHTTP(rec, r)
		return rec
	}
	const peer = "192.0.2.7:4000"
	for n := range 2 {
		if rec := grant("cs_wrong_secret_0123456789", peer); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong secret %d: %d %s, want 401 invalid_client", n+1, rec.Code, rec.Body)
		}
	}
	rec := grant(testClientSec, peer)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || strings.Contains(rec.Body.String(), "access_token") {
		t.Fatalf("correct secret from a throttled address: %d, Retry-After %q, %s; want 429 with Retry-After, no token",
			rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := grant(testClientSec, "192.0.2.8:4000"); rec.Code != http.StatusOK {
		t.Errorf("correct secret from another address: %d %s", rec.Code, rec.Body)
	}
}

// TestAuthLimiterConcurrentGuesses: guesses sent together from one address
// are checked only while its failures and the checks still running stay
// under the limit; the others wait for a running check, then are throttled
// once the failures reach it. All passed the throttle check before any
// failure was counted: every guess sent at once was checked. A correct key
// sent more often at once than the limit queues, and is never refused.
func TestAuthLimiterConcurrentGuesses(t *testing.T) {
	for _, c := range []struct {
		name    string
		outcome error // what each check returns
		refused int   // attempts answered ErrAuthThrottled
	}{
		{"guesses", unauthenticated(SchemeAPIKey, "", "invalid API key"), 3},
		{"correct key", nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := limitAuth(t, 5, 10, prometheus.NewRegistry())
				release := make(chan struct{})
				var checks atomic.Int32
				errs := make(chan error, 8)
				h := http.Header{HeaderAPIKey: {"ak_any_0123456789abcdef"}}
				for range 8 {
					go func() {
						_, err := a.limited(h, "192.0.2.9:1", func() (Principal, error) {
							checks.Add(1)
							<-release
							if c.outcome != nil {
								return Principal{}, c.outcome
							}
							return Principal{UserID: "alice"}, nil
						})
						errs <- err
					}()
				}
				synctest.Wait()
				if n := checks.Load(); n != 5 {
					t.Errorf("%d credentials checked at once from one address, want the limit, 5", n)
				}
				close(release)
				throttled := 0
				for range 8 {
					err := <-errs
					switch {
					case errors.Is(err, ErrAuthThrottled):
						throttled++
					case c.outcome == nil && err != nil:
						t.Errorf("correct key refused: %v", err)
					}
				}
				if throttled != c.refused {
					t.Errorf("%d attempts throttled, want %d", throttled, c.refused)
				}
				if want := int32(8 - c.refused); checks.Load() != want {
					t.Errorf("%d credentials checked in all, want %d", checks.Load(), want)
				}
				if n := len(a.limiter.pending); n != 0 {
					t.Errorf("%d addresses left pending", n)
				}
			})
		})
	}
}
