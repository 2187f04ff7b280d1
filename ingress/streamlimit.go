package ingress

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// DefaultMaxStreamsPerPrincipal is a suggested bound on concurrent streams
// (SSE / NDJSON answers) of one principal on one replica.
const DefaultMaxStreamsPerPrincipal = 16

// StreamLimiter bounds the concurrent streams of each principal ON THIS
// REPLICA: an in-process counter map, so with N replicas behind a load
// balancer a principal may hold up to N × max streams. That is deliberate:
// a stream holds this replica's resources (a connection, goroutines,
// buffers), and a shared count in KV would leak slots whenever a replica
// dies mid-stream unless every slot were a lease renewed by heartbeats — a
// KV write per stream per few seconds for little gain. It is safe for
// concurrent use; the zero value and a nil *StreamLimiter are unlimited.
type StreamLimiter struct {
	max    int
	mu     sync.Mutex
	active map[string]int
	// ended, when someone waits for streams to end (WaitIdle), is
	// broadcast at every release.
	ended *sync.Cond
}

// NewStreamLimiter returns a limiter allowing max concurrent streams per
// principal (max <= 0: unlimited).
func NewStreamLimiter(max int) *StreamLimiter {
	return &StreamLimiter{max: max, active: map[string]int{}}
}

// Max returns the per-principal bound (0: unlimited).
func (s *StreamLimiter) Max() int {
	if s == nil || s.max < 0 {
		return 0
	}
	return s.max
}

// AcquireStream takes a stream slot of principal. When ok, call release
// exactly when the stream ends (calling it more than once is harmless).
// When not ok, answer 429 (see WriteTooManyStreams) or, on a JSON-RPC
// endpoint, StreamLimitRPCError.
func (s *StreamLimiter) AcquireStream(principal string) (release func(), ok bool) {
	if s == nil || s.max <= 0 {
		return func() {}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		s.active = map[string]int{}
	}
	if s.active[principal] >= s.max {
		return func() {}, false
	}
	s.active[principal]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.active[principal] <= 1 {
				delete(s.active, principal)
			} else {
				s.active[principal]--
			}
			if s.ended != nil {
				s.ended.Broadcast()
			}
		})
	}, true
}

// Active returns the streams principal holds on this replica.
func (s *StreamLimiter) Active(principal string) int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[principal]
}

// Total returns the streams held on this replica (for a gauge).
func (s *StreamLimiter) Total() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totalLocked()
}

func (s *StreamLimiter) totalLocked() int {
	n := 0
	for _, c := range s.active {
		n += c
	}
	return n
}

// WaitIdle waits until no stream holds a slot on this replica (every
// stream has ended), or ctx ends (its error then): a drain, and the way a
// test waits for a stream to give its slot back.
func (s *StreamLimiter) WaitIdle(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended == nil {
		s.ended = sync.NewCond(&s.mu)
	}
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.ended.Broadcast()
	})
	defer stop()
	for s.totalLocked() != 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.ended.Wait()
	}
	return nil
}

// StreamLimitBody is the 429 body for too many concurrent streams, in the
// shape of the rate limit body, its retry_after host.TooManyStreams's wait.
func (s *StreamLimiter) StreamLimitBody() RateLimitExceeded {
	return RateLimitExceeded{
		Error:      "Too many concurrent streams",
		Message:    fmt.Sprintf("Too many concurrent streams: at most %d per principal", s.Max()),
		RetryAfter: int(host.TooManyStreams.RetryAfterSeconds()),
		Retryable:  true,
	}
}

// WriteTooManyStreams writes the whole 429 answer, host.TooManyStreams's
// wait as Retry-After (Refusal.SetRetryAfter: unless w has one already).
func (s *StreamLimiter) WriteTooManyStreams(w http.ResponseWriter) {
	host.TooManyStreams.SetRetryAfter(w.Header())
	writeJSON(w, http.StatusTooManyRequests, s.StreamLimitBody())
}

// StreamLimitRPCError is the JSON-RPC error for too many concurrent
// streams (code jsonrpc.CodeRateLimited).
func (s *StreamLimiter) StreamLimitRPCError() *Error {
	b := s.StreamLimitBody()
	return &Error{Code: jsonrpc.CodeRateLimited, Message: b.Message, Data: b}
}
