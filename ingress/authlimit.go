package ingress

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/peer"

	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// The failure limiter: credential guessing throttled per client address
// (OWASP API4, "unrestricted resource consumption" of the authentication
// endpoints). Every door authenticates through Auth, so the limiter lives
// there once: after MaxFailures refused credentials from one address within
// Window, a credential presented from that address is refused (429,
// Retry-After) without being checked, until the window that began with the
// address's first failure has passed. A request presenting no credential
// is neither counted nor throttled (it costs no comparison, and a client's
// first unauthenticated call that earns the challenge is no guess), and a
// credential accepted is never counted.

// Defaults of the failure limiter. 20 refused credentials a minute leave a
// person mistyping a key, or a client retrying with a rotated-out one, far
// from the limit, and hold a guesser to 28,800 tries a day per address
// against 128-bit secrets (MinSecretLength); 10,000 tracked addresses cost
// about 2 MB.
const (
	DefaultAuthFailureLimit     = 20
	DefaultAuthFailureWindow    = time.Minute
	DefaultAuthFailureAddresses = 10000
)

// Bounds of AuthLimitConfig (Validate).
const (
	minAuthFailureWindow    = time.Second
	maxAuthFailureWindow    = 24 * time.Hour
	maxAuthFailureAddresses = 1_000_000
)

// ErrAuthThrottled is the error of an authentication refused without
// checking the credential, its client address over the failure limit. It
// wraps ErrUnauthenticated, so that a caller that knows only 401 and 403
// still refuses the request; AuthStatus answers it 429.
var ErrAuthThrottled = fmt.Errorf("%w: too many failed authentications", ErrUnauthenticated)

// AuthLimitConfig configures the failure limiter of an Auth
// (WithAuthLimit).
type AuthLimitConfig struct {
	// MaxFailures refused credentials from one client address within
	// Window throttle it; 0 turns the limiter off.
	MaxFailures int
	// Window starts at an address's first counted failure; the address is
	// throttled until it ends.
	Window time.Duration
	// MaxAddresses bounds the addresses tracked; beyond it the one whose
	// window ends first (it began first) is forgotten.
	MaxAddresses int
	// TrustedProxies are the peers whose X-Forwarded-For is believed
	// (ClientAddress); empty: the header is never read.
	TrustedProxies []netip.Prefix
}

// DefaultAuthLimitConfig returns the defaults, no trusted proxy.
func DefaultAuthLimitConfig() AuthLimitConfig {
	return AuthLimitConfig{MaxFailures: DefaultAuthFailureLimit, Window: DefaultAuthFailureWindow,
		MaxAddresses: DefaultAuthFailureAddresses}
}

// Validate refuses a negative limit, and with the limiter on, a window
// outside 1s..24h or an address bound outside 1..1,000,000.
func (c AuthLimitConfig) Validate() error {
	switch {
	case c.MaxFailures < 0:
		return fmt.Errorf("%w: auth failure limit %d must not be negative (0 turns it off)", ErrAuthConfig, c.MaxFailures)
	case c.MaxFailures == 0:
		return nil
	case c.Window < minAuthFailureWindow || c.Window > maxAuthFailureWindow:
		return fmt.Errorf("%w: auth failure window %s must be between %s and %s", ErrAuthConfig, c.Window, minAuthFailureWindow, maxAuthFailureWindow)
	case c.MaxAddresses < 1 || c.MaxAddresses > maxAuthFailureAddresses:
		return fmt.Errorf("%w: auth failure addresses %d must be between 1 and %d", ErrAuthConfig, c.MaxAddresses, maxAuthFailureAddresses)
	}
	return nil
}

// ParseTrustedProxies parses a comma-separated list of CIDR prefixes or
// single addresses (a /32 or /128) for AuthLimitConfig.TrustedProxies.
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			p, err := netip.ParsePrefix(e)
			if err != nil {
				a, aerr := netip.ParseAddr(e)
				if aerr != nil {
					return nil, fmt.Errorf("%w: trusted proxy %q is neither a CIDR prefix nor an address", ErrAuthConfig, e)
				}
				p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
			}
			if p.Addr().Is4In6() {
				p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
			}
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// WithAuthLimit turns the failure limiter on with cfg (checked by
// NewAuth). Without it an Auth limits nothing.
func WithAuthLimit(cfg AuthLimitConfig) AuthOption {
	return func(a *Auth) { a.limitCfg = &cfg }
}

