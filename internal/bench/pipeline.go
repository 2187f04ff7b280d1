package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/streams"
)

// PipelineOptions configure an in-process pipeline.
type PipelineOptions struct {
	// StoreDir of the embedded server; empty: a temporary directory.
	StoreDir string
	// SyncAlways fsyncs every JetStream write (production setting).
	SyncAlways bool
	// AgentConcurrency is the bench agent pool's concurrency.
	AgentConcurrency int
	// Frames, FrameBytes and Delay configure the bench agent.
	Frames, FrameBytes int
	Delay              time.Duration
	// SplitConns gives the agent pool its own NATS connection (e2a dev
	// shares one connection between every stage).
	SplitConns bool
	// TCP connects the stages over the loopback TCP listener, as they
	// connect to a NATS cluster in a deployment, instead of in process
	// (nats.InProcessServer, a synchronous net.Pipe, as e2a dev does).
	// e2a bench sets it unless --tcp=false.
	TCP bool
	// NoAudit deletes E2A_AUDIT after provisioning: an experiment that
	// measures what sourcing every message into the audit stream costs.
	NoAudit bool
	// Console runs the web console's indexer beside the stages, as `e2a
	// dev` does (its index bucket is provisioned with the streams).
	Console bool
	// Archive runs the archiver (package archive) beside the stages, as
	// `e2a dev` does.
	Archive bool
	// Retention, when positive, is the hot streams' max age
	// (RequestsMaxAge, ResponsesMaxAge) and the task index's TTL (TasksTTL:
	// an A2A task's record, one subject per task, would otherwise stay
	// 72 h); the dedupe window is cut to it when longer. It is how long a
	// request keeps its subjects in the embedded server, hence its memory
	// (docs/capacity.md, Memory). Zero keeps the defaults (24 h, bounded by
	// the streams' bytes).
	Retention time.Duration
	// NATSURL, when set, is a JetStream server the stages connect to (over
	// TCP; the streams are provisioned on it as on the embedded one)
	// instead of one embedded in this process: a deployment's shape, where
	// the server's heap, collections and CPU are not the stages'. StoreDir
	// and SyncAlways are the server's business then. The E2A streams are
	// created or updated on it with the bench's settings (one replica), so
	// it must be a server of the bench's own.
	NATSURL string
	// Workers, when positive, runs that many workers of the bench pool,
	// each on a NATS connection of its own with the worker id w0, w1, …
	// (Pipeline.Workers), instead of one on AgentNC: a worker can then be
	// killed alone (its connection closed) while the others go on.
	Workers int
	// AckWait is the pool's AckWait (agent.WithAckWait); zero: the agent
	// runtime's default.
	AckWait time.Duration
	// Log receives the stages' logs (default: discarded).
	Log *slog.Logger
}

// Pipeline is every stage in this process, as `e2a dev` runs it: an
// embedded JetStream server with the E2A streams, ingress and egress on one
// HTTP server on a loopback port, and the bench agent pool.
type Pipeline struct {
	Embedded *streams.Embedded
	// NC is the in-process connection of ingress and egress.
	NC *nats.Conn
	// AgentNC is the agent pool's connection (NC unless SplitConns).
	AgentNC *nats.Conn
	// URL is the base URL of the HTTP server.
	URL string
	// Workers are the connections of the pool's workers with
	// PipelineOptions.Workers (worker i has id "w<i>"); closing one kills
	// that worker as a crash would: no drain, no last frame.
	Workers []*nats.Conn

	srv       *http.Server
	ln        net.Listener
	cancel    context.CancelFunc
	agentDone chan error
	agents    int // agent.Run calls that report on agentDone
	egress    *egress.Service
}

