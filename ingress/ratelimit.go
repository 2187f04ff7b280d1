package ingress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Rate limits per principal, per minute, hour and day (a2e-workflow-protocol
// "Rate Limiting"), shared by every ingress replica through the JetStream KV
// bucket E2A_RATELIMIT.
//
// Scheme: fixed windows aligned on the Unix epoch (UTC), with ONE key per
// principal ("p.<principal>") whose value holds the window index and count
// of all three windows, e.g. [[28333333,12],[472222,40],[19675,310]].
// A request reads the key (or uses the revision it wrote last), computes the
// next value and writes it with Update(revision) (compare-and-set); on a
// revision conflict it reads again and retries. Compared with one key per
// window and epoch bucket (<principal>.<window>.<bucket>), this
//   - costs one read and one write per request instead of three of each, and
//     one write when this replica wrote the key last (the common case: no
//     read at all);
//   - is atomic across the windows: a request refused by the day limit does
//     not consume minute quota, and no replica can see minute and hour
//     counts from different moments;
//   - bounds the bucket to one live subject per active principal instead of
//     three per principal per window period.
// A principal's budget of cancels (AllowCancel) is a second key of the
// same form, "c." and its key, counted by the same code with the minute
// window alone.
// Keys expire with the bucket's MaxAge (25 h, > the longest window), counted
// from their last write, so idle principals vanish. Requests of one
// principal on one replica are serialized (a mutex per principal), so CAS
// conflicts only happen between replicas. A principal that is over a limit
// is refused from the last known state without any KV round trip (counts
// never decrease within a window, so that state is a lower bound).
//
// Clock skew between replicas: a window index only moves forward: a replica
// whose clock is behind adopts the newer window a faster replica wrote.
//
// Fixed windows admit up to twice a limit across a window boundary; that is
// the usual trade-off for exact, cheap, shared counters and matches the
// X-RateLimit-Reset semantics of the specification.
//
// When the KV is unavailable (timeout, no quorum, connection closed) the
// limiter FAILS OPEN BY DEFAULT, to a per-replica local limiter: the same
// limits counted in this process from the last known state, so an abusive
// client is still bounded (by N replicas × the limit) while a KV outage does
// not turn into a full outage; decisions carry Degraded=true and the error
// hook is called. After a failure the KV is left alone for RetryAfterFailure
// (default 1 s) so requests do not each wait for a timeout. Rationale: rate
// limiting here protects capacity and fairness, not security; and when
// JetStream as a whole is down, publishing fails anyway and the client gets
// 503. Set FailClosed for deployments where the limit is a hard quota: Allow
// then returns an error wrapping ErrRateLimitUnavailable (answer 503 with
// Retry-After).

// Window names.
const (
	WindowMinute = "minute"
	WindowHour   = "hour"
	WindowDay    = "day"
)

// Default limits (a2e-workflow-protocol.md, Rate Limiting).
const (
	DefaultRequestsPerMinute = 60
	DefaultRequestsPerHour   = 1000
	DefaultRequestsPerDay    = 10000
)

var (
	// ErrRateLimitUnavailable is returned by a fail-closed Limiter when the
	// KV cannot be used: answer 503 with Retry-After.
	ErrRateLimitUnavailable = errors.New("ingress: rate limiter unavailable")
	// ErrRateLimitBucket reports a rate limit bucket whose configuration
	// cannot hold the day window.
	ErrRateLimitBucket = errors.New("ingress: rate limit bucket misconfigured")
)

var windowSizes = [3]int64{60, 3600, 86400}
var windowNames = [3]string{WindowMinute, WindowHour, WindowDay}

// RateLimits are the limits of a principal. 0 (or less) disables a window.
//
// The Bytes limits are a budget of request bytes per window: the size of
// the requests the principal had stored in E2A_REQUESTS (each message with
// its headers, as the stream counts it; a duplicate stores nothing). A
// request's size is known only once it is read and published, after the
// admission, so a request is refused once the bytes already stored in the
// window reach the budget: the request that crosses it is admitted whole,
// and the budget is exceeded by at most the requests in flight at that
// moment. Like the request limits, an exhausted budget refuses every call
// of the principal until its window resets, reads included.
type RateLimits struct {
	PerMinute int `json:"requests_per_minute"`
	PerHour   int `json:"requests_per_hour"`
	PerDay    int `json:"requests_per_day"`

	BytesPerMinute int64 `json:"request_bytes_per_minute,omitempty"`
	BytesPerHour   int64 `json:"request_bytes_per_hour,omitempty"`
	BytesPerDay    int64 `json:"request_bytes_per_day,omitempty"`
}

// DefaultRateLimits returns 60/minute, 1000/hour, 10000/day.
func DefaultRateLimits() RateLimits {
	return RateLimits{PerMinute: DefaultRequestsPerMinute, PerHour: DefaultRequestsPerHour, PerDay: DefaultRequestsPerDay}
}

func (r RateLimits) arr() [3]int { return [3]int{r.PerMinute, r.PerHour, r.PerDay} }

func (r RateLimits) bytesArr() [3]int64 {
	return [3]int64{r.BytesPerMinute, r.BytesPerHour, r.BytesPerDay}
}

func (r RateLimits) disabled() bool {
	return r.PerMinute <= 0 && r.PerHour <= 0 && r.PerDay <= 0 && !r.countsBytes()
}

// countsBytes reports whether a budget of request bytes applies.
func (r RateLimits) countsBytes() bool {
	return r.BytesPerMinute > 0 || r.BytesPerHour > 0 || r.BytesPerDay > 0
}

// negative reports whether any limit is negative.
func (r RateLimits) negative() bool {
	return r.PerMinute < 0 || r.PerHour < 0 || r.PerDay < 0 || r.BytesPerMinute < 0 || r.BytesPerHour < 0 || r.BytesPerDay < 0
}

// LimiterConfig configures a Limiter. Zero durations take the defaults.
type LimiterConfig struct {
	// Limits apply to every principal without an override.
	Limits RateLimits
	// Overrides are per-principal limits.
	Overrides map[string]RateLimits
	// FailClosed refuses requests (ErrRateLimitUnavailable) when the KV is
	// unavailable, instead of falling back to per-replica local limits.
	FailClosed bool
	// OpTimeout bounds the KV work of one Allow or Status. Default 250 ms.
	OpTimeout time.Duration
	// RetryAfterFailure is how long the KV is skipped after a failure.
	// Default 1 s.
	RetryAfterFailure time.Duration
	// MaxAttempts bounds compare-and-set attempts under contention; past it
	// the request is treated as if the KV were unavailable. Default 16.
	// Between attempts the replica waits a random time below 0.5 ms, then
	// 1 ms, 2 ms … (at most 16 ms): without it a replica that must re-read
	// the key before each write loses every race to one whose state is
	// fresh, and falls back although the KV is healthy.
	MaxAttempts int
	// MaxEntries bounds the per-principal state kept in memory; stale
	// entries are dropped beyond it. Default 100,000.
	MaxEntries int
	// CancelsPerMinute is each principal's budget of cancels (AllowCancel):
	// a cancel of its own request (A2A tasks/cancel, CancelTask, ACP
	// session/cancel) that its limits refuse is admitted on it, so that a
	// principal over its limit can still stop a runaway request. Counted
	// per fixed minute, shared like the limits (its own key in the
	// bucket); 0 turns it off (a cancel over the limit is refused as any
	// call). It applies to every principal whose limits apply.
	CancelsPerMinute int
}

// DefaultCancelsPerMinute is e2a's budget of cancels
// (E2A_RATE_LIMIT_CANCELS_PER_MINUTE, LimiterConfig.CancelsPerMinute):
// enough to stop a few runaway requests each minute, small beside any
// limit worth setting.
const DefaultCancelsPerMinute = 10

// Decision is the outcome of Allow for the binding window: the exceeded
// window with the latest reset when refused, the window with the fewest
// remaining requests when allowed.
type Decision struct {
	Allowed    bool
	Window     string // "minute", "hour" or "day"; "" when no limit applies
	Limit      int
	Remaining  int
	Reset      time.Time     // end of the binding window
	RetryAfter time.Duration // when refused: until Reset, at least 1 s
	// Degraded is true when the decision was taken by the local fallback
	// because the shared KV was unavailable.
	Degraded bool
	// Bytes is true when the refusal is the budget of request bytes's
	// (RateLimits.BytesPerMinute…): Limit is then that budget in bytes and
	// Remaining 0. An allowed decision always describes a request limit.
	Bytes bool
	// Cancels is true for a decision of the budget of cancels
	// (AllowCancel): Limit and Remaining count cancels.
	Cancels bool
}

// SetHeaders sets X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (Unix seconds), and Retry-After (seconds) when refused.
// It sets nothing when no limit applies. A refusal of the budget of
// request bytes (Bytes) sets X-RateLimit-Reset and Retry-After only: the
// other two count requests, and its body says the budget.
func (d Decision) SetHeaders(h http.Header) {
	if d.Window == "" {
		return
	}
	if !d.Bytes {
		h.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
	}
	h.Set("X-RateLimit-Reset", strconv.FormatInt(d.Reset.Unix(), 10))
	if !d.Allowed {
		h.Set("Retry-After", strconv.Itoa(d.retryAfterSeconds()))
	}
}

func (d Decision) retryAfterSeconds() int {
	s := int((d.RetryAfter + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// RateLimitExceeded is the 429 body of the specification:
// {"error":"Rate limit exceeded","message":"Rate limit exceeded: 60 requests per minute","retry_after":15},
// with the pipeline's retryable (true), which every other error object of
// the workflow API carries.
type RateLimitExceeded struct {
	Error      string `json:"error"`
	Message    string `json:"message"`
	RetryAfter int    `json:"retry_after"`
	Retryable  bool   `json:"retryable"`
}

// ExceededBody returns the 429 body for a refused decision.
func (d Decision) ExceededBody() RateLimitExceeded {
	return RateLimitExceeded{
		Error:      "Rate limit exceeded",
		Message:    "Rate limit exceeded: " + d.limitText(),
		RetryAfter: d.retryAfterSeconds(),
		Retryable:  true,
	}
}

// limitText is the refusing limit in words: "60 requests per minute",
// "1048576 request bytes per hour", "10 cancels per minute".
func (d Decision) limitText() string {
	unit := " requests per "
	switch {
	case d.Bytes:
		unit = " request bytes per "
	case d.Cancels:
		unit = " cancels per "
	}
	return strconv.Itoa(d.Limit) + unit + d.Window
}

// RPCError returns the JSON-RPC error for a refused decision: code
// jsonrpc.CodeRateLimited, the 429 body as data. Set the headers too (SetHeaders).
func (d Decision) RPCError() *Error {
	b := d.ExceededBody()
	return &Error{Code: jsonrpc.CodeRateLimited, Message: b.Message, Data: b}
}

// WriteRateLimited writes the whole 429 answer for a refused decision:
// headers and the specification's body.
func WriteRateLimited(w http.ResponseWriter, d Decision) {
	d.SetHeaders(w.Header())
	writeJSON(w, http.StatusTooManyRequests, d.ExceededBody())
}

// RateLimitStatus is the body of GET /api/v1/rate-limit/status. Maps are
// keyed like the specification's example (requests_per_minute,
// requests_last_minute, …) and list the enabled windows only. "Last minute"
// means the current fixed window; Reset holds each window's end (Unix s).
type RateLimitStatus struct {
	AgentID   string           `json:"agent_id"`
	Limits    map[string]int   `json:"limits"`
	Usage     map[string]int   `json:"usage"`
	Remaining map[string]int   `json:"remaining"`
	Reset     map[string]int64 `json:"reset"`
	Degraded  bool             `json:"degraded,omitempty"`
}

// rlState is the value of a principal's key: per window [index, count,
// bytes]. A value written before the budget of bytes ([index, count]) reads
// as no bytes.
type rlState [3][3]int64

// addBytes counts n request bytes in s at t (Unix seconds): in each
// window's current index, or in a later one another replica's clock
// wrote.
func (s *rlState) addBytes(t, n int64) {
	if n <= 0 {
		return
	}
	for i := range windowSizes {
		idx := floorDiv(t, windowSizes[i])
		switch {
		case s[i][0] >= idx:
			s[i][2] += n
		default:
			s[i] = [3]int64{idx, 0, n}
		}
	}
}

// rlEntry is this replica's view of a principal.
type rlEntry struct {
	mu    sync.Mutex
	state rlState
	rev   uint64 // KV revision state was read or written at; 0: none
	fresh bool   // state/rev are believed current: try Update without a read
	// pending are the request bytes charged here (ChargeBytes) and not yet
	// written to the KV: they are in state too, and are counted again in a
	// state read from the KV, until a write of this replica carries them.
	pending int64
}

// Limiter enforces RateLimits per principal. It is safe for concurrent use;
// create it with NewLimiter. Several Limiters (replicas) sharing a bucket
// share the limits.
type Limiter struct {
	kv        jetstream.KeyValue
	cfg       LimiterConfig
	now       func() time.Time
	onError   func(error)
	downUntil atomic.Int64 // unix nanos until which the KV is skipped

	mu      sync.Mutex
	entries map[string]*rlEntry
}

// LimiterOption configures a Limiter.
type LimiterOption func(*Limiter)

// WithLimiterClock sets the clock (tests).
func WithLimiterClock(now func() time.Time) LimiterOption { return func(l *Limiter) { l.now = now } }

// WithLimiterErrorHook calls f with every KV failure (for a log line or a
// metric); the limiter then fails open or closed as configured.
func WithLimiterErrorHook(f func(error)) LimiterOption { return func(l *Limiter) { l.onError = f } }

// NewLimiter returns a Limiter over kv (see EnsureRateLimitBucket). A nil
// kv gives a local-only limiter (per process; for single-process modes such
// as stdio and for tests).
func NewLimiter(kv jetstream.KeyValue, cfg LimiterConfig, opts ...LimiterOption) *Limiter {
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 250 * time.Millisecond
	}
	if cfg.RetryAfterFailure <= 0 {
		cfg.RetryAfterFailure = time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 16
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 100_000
	}
	l := &Limiter{kv: kv, cfg: cfg, now: time.Now, entries: map[string]*rlEntry{}}
	for _, o := range opts {
		if o != nil { // a nil option is none
			o(l)
		}
	}
	return l
}

// LimitsFor returns the limits of principal.
func (l *Limiter) LimitsFor(principal string) RateLimits {
	if r, ok := l.cfg.Overrides[principal]; ok {
		return r
	}
	return l.cfg.Limits
}

// rateLimitKey returns the KV key of a principal: "p." followed by the
// principal's subject token (itself when it matches [A-Za-z0-9_-]{1,64},
// else '=' and its base64url; see subjects.EncodeID), or "h." and the hex
// SHA-256 of principals too long to encode.
func rateLimitKey(principal string) string {
	if principal == "" {
		principal = DefaultAnonymousPrincipal
	}
	if len(principal) <= 256 {
		if tok, err := subjects.EncodeID(principal); err == nil {
			return "p." + tok
		}
	}
	sum := sha256.Sum256([]byte(principal))
	return "h." + hex.EncodeToString(sum[:])
}

func (l *Limiter) entry(key string) *rlEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[key]
	if !ok {
		if len(l.entries) >= l.cfg.MaxEntries {
			l.pruneLocked()
		}
		e = &rlEntry{}
		l.entries[key] = e
	}
	return e
}

// pruneLocked drops entries whose every window is over, then, if still
// full, arbitrary idle ones (their state is in the KV anyway, but for
// request bytes charged here and not written yet, which are then lost).
func (l *Limiter) pruneLocked() {
	day := l.now().Unix() / windowSizes[2]
	for k, e := range l.entries {
		if e.mu.TryLock() {
			if e.state[2][0] < day {
				delete(l.entries, k)
			}
			e.mu.Unlock()
		}
	}
	for k, e := range l.entries {
		if len(l.entries) < l.cfg.MaxEntries*3/4 {
			break
		}
		if e.mu.TryLock() {
			delete(l.entries, k)
			e.mu.Unlock()
		}
	}
}

// decide computes the decision for k more requests on s at now, all or
// none, and the state after counting them (valid only when allowed).
func decide(s rlState, now time.Time, limits RateLimits, k int) (Decision, rlState) {
	t := now.Unix()
	lim := limits.arr()
	blim := limits.bytesArr()
	var next rlState
	var d Decision
	d.Allowed = true
	best := -1
	bestRemaining := 0
	var worstExceededReset int64
	for i := range windowSizes {
		idx := floorDiv(t, windowSizes[i])
		n, b := int64(0), int64(0)
		if s[i][0] >= idx { // another replica's clock may be ahead: adopt its window
			idx, n, b = s[i][0], s[i][1], s[i][2]
		}
		next[i] = [3]int64{idx, n + int64(k), b}
		reset := (idx + 1) * windowSizes[i]
		if blim[i] > 0 && b >= blim[i] && (d.Allowed || reset > worstExceededReset) {
			// The budget of bytes is spent: refused whatever the request
			// limits say (b counts what is stored; this request's own
			// size is not known yet).
			worstExceededReset = reset
			d = Decision{Allowed: false, Window: windowNames[i], Limit: int(blim[i]), Reset: time.Unix(reset, 0), Bytes: true}
		}
		if lim[i] <= 0 {
			continue
		}
		if n+int64(k) > int64(lim[i]) {
			if d.Allowed || reset > worstExceededReset { // the first refusal, or the one that waits longest
				worstExceededReset = reset
				d = Decision{Allowed: false, Window: windowNames[i], Limit: lim[i], Remaining: max(0, lim[i]-int(n)), Reset: time.Unix(reset, 0)}
			}
			continue
		}
		if d.Allowed {
			rem := lim[i] - int(n) - k
			if best < 0 || rem < bestRemaining {
				best, bestRemaining = i, rem
				d = Decision{Allowed: true, Window: windowNames[i], Limit: lim[i], Remaining: rem, Reset: time.Unix(reset, 0)}
			}
		}
	}
	if !d.Allowed {
		d.RetryAfter = d.Reset.Sub(now)
		if d.RetryAfter < time.Second {
			d.RetryAfter = time.Second
		}
	}
	return d, next
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// Allow counts one request of principal and reports whether it may proceed.
// principal is Principal.UserID ("" is the anonymous principal). The error
// is non-nil only for a fail-closed Limiter whose KV is unavailable
// (ErrRateLimitUnavailable) or when ctx ended.
func (l *Limiter) Allow(ctx context.Context, principal string) (Decision, error) {
	return l.AllowN(ctx, principal, 1)
}

// AllowN counts n requests of principal (n ≥ 1; the elements of a JSON-RPC
// batch) all or none, in one compare-and-set: it reports whether all may
// proceed, and when they may not, none is counted, its Remaining saying
// how many would have fitted. Its errors are Allow's.
func (l *Limiter) AllowN(ctx context.Context, principal string, n int) (Decision, error) {
	limits := l.LimitsFor(principal)
	if limits.disabled() {
		return Decision{Allowed: true}, nil
	}
	return l.allow(ctx, rateLimitKey(principal), limits, max(n, 1))
}

// CancelsPerMinute is the budget of cancels of each principal
// (LimiterConfig.CancelsPerMinute); 0: none.
func (l *Limiter) CancelsPerMinute() int { return max(l.cfg.CancelsPerMinute, 0) }

// AllowCancel counts one cancel of principal against its budget of cancels
// (LimiterConfig.CancelsPerMinute), apart from its limits: the gate asks
// it for a cancel that Allow refused. Its decision has Cancels set; with
// no budget it refuses (Window ""). The budget is counted in the
// principal's key prefixed "c." in the same bucket, per fixed minute,
// shared by the replicas as the limits are; its errors are Allow's.
func (l *Limiter) AllowCancel(ctx context.Context, principal string) (Decision, error) {
	n := l.CancelsPerMinute()
	if n == 0 {
		return Decision{Cancels: true}, nil
	}
	d, err := l.allow(ctx, cancelKey(principal), RateLimits{PerMinute: n}, 1)
	d.Cancels = true
	return d, err
}

// cancelKey is the KV key of principal's budget of cancels: its
// rateLimitKey prefixed "c.".
func cancelKey(principal string) string { return "c." + rateLimitKey(principal) }

// allow counts n requests under key against limits, all or none (AllowN).
func (l *Limiter) allow(ctx context.Context, key string, limits RateLimits, n int) (Decision, error) {
	e := l.entry(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := l.now()

	// Over a limit by the last known state (a lower bound): refuse at once,
	// but write the bytes charged here first (other replicas then refuse
	// too).
	if d, _ := decide(e.state, now, limits, n); !d.Allowed && (e.pending == 0 || l.kv == nil || l.kvSkipped(now)) {
		return d, nil
	}
	if l.kv == nil {
		d, next := decide(e.state, now, limits, n)
		if d.Allowed {
			e.state = next
		}
		return d, nil
	}
	if l.kvSkipped(now) {
		return l.fallback(e, now, limits, n, nil)
	}
	opCtx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	var lastErr error
	for attempt := 0; attempt < l.cfg.MaxAttempts; attempt++ {
		if !e.fresh {
			if err := l.load(opCtx, key, e); err != nil {
				if ctx.Err() != nil {
					return Decision{}, ctx.Err()
				}
				return l.fallback(e, now, limits, n, err)
			}
		}
		d, next := decide(e.state, now, limits, n)
		if !d.Allowed {
			if e.pending == 0 {
				return d, nil
			}
			next = e.state // the bytes charged here written, no request counted
		}
		val, _ := json.Marshal(next)
		var rev uint64
		var err error
		if e.rev == 0 {
			rev, err = l.kv.Create(opCtx, key, val)
		} else {
			rev, err = l.kv.Update(opCtx, key, val, e.rev)
		}
		if err == nil {
			e.state, e.rev, e.fresh, e.pending = next, rev, true, 0
			return d, nil
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			e.fresh = false // another replica wrote: read and retry
			lastErr = err
			if err := casBackoff(opCtx, attempt); err != nil {
				if ctx.Err() != nil {
					return Decision{}, ctx.Err()
				}
				return l.fallback(e, now, limits, n, fmt.Errorf("%w after %d compare-and-set conflicts", err, attempt+1))
			}
			continue
		}
		if ctx.Err() != nil {
			return Decision{}, ctx.Err()
		}
		return l.fallback(e, now, limits, n, err)
	}
	return l.fallback(e, now, limits, n, fmt.Errorf("%d compare-and-set conflicts in a row: %w", l.cfg.MaxAttempts, lastErr))
}

// casBackoff waits a random time below 0.5 ms × 2^attempt (capped at
// 16 ms) or until ctx ends, so that contending replicas stop colliding in
// lock step.
func casBackoff(ctx context.Context, attempt int) error {
	ceiling := 500 * time.Microsecond << min(attempt, 5)
	return sleepctx.Sleep(ctx, rand.N(ceiling))
}

// load reads the principal's key into e, with the bytes charged here and
// not written yet (rlEntry.pending) counted again.
func (l *Limiter) load(ctx context.Context, key string, e *rlEntry) error {
	ent, err := l.kv.Get(ctx, key)
	var s rlState
	var rev uint64
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return err
	default:
		if json.Unmarshal(ent.Value(), &s) != nil {
			s = rlState{} // unreadable value: start over, overwrite it at its revision
		}
		rev = ent.Revision()
	}
	if e.pending > 0 {
		s.addBytes(l.now().Unix(), e.pending)
	}
	e.state, e.rev, e.fresh = s, rev, true
	return nil
}

// ChargeBytes counts n request bytes the principal had stored (a request
// admitted by Allow, then published) against its budget of request bytes
// (RateLimits.BytesPerMinute…); nothing when no budget applies to it. It
// costs no KV round trip: the bytes are written with the principal's next
// request on this replica (Allow's write), and refuse its requests here at
// once when they spend the budget.
func (l *Limiter) ChargeBytes(principal string, n int64) {
	if n <= 0 || !l.LimitsFor(principal).countsBytes() {
		return
	}
	e := l.entry(rateLimitKey(principal))
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state.addBytes(l.now().Unix(), n)
	if l.kv != nil {
		e.pending += n
	}
}

func (l *Limiter) kvSkipped(now time.Time) bool { return now.UnixNano() < l.downUntil.Load() }

// fallback decides n requests without the KV (err: the failure, nil when
// the KV is being skipped after an earlier one).
func (l *Limiter) fallback(e *rlEntry, now time.Time, limits RateLimits, n int, err error) (Decision, error) {
	if err != nil {
		l.downUntil.Store(now.Add(l.cfg.RetryAfterFailure).UnixNano())
		if l.onError != nil {
			l.onError(fmt.Errorf("%w: %w", ErrRateLimitUnavailable, err))
		}
	}
	if l.cfg.FailClosed {
		d := Decision{Allowed: false, Degraded: true, RetryAfter: time.Second}
		if err == nil {
			err = errors.New("KV skipped after a recent failure")
		}
		return d, fmt.Errorf("%w: %w", ErrRateLimitUnavailable, err)
	}
	d, next := decide(e.state, now, limits, n)
	d.Degraded = true
	if d.Allowed {
		// Counted locally; the KV value is read again once it is back.
		e.state, e.fresh = next, false
	}
	return d, nil
}

// pendingBytes are the request bytes of the principal of key charged here
// and not written to the KV yet (rlEntry.pending).
func (l *Limiter) pendingBytes(key string) int64 {
	l.mu.Lock()
	e := l.entries[key]
	l.mu.Unlock()
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pending
}

// Status returns the limits, usage and remaining requests (and request
// bytes, where a budget of them applies) of principal without counting a
// request. When the KV is unavailable it reports this
// replica's last known state with Degraded set (fail-open), or returns an
// error wrapping ErrRateLimitUnavailable (fail-closed).
func (l *Limiter) Status(ctx context.Context, principal string) (RateLimitStatus, error) {
	if principal == "" {
		principal = DefaultAnonymousPrincipal
	}
	limits := l.LimitsFor(principal)
	st := RateLimitStatus{AgentID: principal, Limits: map[string]int{}, Usage: map[string]int{}, Remaining: map[string]int{}, Reset: map[string]int64{}}
	if limits.disabled() {
		return st, nil
	}
	key := rateLimitKey(principal)
	now := l.now()
	var s rlState
	degraded := false
	var kvErr error
	switch {
	case l.kv == nil:
		e := l.entry(key)
		e.mu.Lock()
		s = e.state
		e.mu.Unlock()
	case l.kvSkipped(now):
		degraded = true
	default:
		opCtx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
		ent, err := l.kv.Get(opCtx, key)
		cancel()
		switch {
		case err == nil:
			_ = json.Unmarshal(ent.Value(), &s)
			s.addBytes(now.Unix(), l.pendingBytes(key))
		case errors.Is(err, jetstream.ErrKeyNotFound):
			s.addBytes(now.Unix(), l.pendingBytes(key))
		case ctx.Err() != nil:
			return st, ctx.Err()
		default:
			degraded, kvErr = true, err
			l.downUntil.Store(now.Add(l.cfg.RetryAfterFailure).UnixNano())
			if l.onError != nil {
				l.onError(fmt.Errorf("%w: %w", ErrRateLimitUnavailable, err))
			}
		}
	}
	if degraded {
		if l.cfg.FailClosed {
			if kvErr == nil {
				kvErr = errors.New("KV skipped after a recent failure")
			}
			return st, fmt.Errorf("%w: %w", ErrRateLimitUnavailable, kvErr)
		}
		e := l.entry(key)
		e.mu.Lock()
		s = e.state
		e.mu.Unlock()
		st.Degraded = true
	}
	t := now.Unix()
	blim := limits.bytesArr()
	for i, lim := range limits.arr() {
		idx := floorDiv(t, windowSizes[i])
		n, b := 0, 0
		if s[i][0] >= idx {
			idx, n, b = s[i][0], int(s[i][1]), int(s[i][2])
		}
		name := windowNames[i]
		reset := (idx + 1) * windowSizes[i]
		if lim > 0 {
			st.Limits["requests_per_"+name] = lim
			st.Usage["requests_last_"+name] = n
			st.Remaining["requests_per_"+name] = max(lim-n, 0)
			st.Reset["requests_per_"+name] = reset
		}
		if bl := int(blim[i]); bl > 0 {
			st.Limits["request_bytes_per_"+name] = bl
			st.Usage["request_bytes_last_"+name] = b
			st.Remaining["request_bytes_per_"+name] = max(bl-b, 0)
			st.Reset["request_bytes_per_"+name] = reset
		}
	}
	return st, nil
}