// WithAuthRegisterer registers the failure limiter's metrics on reg:
// e2a_ingress_auth_limit_failures_total, e2a_ingress_auth_throttled_total
// and e2a_ingress_auth_limit_evicted_total.
func WithAuthRegisterer(reg prometheus.Registerer) AuthOption {
	return func(a *Auth) { a.limitReg = reg }
}

// failEntry is one client address's failures in its current window.
type failEntry struct {
	addr  netip.Addr
	start time.Time // the first failure of the window
	n     int
}

// failLimiter counts refused credentials per client address. A mutex
// guards the map and the list of addresses by the start of their window
// (front: the latest), which bounds the memory: the back is the window
// that ends first, dropped once it has ended (expire) or, at the bound,
// evicted. Ordered by last failure instead, an address that failed again
// late in an early window would stay in front of a later window still
// running, and the bound would evict that live, maybe throttled, address
// while keeping one whose window had ended.
//
// A credential is checked only while the address's failures in the window
// and the checks of its credentials still running (pending) are fewer than
// MaxFailures: each running check might be one more failure. An attempt
// past that waits for a running check to end (released), then is decided
// again, throttled if the failures reached the limit. Without it, attempts
// that arrived together all passed the check for throttling before any was
// counted, and an address could try as many guesses past the limit as it
// sent at once. A client with no failure queues only past MaxFailures
// concurrent checks of its credentials, each a comparison in memory.
type failLimiter struct {
	cfg      AuthLimitConfig
	mu       sync.Mutex
	entries  map[netip.Addr]*list.Element
	order    *list.List
	pending  map[netip.Addr]int
	released *sync.Cond // on mu: a pending check ended

	failures, throttled, evicted prometheus.Counter
}

func newFailLimiter(cfg AuthLimitConfig, reg prometheus.Registerer) (*failLimiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxFailures == 0 {
		return nil, nil
	}
	s := obs.NewMetricSet(reg, obs.Exclusive)
	l := &failLimiter{cfg: cfg, entries: map[netip.Addr]*list.Element{}, order: list.New(), pending: map[netip.Addr]int{},
		failures: s.Counter("e2a_ingress_auth_limit_failures_total",
			"Refused credentials counted against their client address by the failure limiter."),
		throttled: s.Counter("e2a_ingress_auth_throttled_total",
			"Credentials refused unchecked (429) because their client address had too many failed authentications."),
		evicted: s.Counter("e2a_ingress_auth_limit_evicted_total",
			"Client addresses the failure limiter forgot before their window ended, its address bound reached."),
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%w: auth limit metrics: %v", ErrAuthConfig, err)
	}
	l.released = sync.NewCond(&l.mu)
	return l, nil
}

// enter decides an attempt from addr, clock giving the time: wait > 0 when
// addr is throttled for wait; else the attempt is pending, now the time it
// was admitted at, and the caller checks its credential and calls leave.
// It waits while addr's failures and pending checks could reach the limit.
func (l *failLimiter) enter(addr netip.Addr, clock func() time.Time) (now time.Time, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		now = clock()
		n, wait := l.failuresAt(addr, now)
		if wait > 0 {
			return now, wait
		}
		if n+l.pending[addr] < l.cfg.MaxFailures {
			l.pending[addr]++
			return now, 0
		}
		l.released.Wait()
	}
}