// StartPipeline starts an in-process pipeline.
func StartPipeline(ctx context.Context, o PipelineOptions) (_ *Pipeline, err error) {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.AgentConcurrency <= 0 {
		o.AgentConcurrency = 256
	}
	p := &Pipeline{}
	defer func() { // p, not the result, which a failed return sets to nil
		if err != nil {
			p.Close()
		}
	}()
	if o.NATSURL == "" {
		if p.Embedded, err = streams.StartEmbedded(streams.EmbeddedOptions{StoreDir: o.StoreDir, SyncAlways: o.SyncAlways}); err != nil {
			return nil, err
		}
	}
	if err := p.connect(ctx, o); err != nil {
		return nil, err
	}
	js, err := jetstream.New(p.NC)
	if err != nil {
		return nil, err
	}
	cfg, err := provision(ctx, js, o)
	if err != nil {
		return nil, err
	}
	reg := obs.NewRegistry()
	rctx, err := p.serve(o, cfg, reg)
	if err != nil {
		return nil, err
	}
	h := Agent(o.Frames, o.FrameBytes, o.Delay)
	opts := []agent.Option{agent.WithConcurrency(o.AgentConcurrency),
		agent.WithMaxAckPending(max(o.AgentConcurrency, agent.DefaultMaxAckPending)), agent.WithLogger(o.Log)}
	if o.AckWait > 0 {
		opts = append(opts, agent.WithAckWait(o.AckWait))
	}
	if o.Workers <= 0 {
		p.startAgents(rctx, h, []*nats.Conn{p.AgentNC}, func(int) []agent.Option { return append(slices.Clip(opts), agent.WithMetrics(reg)) })
	} else {
		for i := range o.Workers {
			nc, err := p.dial(ctx, o, "bench-agent-"+workerID(i))
			if err != nil {
				return nil, err
			}
			p.Workers = append(p.Workers, nc)
		}
		// No metrics: the collectors of one pool cannot be registered
		// twice in one registry.
		p.startAgents(rctx, h, p.Workers, func(i int) []agent.Option {
			return append(slices.Clip(opts), agent.WithWorkerID(workerID(i)))
		})
	}
	if err := waitConsumer(ctx, js, Pool); err != nil {
		return nil, err
	}
	return p, nil
}

// connect opens the stages' connection to the embedded server (and the
// agent pool's own with SplitConns), over TCP or in process, or to
// o.NATSURL.
func (p *Pipeline) connect(ctx context.Context, o PipelineOptions) error {
	var err error
	if p.NC, err = p.dial(ctx, o, "bench-http"); err != nil {
		return err
	}
	p.AgentNC = p.NC
	if o.SplitConns {
		if p.AgentNC, err = p.dial(ctx, o, "bench-agent"); err != nil {
			return err
		}
	}
	return nil
}

// startAgents runs a worker of the bench pool on each connection, with
// optsOf(i) for the i-th.
func (p *Pipeline) startAgents(ctx context.Context, h agent.Handler, conns []*nats.Conn, optsOf func(int) []agent.Option) {
	p.agents = len(conns)
	p.agentDone = make(chan error, len(conns))
	for i, nc := range conns {
		opts := optsOf(i)
		go func() { p.agentDone <- agent.Run(ctx, nc, Pool, h, opts...) }()
	}
}

// dial opens one named connection to the embedded server (over TCP or in
// process) or to o.NATSURL.
func (p *Pipeline) dial(ctx context.Context, o PipelineOptions, name string) (*nats.Conn, error) {
	if o.NATSURL != "" {
		return streams.Connect(ctx, streams.ConnConfig{NatsURL: o.NATSURL, Name: name})
	}
	if o.TCP {
		return nats.Connect(p.Embedded.ClientURL(), nats.Name(name))
	}
	return p.Embedded.Connect(nats.Name(name))
}

