package audit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// This file is in package audit so that its tests of the tailer's insides
// cut a connection too; the tests of package audit_test use it as well.

// Proxied is a NATS server with a connection to it through a
// natstest.Proxy that reconnects for ever, as `e2a tail`'s does.
type Proxied struct {
	JS    jetstream.JetStream
	NC    *nats.Conn // direct
	TNC   *nats.Conn // through the proxy
	proxy *natstest.Proxy
	disc  chan struct{}
	reco  chan struct{}
}

// NewProxied starts the server and connects through the proxy.
func NewProxied(t *testing.T) *Proxied {
	t.Helper()
	srv, nc := natstest.RunServer(t)
	px := natstest.NewProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	p := &Proxied{JS: natstest.JetStream(t, nc), NC: nc, proxy: px, disc: make(chan struct{}, 4), reco: make(chan struct{}, 4)}
	var err error
	p.TNC, err = nats.Connect(px.URL(), nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1),
		nats.ReconnectJitter(0, 0),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { p.disc <- struct{}{} }),
		nats.ReconnectHandler(func(*nats.Conn) { p.reco <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.TNC.Close)
	return p
}

// Cut cuts the proxied connection and waits for it to see so.
func (p *Proxied) Cut(t *testing.T) {
	t.Helper()
	p.proxy.Cut()
	waitSignal(t, p.disc, "tail's connection disconnected")
}

// Restore lets the proxied connection in again and waits for it to
// reconnect.
func (p *Proxied) Restore(t *testing.T) {
	t.Helper()
	p.proxy.Heal()
	waitSignal(t, p.reco, "tail's connection reconnected")
}

func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("not " + what)
	}
}

// newProxiedAuditor is a Proxied with an Auditor on its proxied connection
// with call timeout d (a short one: a read during a cut gives up at once)
// and the live feed (liveFeed) on its direct one.
func newProxiedAuditor(ctx context.Context, t *testing.T, d time.Duration) (*Proxied, *Auditor, <-chan *nats.Msg) {
	t.Helper()
	p := NewProxied(t)
	a, err := New(p.TNC, WithCallTimeout(d))
	if err != nil {
		t.Fatal(err)
	}
	return p, a, liveFeed(ctx, t, p.NC)
}