// leave ends a pending check of a credential from addr admitted at now,
// counting it when it failed, and wakes the attempts waiting in enter.
func (l *failLimiter) leave(addr netip.Addr, now time.Time, failed bool) {
	if failed {
		l.failures.Inc()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[addr]--; l.pending[addr] <= 0 {
		delete(l.pending, addr)
	}
	if failed {
		l.fail(addr, now)
	}
	l.released.Broadcast()
}

// failuresAt returns addr's failures in its window at now and, when they
// reached the limit, how long it stays throttled (0: not). It forgets a
// window that has ended. l.mu is held.
func (l *failLimiter) failuresAt(addr netip.Addr, now time.Time) (n int, wait time.Duration) {
	el, ok := l.entries[addr]
	if !ok {
		return 0, 0
	}
	e := el.Value.(*failEntry)
	end := e.start.Add(l.cfg.Window)
	if !now.Before(end) {
		l.order.Remove(el)
		delete(l.entries, addr)
		return 0, 0
	}
	if e.n < l.cfg.MaxFailures {
		return e.n, 0
	}
	return e.n, end.Sub(now)
}

// fail counts a refused credential from addr at now. l.mu is held.
func (l *failLimiter) fail(addr netip.Addr, now time.Time) {
	l.expire(now)
	if el, ok := l.entries[addr]; ok {
		e := el.Value.(*failEntry)
		if !now.Before(e.start.Add(l.cfg.Window)) {
			e.start, e.n = now, 0
			l.order.MoveToFront(el) // the latest window now
		}
		e.n++
		return
	}
	for l.order.Len() >= l.cfg.MaxAddresses {
		back := l.order.Back()
		l.order.Remove(back)
		delete(l.entries, back.Value.(*failEntry).addr)
		l.evicted.Inc()
	}
	l.entries[addr] = l.order.PushFront(&failEntry{addr: addr, start: now, n: 1})
}

// expire forgets, from the back, the addresses whose window has ended:
// the list is by window start, so they are all at the back.
func (l *failLimiter) expire(now time.Time) {
	for back := l.order.Back(); back != nil; back = l.order.Back() {
		e := back.Value.(*failEntry)
		if now.Before(e.start.Add(l.cfg.Window)) {
			return
		}
		l.order.Remove(back)
		delete(l.entries, e.addr)
	}
}

// tracked returns how many addresses are tracked (tests).
func (l *failLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.order.Len()
}

// ClientAddress returns the client address of a request from remoteAddr
// (the connection's peer, "ip:port" or an address) with header h: the
// peer itself, unless it is one of trusted; then the right-most
// X-Forwarded-For address that is not a trusted proxy (the left-most when
// all are; the last trusted hop when the next entry is no address). An
// untrusted peer's X-Forwarded-For is never read: anyone can write one.
// ok is false when remoteAddr is no IP address.
func ClientAddress(remoteAddr string, h http.Header, trusted []netip.Prefix) (netip.Addr, bool) {
	peer, ok := parseHostAddr(remoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !isTrusted(peer, trusted) {
		return peer, true
	}
	var hops []string
	for _, v := range h.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHostAddr(strings.TrimSpace(hops[i]))
		if !ok {
			return client, true
		}
		client = a
		if !isTrusted(a, trusted) {
			return a, true
		}
	}
	return client, true
}

// parseHostAddr parses "ip", "ip:port" or "[ipv6]:port", IPv4-mapped
// addresses unmapped and an IPv6 zone dropped: net/http gives a
// link-local peer as "[fe80::1%eth0]:443", and netip.Prefix.Contains
// never matches a zoned address, so a trusted link-local proxy would go
// untrusted and all its clients be counted as one.
func parseHostAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// limitKey is the address the limiter counts a client under: an IPv4
// address, or an IPv6 address's /64, since a single host is commonly given
// a whole /64 and could otherwise spread its guesses over 2^64 addresses.
func limitKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().Addr()
	}
	return a
}

// presentsCredential reports whether h carries a credential header.
func presentsCredential(h http.Header) bool {
	return len(h.Values(HeaderAPIKey)) > 0 || len(h.Values("Authorization")) > 0
}

// admit is the limiter's decision on an attempt from remoteAddr (its
// headers h: X-Forwarded-For behind a trusted proxy): track is false when
// the limiter is off or the client's address unknown (the check runs
// alone); else key is the client's count and now its time, and wait > 0
// when the client is throttled for wait (counted as a throttled answer:
// the caller refuses it unchecked). An attempt not throttled is pending
// (failLimiter.enter): the caller checks it, then calls failLimiter.leave.
func (a *Auth) admit(h http.Header, remoteAddr string) (key netip.Addr, now time.Time, wait time.Duration, track bool) {
	l := a.limiter
	if l == nil {
		return netip.Addr{}, time.Time{}, 0, false
	}
	client, ok := ClientAddress(remoteAddr, h, l.cfg.TrustedProxies)
	if !ok {
		return netip.Addr{}, time.Time{}, 0, false
	}
	key = limitKey(client)
	if now, wait = l.enter(key, a.now); wait > 0 {
		l.throttled.Inc()
	}
	return key, now, wait, true
}

