package egress

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestOptionsRefuseBadValues checks that every exported option refuses its
// bad values with ErrInvalidOption: the Service's options through New, the
// reader's through Open and through New's WithReplayOptions. WithMaxWait,
// WithWaitLimits and WithoutRequestCheck have no bad value (every duration
// of the first two has a meaning).
func TestOptionsRefuseBadValues(t *testing.T) {
	_, nc := natstest.RunServer(t)
	beat := func() error { return nil }
	replay := map[string]ReplayOption{
		"streams with a dot":     WithStreams("E2A.RESPONSES", ""),
		"streams with a space":   WithStreams("", "E2A REQUESTS"),
		"streams with wildcard":  WithStreams("E2A_*", ""),
		"negative batch":         WithBatch(-1, 0),
		"negative batch bytes":   WithBatch(0, -1),
		"zero live buffer":       WithLiveBuffer(0),
		"negative live buffer":   WithLiveBuffer(-4),
		"zero live bytes":        WithLiveBytes(0),
		"zero heartbeat":         WithHeartbeat(0, beat),
		"negative heartbeat":     WithHeartbeat(-time.Second, beat),
		"nil heartbeat func":     WithHeartbeat(time.Second, nil),
		"zero poll interval":     WithPollInterval(0),
		"negative poll interval": WithPollInterval(-time.Second),
		"nil replay option":      nil,
	}
	for name, o := range replay {
		t.Run("Open/"+name, func(t *testing.T) {
			r, err := Open(context.Background(), nc, "req_opts", 0, o)
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("Open: %v, want ErrInvalidOption", err)
			}
			if r != nil {
				t.Fatal("a reader despite the error")
			}
		})
		t.Run("WithReplayOptions/"+name, func(t *testing.T) {
			if _, err := New(nc, WithReplayOptions(o)); !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("New: %v, want ErrInvalidOption", err)
			}
		})
	}
	service := map[string]Option{
		"nil authorizer":            WithAuthorizer(nil),
		"nil registerer":            WithRegisterer(nil),
		"nil logger":                WithLogger(nil),
		"zero heartbeat interval":   WithHeartbeatInterval(0),
		"negative heartbeat":        WithHeartbeatInterval(-time.Second),
		"negative SSE retry":        WithSSERetry(-time.Millisecond),
		"zero write timeout":        WithWriteTimeout(0),
		"negative write timeout":    WithWriteTimeout(-time.Second),
		"zero cancel wait":          WithCancelWait(0),
		"negative cancel wait":      WithCancelWait(-time.Second),
		"nil option":                nil,
		"bad replay option":         WithReplayOptions(WithLiveBuffer(0)),
		"nil option in replay ones": WithReplayOptions(WithLiveBuffer(1), nil),
		"nil projections":           WithProjections(nil),
	}
	for name, o := range service {
		t.Run("New/"+name, func(t *testing.T) {
			if s, err := New(nc, o); !errors.Is(err, ErrInvalidOption) || s != nil {
				t.Fatalf("New: %v, want ErrInvalidOption", err)
			}
		})
	}
}

// TestOptionsAcceptGoodValues checks the documented edge values still
// work: zero keeps a default where the option says so, a negative wait
// means no limit, and a retry of 0 announces none.
func TestOptionsAcceptGoodValues(t *testing.T) {
	_, nc := natstest.RunServer(t)
	s, err := New(nc,
		WithAuthorizer(func(*http.Request) (tenant.Principal, error) { return tenant.Principal{}, nil }),
		WithSSERetry(0), WithWaitLimits(0, -1), WithWriteTimeout(time.Second), WithCancelWait(time.Second),
		WithHeartbeatInterval(time.Second),
		WithReplayOptions(WithStreams("", ""), WithBatch(0, 0), WithLiveBuffer(1), WithPollInterval(time.Second),
			WithMaxWait(0, -1), WithHeartbeat(time.Second, func() error { return nil }), WithoutRequestCheck()))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.Close()
	if s.live.liveBuffer != 1 {
		t.Fatalf("live buffer %d, want 1", s.live.liveBuffer)
	}
	if s.cfg.maxWait != DefaultMaxWait || s.cfg.idleTimeout != -1 || s.cfg.retry != 0 {
		t.Fatalf("waits %v %v, retry %v", s.cfg.maxWait, s.cfg.idleTimeout, s.cfg.retry)
	}
}
