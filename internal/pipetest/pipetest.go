package pipetest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// Pipeline is a running pipeline.
type Pipeline struct {
	URL      string // the HTTP front door (ingress and egress)
	GRPCAddr string // the A2A v1.0 gRPC binding ("" unless WithGRPC)
	NC       *nats.Conn
	JS       jetstream.JetStream
	Ingress  *ingress.Server
	Registry *prometheus.Registry
	ctx      context.Context
	t        testing.TB
}

type options struct {
	grpc      bool
	egress    []egress.Option
	ingress   []ingress.Option
	nc        *nats.Conn
	push      bool
	pushHosts []string
}

// Option configures Start.
type Option func(*options)

// WithGRPC serves the A2A v1.0 gRPC binding too (listed in the card).
func WithGRPC() Option { return func(o *options) { o.grpc = true } }

// WithIngress adds ingress options (auth, limits).
func WithIngress(opts ...ingress.Option) Option {
	return func(o *options) { o.ingress = append(o.ingress, opts...) }
}

// WithEgress adds egress options (write timeout, wait limits).
func WithEgress(opts ...egress.Option) Option {
	return func(o *options) { o.egress = append(o.egress, opts...) }
}

// WithPush keeps push configs (ingress.WithPushStore) and runs the push
// stage beside the pipeline until the test ends; hosts are allow-listed
// for webhooks (push.WithAllowHosts: a test's receiver on loopback).
func WithPush(hosts ...string) Option {
	return func(o *options) { o.push, o.pushHosts = true, hosts }
}

// WithConn uses an existing connection (a server the test started)
// instead of a new embedded server.
func WithConn(nc *nats.Conn) Option { return func(o *options) { o.nc = nc } }

// Start starts the pipeline; everything stops at the test's cleanup.
func Start(t testing.TB, opts ...Option) *Pipeline {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	nc := o.nc
	if nc == nil {
		_, nc = natstest.RunServer(t)
	}
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	inOpts := append([]ingress.Option{ingress.WithRegisterer(reg)}, o.ingress...)
	if o.push {
		inOpts = append(inOpts, ingress.WithPushStore(startPush(t, ctx, nc, o.pushHosts)))
	}
	var grpcLn net.Listener
	if o.grpc {
		var err error
		if grpcLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		inOpts = append(inOpts, ingress.WithA2AGRPCAddress(grpcLn.Addr().String()))
	}
	f := ServeFront(t, nc, append([]egress.Option{egress.WithRegisterer(reg), egress.WithProjections(protocols.FillProjections)}, o.egress...), inOpts...)
	p := &Pipeline{URL: f.URL, NC: nc, JS: natstest.JetStream(t, nc), Ingress: f.Ingress, Registry: reg, ctx: ctx, t: t}
	if grpcLn != nil {
		gs := f.Ingress.A2AGRPC()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := gs.Serve(grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				t.Errorf("gRPC: %v", err)
			}
		}()
		t.Cleanup(func() { gs.Stop(); <-done })
		p.GRPCAddr = grpcLn.Addr().String()
	}
	return p
}

// Front is ingress and egress served together over HTTP, as e2a serve
// serves them.
type Front struct {
	URL     string
	Server  *httptest.Server
	Ingress *ingress.Server
	Egress  *egress.Service
}

// ServeFront starts egress on nc with eopts and ingress on nc with iopts,
// and serves both on a loopback HTTP server until the test ends.
func ServeFront(t testing.TB, nc *nats.Conn, eopts []egress.Option, iopts ...ingress.Option) *Front {
	t.Helper()
	return ServeFrontWrapped(t, nc, nil, eopts, iopts...)
}

// ServeFrontWrapped is ServeFront with the routes wrapped by wrap (nil:
// none), as a process wraps them (tracing.Handler, say).
func ServeFrontWrapped(t testing.TB, nc *nats.Conn, wrap func(http.Handler) http.Handler, eopts []egress.Option, iopts ...ingress.Option) *Front {
	t.Helper()
	eg, err := egress.New(nc, eopts...)
	if err != nil {
		t.Fatal(err)
	}
	in, err := ingress.New(nc, eg, iopts...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	eg.Register(mux)
	h := ingress.CleanPaths(mux) // as a process serves the routes
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Front{URL: srv.URL, Server: srv, Ingress: in, Egress: eg}
}

// startPush opens the push config store and runs the push stage until
// ctx ends (the test's cleanup waits for it).
func startPush(t testing.TB, ctx context.Context, nc *nats.Conn, hosts []string) *push.Store {
	t.Helper()
	store, err := push.NewStore(ctx, nc, push.WithAllowHosts(hosts...))
	if err != nil {
		t.Fatal(err)
	}
	turns, err := ingress.NewTaskTurns(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- push.Run(ctx, nc, push.WithAllowHosts(hosts...), push.WithTaskTurns(turns))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("push stage: %v", err)
		}
	})
	return store
}

// Pool serves pool with h until the test ends (or the returned stop is
// called, which waits for agent.Run to return), and returns once the pool's
// consumer exists (so a request's pool check finds it). Options are
// agent.Run's.
func (p *Pipeline) Pool(pool string, h agent.Handler, opts ...agent.Option) (stop func()) {
	p.t.Helper()
	ctx, cancel := context.WithCancel(p.ctx)
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx, p.NC, pool, h, opts...) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			p.t.Errorf("agent pool %s: %v", pool, err)
		}
	}
	p.t.Cleanup(stop)
	name, err := streams.AgentConsumerName(pool)
	if err != nil {
		p.t.Fatal(err)
	}
	testkit.Eventually(p.t, 30*time.Second, "the consumer of pool "+pool, func() bool {
		_, err := p.JS.Consumer(ctx, streams.RequestsStream, name)
		return err == nil
	})
	return stop
}
