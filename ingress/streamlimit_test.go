package ingress

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

func TestStreamLimitPerPrincipal(t *testing.T) {
	s := NewStreamLimiter(2)
	r1, ok1 := s.AcquireStream("alice")
	r2, ok2 := s.AcquireStream("alice")
	_, ok3 := s.AcquireStream("alice")
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("acquire: %v %v %v", ok1, ok2, ok3)
	}
	if rb, ok := s.AcquireStream("bob"); !ok {
		t.Fatal("bob refused")
	} else {
		rb()
	}
	if s.Active("alice") != 2 || s.Total() != 2 {
		t.Fatalf("active %d total %d", s.Active("alice"), s.Total())
	}
	r1()
	r1() // idempotent
	if s.Active("alice") != 1 {
		t.Fatalf("double release counted: %d", s.Active("alice"))
	}
	r4, ok := s.AcquireStream("alice")
	if !ok {
		t.Fatal("slot not freed")
	}
	r2()
	r4()
	if s.Total() != 0 || len(s.active) != 0 {
		t.Fatalf("leak: %v", s.active)
	}

	var unlimited *StreamLimiter
	if rel, ok := unlimited.AcquireStream("x"); !ok {
		t.Fatal("nil limiter refused")
	} else {
		rel()
	}
	if rel, ok := NewStreamLimiter(0).AcquireStream("x"); !ok {
		t.Fatal("unlimited refused")
	} else {
		rel()
	}

	rec := httptest.NewRecorder()
	s.WriteTooManyStreams(rec)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "at most 2 per principal") {
		t.Fatalf("429: %d %s", rec.Code, rec.Body)
	}
	if e := s.StreamLimitRPCError(); e.Code != jsonrpc.CodeRateLimited {
		t.Fatal(e)
	}
}

func TestStreamLimitConcurrent(t *testing.T) {
	s := NewStreamLimiter(5)
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				rel, ok := s.AcquireStream("p")
				if !ok {
					continue
				}
				n := held.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				held.Add(-1)
				rel()
			}
		}()
	}
	wg.Wait()
	if peak.Load() > 5 || s.Total() != 0 {
		t.Fatalf("peak %d total %d", peak.Load(), s.Total())
	}
}

// TestStreamLimitWaitIdle: WaitIdle returns once the last slot is released
// (not before), at once when none is held, and with ctx's error when ctx
// ends first.
func TestStreamLimitWaitIdle(t *testing.T) {
	s := NewStreamLimiter(2)
	if err := s.WaitIdle(context.Background()); err != nil {
		t.Fatalf("idle limiter: %v", err)
	}
	r1, _ := s.AcquireStream("alice")
	r2, _ := s.AcquireStream("bob")
	done := make(chan error, 1)
	go func() { done <- s.WaitIdle(context.Background()) }()
	r1()
	select {
	case err := <-done:
		t.Fatalf("returned with a slot held: %v", err)
	default:
	}
	r2()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r3, _ := s.AcquireStream("alice")
	defer r3()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.WaitIdle(ctx); err != context.Canceled {
		t.Fatalf("ended ctx: %v", err)
	}
}

// TestStreamLimitRendersRefusalsWait: the limiter's 429 (and its JSON-RPC
// error) says host.TooManyStreams's own wait, as every door does: made
// 3 s, Retry-After: 3 and retry_after 3 (it said 1 by hand, whatever the
// refusal's wait). The test runs alone: it changes a refusal every door
// renders.
func TestStreamLimitRendersRefusalsWait(t *testing.T) {
	was := host.TooManyStreams.RetryAfter
	host.TooManyStreams.RetryAfter = 3 * time.Second
	t.Cleanup(func() { host.TooManyStreams.RetryAfter = was })
	s := NewStreamLimiter(1)
	rec := httptest.NewRecorder()
	s.WriteTooManyStreams(rec)
	var body RateLimitExceeded
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 429 || rec.Header().Get("Retry-After") != "3" || body.RetryAfter != 3 || !body.Retryable {
		t.Errorf("429: %d Retry-After %q %s (%v), want the refusal's 3 s, retryable", rec.Code, rec.Header().Get("Retry-After"), rec.Body, err)
	}
	if d, ok := s.StreamLimitRPCError().Data.(RateLimitExceeded); !ok || d.RetryAfter != 3 || !d.Retryable {
		t.Errorf("JSON-RPC error data %+v, want retry_after 3, retryable", s.StreamLimitRPCError().Data)
	}
}
