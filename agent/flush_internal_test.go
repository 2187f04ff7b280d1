package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestFlushSubscriptionsRidesOutALostConnection: the connection is lost
// while the worker's set-up flush waits for the server's answer (the
// proxy holds it, then cuts): nats.go ends that flush with
// ErrConnectionClosed although it reconnects; flushSubscriptions flushes
// again and returns nil once the connection is back. A bare
// FlushWithContext (the worker's set-up before) fails the same way.
func TestFlushSubscriptionsRidesOutALostConnection(t *testing.T) {
	srv, _ := natstest.RunServer(t)
	for _, c := range []struct {
		name  string
		flush func(context.Context, *nats.Conn) error
		ok    bool
	}{
		{"bare flush", func(ctx context.Context, nc *nats.Conn) error { return nc.FlushWithContext(ctx) }, false},
		{"flushSubscriptions", flushSubscriptions, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := natstest.NewProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
			nc, err := nats.Connect(p.URL(), nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			p.Hold()
			done := make(chan error, 1)
			go func() { done <- c.flush(ctx, nc) }()
			testkit.Eventually(t, 5*time.Second, "the flush's PING held at the proxy", func() bool { return p.Held() > 0 })
			p.Cut()
			p.Heal()
			err = testkit.Receive(t, done, 10*time.Second, "the flush's end")
			if c.ok && err != nil {
				t.Fatalf("flush across a lost connection: %v, want nil once reconnected", err)
			}
			if !c.ok && !errors.Is(err, nats.ErrConnectionClosed) {
				t.Fatalf("bare flush across a lost connection: %v, want nats.ErrConnectionClosed (what flushSubscriptions rides out)", err)
			}
			if c.ok && !nc.IsConnected() {
				t.Fatalf("connection %v after the flush", nc.Status())
			}
		})
	}
}