// provision creates the E2A streams of one replica (the console's index
// with Console; E2A_AUDIT deleted with NoAudit) and returns their
// configuration.
func provision(ctx context.Context, js jetstream.JetStream, o PipelineOptions) (streams.Config, error) {
	cfg := streams.DefaultConfig()
	cfg.Replicas = 1
	if o.Retention > 0 {
		cfg.RequestsMaxAge, cfg.ResponsesMaxAge, cfg.TasksTTL = o.Retention, o.Retention, o.Retention
		cfg.Duplicates = min(cfg.Duplicates, o.Retention)
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var applyOpts []streams.ApplyOption
	if o.Console {
		applyOpts = append(applyOpts, streams.WithStream(console.IndexStreamConfig(cfg, 0)))
	}
	if rep, err := streams.Apply(actx, js, cfg, applyOpts...); err != nil {
		return cfg, fmt.Errorf("bench: provision streams: %w\n%s", err, rep)
	}
	if o.NoAudit {
		if err := js.DeleteStream(actx, streams.AuditStream); err != nil {
			return cfg, fmt.Errorf("bench: delete %s: %w", streams.AuditStream, err)
		}
	}
	return cfg, nil
}

// serve starts egress, ingress (and the console with Console, the
// archiver with Archive) on one HTTP
// server on a loopback port; rctx is the stages' context, which Close
// cancels.
func (p *Pipeline) serve(o PipelineOptions, cfg streams.Config, reg *prometheus.Registry) (rctx context.Context, err error) {
	p.egress, err = egress.New(p.NC, egress.WithRegisterer(reg), egress.WithLogger(o.Log), egress.WithProjections(protocols.FillProjections))
	if err != nil {
		return nil, err
	}
	in, err := ingress.New(p.NC, p.egress, ingress.WithDefaultPool(Pool), ingress.WithRegisterer(reg), ingress.WithLogger(o.Log))
	if err != nil {
		return nil, err
	}
	rctx, rcancel := context.WithCancel(context.Background())
	p.cancel = rcancel
	if o.Console {
		if _, err := console.New(rctx, p.NC, p.egress, console.WithStreamsConfig(cfg), console.WithRegisterer(reg),
			console.WithGatherer(reg), console.WithLogger(o.Log)); err != nil {
			return nil, err
		}
	}
	if o.Archive {
		go func() {
			if err := archive.Run(rctx, p.NC, archive.WithRegisterer(reg), archive.WithLogger(o.Log)); err != nil {
				o.Log.Error("archiver stopped", "err", err)
			}
		}()
	}
	mux := http.NewServeMux()
	in.Register(mux)
	p.egress.Register(mux)
	obs.Register(mux, reg, obs.NATSConnected(p.NC))
	p.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return rctx },
		ErrorLog:          slogToLog(o.Log),
	}
	if p.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	p.URL = "http://" + p.ln.Addr().String()
	go func() { _ = p.srv.Serve(p.ln) }()
	return rctx, nil
}

// waitConsumer waits until pool's consumer exists, so that the first
// requests do not wait for the pool to start.
func waitConsumer(ctx context.Context, js jetstream.JetStream, pool string) error {
	name, err := streams.AgentConsumerName(pool)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_, err := js.Consumer(c, streams.RequestsStream, name)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("bench: agent consumer %s: %w", name, errors.Join(err, ctx.Err()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// subjects sums the distinct subjects of every stream (KV buckets
// included) of the embedded server; 0 when they cannot be listed.
func (p *Pipeline) subjects(ctx context.Context) uint64 {
	js, err := jetstream.New(p.NC)
	if err != nil {
		return 0
	}
	var n uint64
	l := js.ListStreams(ctx)
	for si := range l.Info() {
		n += si.State.NumSubjects
	}
	if l.Err() != nil {
		return 0
	}
	return n
}

// Close stops every stage and the server.
func (p *Pipeline) Close() {
	if p.cancel != nil {
		p.cancel()
	}
	if p.srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = p.srv.Shutdown(sctx)
		cancel()
	}
	if p.agentDone != nil {
		deadline := time.After(30 * time.Second)
	wait:
		for range p.agents {
			select {
			case <-p.agentDone:
			case <-deadline:
				break wait
			}
		}
	}
	for _, nc := range p.Workers {
		nc.Close()
	}
	if p.egress != nil {
		p.egress.Close()
	}
	if p.AgentNC != nil && p.AgentNC != p.NC {
		p.AgentNC.Close()
	}
	if p.NC != nil {
		p.NC.Close()
	}
	if p.Embedded != nil {
		p.Embedded.Shutdown()
	}
}

func slogToLog(l *slog.Logger) *log.Logger { return slog.NewLogLogger(l.Handler(), slog.LevelWarn) }
