package workflow

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/retryafter"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// Clock is the executor's time source: Wait, retry backoff, cache TTLs and
// the execution budget use it, so tests run on a fake clock.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done (returning ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx is done.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return sleepctx.Sleep(ctx, d)
}

// RetryPolicy is the automatic retry of ApiCall (spec §10).
type RetryPolicy struct {
	MaxRetries   int           // default 3
	InitialDelay time.Duration // default 1 s
	MaxDelay     time.Duration // default 60 s
	Multiplier   float64       // default 2
	// Jitter spreads each delay uniformly over [d/2, d] ("equal jitter")
	// so that many clients do not retry in step.
	Jitter bool
	// Rand returns a number in [0, 1); nil uses math/rand/v2.
	Rand func() float64
}

// DefaultRetryPolicy is the spec's policy: 3 retries, 1 s, base 2, at most
// 60 s, with jitter.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxRetries: 3, InitialDelay: time.Second, MaxDelay: time.Minute, Multiplier: 2, Jitter: true}
}

// Delay returns the wait before retry number attempt (0-based: the wait
// after the first failure is Delay(0)).
func (p RetryPolicy) Delay(attempt int) time.Duration {
	d := float64(p.InitialDelay) * math.Pow(p.Multiplier, float64(attempt))
	if d > float64(p.MaxDelay) || math.IsInf(d, 0) {
		d = float64(p.MaxDelay)
	}
	if p.Jitter {
		r := p.Rand
		if r == nil {
			r = rand.Float64
		}
		d = d/2 + r()*d/2
	}
	return time.Duration(d)
}

// httpStatusError is a non-2xx answer.
type httpStatusError struct {
	status     int
	retryAfter time.Duration
}

func (e *httpStatusError) Error() string { return "HTTP " + strconv.Itoa(e.status) }

// retryableStatus: 5xx, 408 and 429.
func retryableStatus(code int) bool {
	return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

// classify tells whether a failed attempt may be retried: connection
// errors, timeouts, 5xx, 408 and 429 may; permission errors, other 4xx,
// oversize responses and a cancelled execution may not.
func classify(err error, parent context.Context) bool {
	if err == nil || parent.Err() != nil {
		return false
	}
	var we *Error
	if errors.As(err, &we) {
		return we.Retryable
	}
	var se *httpStatusError
	if errors.As(err, &se) {
		return retryableStatus(se.status)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true // the attempt's own timeout; the parent is alive
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return de.IsTemporary || de.IsTimeout || !de.IsNotFound
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, errUnexpectedEOF) {
		return true
	}
	return isConnError(err)
}

// parseRetryAfter reads a Retry-After header (internal/retryafter: seconds
// or an HTTP date; 0 when absent, unreadable or past).
func parseRetryAfter(h string, now time.Time) time.Duration {
	d, _ := retryafter.Parse(h, now)
	return d
}

// CallLimiter limits ApiCall attempts per principal (spec §9: API calls
// per minute and per hour). It is consulted before every HTTP attempt.
type CallLimiter interface {
	// AllowCall records one call for principal, or refuses it and tells
	// when to try again.
	AllowCall(ctx context.Context, principal string) (ok bool, retryAfter time.Duration, err error)
}

// WindowLimiter is an in-process CallLimiter with sliding minute and hour
// windows: at most PerMinute calls in any 60 s and PerHour in any hour (a
// fixed window would let twice the limit through across its boundary: 30
// calls at 0:59 and 30 more at 1:00). It keeps each active principal's call
// times (at most PerHour of them). It is per process: with N workers a
// principal may make up to N times the limit; plug a shared limiter (e.g.
// the ingress's KV limiter) through [Options.Limiter] for a global bound.
type WindowLimiter struct {
	PerMinute, PerHour int
	Clock              Clock

	mu sync.Mutex
	m  map[string]*callLog
}

// callLog is a principal's call times, oldest first, within the hour.
type callLog struct{ t []time.Time }

// NewWindowLimiter returns a limiter with the spec's defaults when the
// arguments are 0 or negative (30 per minute, 500 per hour).
func NewWindowLimiter(perMinute, perHour int, clock Clock) *WindowLimiter {
	if perMinute <= 0 { // a negative limit is none set: the spec's, never no limit
		perMinute = 30
	}
	if perHour <= 0 {
		perHour = 500
	}
	if clock == nil {
		clock = RealClock{}
	}
	return &WindowLimiter{PerMinute: perMinute, PerHour: perHour, Clock: clock, m: map[string]*callLog{}}
}

// AllowCall implements CallLimiter.
func (l *WindowLimiter) AllowCall(_ context.Context, principal string) (bool, time.Duration, error) {
	now := l.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) > 100000 { // forget idle principals
		for k, c := range l.m {
			if n := len(c.t); n == 0 || now.Sub(c.t[n-1]) >= time.Hour {
				delete(l.m, k)
			}
		}
	}
	c := l.m[principal]
	if c == nil {
		c = &callLog{}
		l.m[principal] = c
	}
	i := 0
	for i < len(c.t) && now.Sub(c.t[i]) >= time.Hour {
		i++
	}
	c.t = c.t[i:]
	// until: when a call may be made again under a window of size w and limit n
	until := func(w time.Duration, n int) time.Duration {
		if n <= 0 {
			return 0
		}
		in := 0
		for j := len(c.t) - 1; j >= 0 && now.Sub(c.t[j]) < w; j-- {
			in++
		}
		if in < n {
			return 0
		}
		// the n-th most recent call must leave the window
		return c.t[len(c.t)-n].Add(w).Sub(now)
	}
	if d := max(until(time.Hour, l.PerHour), until(time.Minute, l.PerMinute)); d > 0 {
		return false, d, nil
	}
	c.t = append(c.t, now)
	return true, 0, nil
}