// limited runs check, the authentication of h from remoteAddr, under the
// failure limiter: a credential from a throttled address is refused
// unchecked (ErrAuthThrottled, RetryAfter set), a refused one is counted
// against its address. Without a limiter, without a credential or without
// a known address, check runs alone.
func (a *Auth) limited(h http.Header, remoteAddr string, check func() (Principal, error)) (Principal, error) {
	if !presentsCredential(h) {
		return check()
	}
	key, now, wait, track := a.admit(h, remoteAddr)
	if !track {
		return check()
	}
	l := a.limiter
	if wait > 0 {
		e := &AuthError{Reason: "retry later",
			RetryAfter: wait, err: ErrAuthThrottled}
		if a.onFailure != nil {
			a.onFailure("", e.Reason)
		}
		return Principal{}, e
	}
	var err error
	// Only a credential that does not verify counts: a guess. A valid one
	// that may not be used (ErrForbidden: a disabled principal, a token
	// without the scope) is no guess, and its client must not be locked
	// out of what it may do. Deferred: a check that panics still ends.
	defer func() { l.leave(key, now, errors.Is(err, ErrUnauthenticated)) }()
	var p Principal
	p, err = check()
	return p, err
}

// limitedIssue runs issue, the client credentials grant of a request from
// remoteAddr (its headers h), under the failure limiter as limited runs an
// authentication: a throttled address gets 429 with Retry-After in hdr
// unchecked (RFC 6749 has no such error: "slow_down" is the device flow's,
// so the code is the limiter's), and a grant refused invalid_client (a
// client secret that does not verify) counts against its address.
func (a *Auth) limitedIssue(hdr, h http.Header, remoteAddr string, issue func() (TokenResponse, error)) (TokenResponse, error) {
	key, now, wait, track := a.admit(h, remoteAddr)
	if !track {
		return issue()
	}
	l := a.limiter
	if wait > 0 {
		hdr.Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
		return TokenResponse{}, oauthErr(http.StatusTooManyRequests, "too_many_requests",
			"too many failed client authentications from this address: retry after the Retry-After seconds")
	}
	var err error
	defer func() {
		var oe *OAuthError
		l.leave(key, now, errors.As(err, &oe) && oe.Code == "invalid_client")
	}()
	var resp TokenResponse
	resp, err = issue()
	return resp, err
}

// retryAfterSeconds is d in whole seconds, rounded up, at least 1 (the
// Retry-After header's unit).
func retryAfterSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// ThrottledRefusal is the answer to an authentication the failure limiter
// refused (err wraps ErrAuthThrottled): 429 with Retry-After set in h, the
// rate limit's code and its JSON-RPC error (jsonrpc.CodeRateLimited, the
// 429 body as data), RetryAfter for a gRPC status's RetryInfo. ok is false
// for any other error.
func ThrottledRefusal(h http.Header, err error) (f host.Refusal, ok bool) {
	var ae *AuthError
	if !errors.Is(err, ErrAuthThrottled) || !errors.As(err, &ae) {
		return host.Refusal{}, false
	}
	secs := retryAfterSeconds(ae.RetryAfter)
	h.Set("Retry-After", strconv.Itoa(secs))
	msg := "too many failed authentications from this client address; retry in " + strconv.Itoa(secs) + " s"
	return host.Refusal{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded", Message: msg, Retryable: true,
		RPCCode: jsonrpc.CodeRateLimited, RetryAfter: time.Duration(secs) * time.Second,
		Data: RateLimitExceeded{Error: "Too many failed authentications", Message: msg, RetryAfter: secs, Retryable: true}}, true
}

// peerAddr is the address of a gRPC call's peer ("" when unknown), the
// client address of its authentication (Auth.AuthenticateFrom).
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
