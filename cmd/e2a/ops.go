package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// newOpsMux returns the operations endpoints (/metrics, /healthz, /readyz)
// of a process, mounted on mux by mountOps; /readyz checks the connection
// and need, details are added to it.
func newOpsMux(reg *prometheus.Registry, nc *nats.Conn, js jetstream.JetStream, need readyNeeds, details ...obs.Detail) *http.ServeMux {
	mux := http.NewServeMux()
	obs.RegisterWithDetails(mux, reg, details, need.checks(nc, js)...)
	return mux
}

// readyCacheTTL is how long an answer of a JetStream readiness check is
// kept (obs.Cached): Kubernetes asks every 5 s, anyone may ask /readyz,
// and the cluster answers each check at most once per TTL per process.
const readyCacheTTL = 2 * time.Second

// readyNeeds is what a process needs in order to serve, which its /readyz
// checks (one stream or consumer info each, cached): a stream, bucket or
// durable consumer deleted under a running process is not made again by
// it, and it would report ready while it fails or pulls nothing. Each is
// named in the answer's failures when missing. One JetStream cannot answer
// (no quorum, no answer) leaves the process ready, degraded (obs.Degraded):
// every replica meets that alike, and answers it with retryable refusals. Every check here is one
// the process's NATS user may make (deploy/nats/accounts.conf: STREAM.INFO
// of the E2A streams and buckets, CONSUMER.INFO of its own consumers).
type readyNeeds struct {
	streams   []string
	buckets   []string
	consumers []consumerRef
}

// consumerRef names a durable consumer on a stream.
type consumerRef struct{ stream, name string }

// with is n and m together.
func (n readyNeeds) with(m readyNeeds) readyNeeds {
	return readyNeeds{streams: append(slices.Clone(n.streams), m.streams...), buckets: append(slices.Clone(n.buckets), m.buckets...),
		consumers: append(slices.Clone(n.consumers), m.consumers...)}
}

// checks are NATSConnected and one cached check per distinct need.
func (n readyNeeds) checks(nc *nats.Conn, js jetstream.JetStream) []obs.Check {
	checks := []obs.Check{obs.NATSConnected(nc)}
	seen := map[string]bool{}
	add := func(key string, c obs.Check) {
		if !seen[key] {
			seen[key] = true
			checks = append(checks, obs.Cached(readyCacheTTL, c))
		}
	}
	for _, s := range n.streams {
		add("stream "+s, obs.StreamPresent(js, s))
	}
	for _, b := range n.buckets {
		add("bucket "+b, obs.BucketPresent(js, b))
	}
	for _, c := range n.consumers {
		add("consumer "+c.stream+" "+c.name, obs.ConsumerPresent(js, c.stream, c.name))
	}
	return checks
}

// coreNeeds are the streams every stage but the archiver reads or writes:
// E2A_REQUESTS and E2A_RESPONSES.
func coreNeeds() readyNeeds {
	return readyNeeds{streams: []string{streams.RequestsStream, streams.ResponsesStream}}
}

// serveNeeds is what ingress and egress (e2a serve, e2a dev) use per
// request: the core streams, E2A_CONTROL (cancels), E2A_TASKS (task and
// context records), E2A_RATELIMIT when a rate limit is set, E2A_PUSH unless
// E2A_PUSH=off, and the push stage's needs when it runs here. The console's
// E2A_INDEX is left out: the console's index is best effort, and the API
// serves without it.
func serveNeeds(cfg Config) (readyNeeds, error) {
	n := coreNeeds().with(readyNeeds{streams: []string{streams.ControlStream}, buckets: []string{streams.TasksBucket}})
	if rateLimited(cfg) {
		n.buckets = append(n.buckets, streams.RateLimitBucket)
	}
	pe, _, err := pushOptions(cfg, false, nil, nil)
	if err != nil {
		return n, err
	}
	switch pe.mode() {
	case pushOn:
		n = n.with(pushStageNeeds())
	case pushAPI:
		n.buckets = append(n.buckets, streams.PushBucket)
	}
	return n, nil
}

// pushStageNeeds is what the push stage reads and writes: the core
// streams, E2A_PUSH_DEAD, the bucket E2A_PUSH and its two durable
// consumers (push on E2A_RESPONSES, push-wake on KV_E2A_PUSH), which the
// stage makes at start-up only.
func pushStageNeeds() readyNeeds {
	return coreNeeds().with(readyNeeds{streams: []string{streams.PushDeadStream}, buckets: []string{streams.PushBucket},
		consumers: []consumerRef{{streams.ResponsesStream, push.DefaultConsumer},
			{streams.KVStream(streams.PushBucket), push.WakeConsumer(push.DefaultConsumer)}}})
}

// agentNeeds is what a worker of pool needs: the core streams, its
// pool's durable consumer (agent-<pool> on E2A_REQUESTS, which the runtime
// makes at start-up only: deleted, the worker pulls nothing and says
// nothing above debug), and the buckets its handler opened at start-up (a
// bridge's E2A_BRIDGE, the workflow pool's A2E_LOCAL and A2E_SESSION).
// The pool's name was checked before (checkPoolFlag).
func agentNeeds(pool string, bridged bool) readyNeeds {
	consumer, _ := streams.AgentConsumerName(pool)
	n := coreNeeds().with(readyNeeds{consumers: []consumerRef{{streams.RequestsStream, consumer}}})
	switch {
	case bridged:
		n.buckets = []string{streams.BridgeBucket}
	case pool == workflow.Pool:
		n.buckets = []string{streams.WorkflowLocalBucket, streams.WorkflowSessionBucket}
	}
	return n
}

// archiveNeeds are the archiver's streams: E2A_AUDIT, which it reads (with
// an ordered consumer, made again by nats.go when it is lost), and
// E2A_ARCHIVE, which it writes. runArchive adds the archiver's own check
// (archive.Health: not stalled), which no stream's presence tells.
func archiveNeeds() readyNeeds {
	return readyNeeds{streams: []string{streams.AuditStream, streams.ArchiveStream}}
}

// mountOps mounts ops's /healthz and /readyz on mux, and /metrics too
// unless E2A_METRICS_ADDR gives the metrics their own listener (see
// serveMetrics), so that they need not be public.
func mountOps(mux *http.ServeMux, cfg Config, ops http.Handler) {
	mux.Handle("GET /healthz", ops)
	mux.Handle("GET /readyz", ops)
	if cfg.MetricsAddr == "" {
		mux.Handle("GET /metrics", ops)
	}
}

// serveMetrics serves /metrics alone on E2A_METRICS_ADDR, when it is set,
// until ctx ends or the returned stop is called; it returns the listener's
// address ("" when unset).
func serveMetrics(ctx context.Context, cfg Config, reg *prometheus.Registry, log *slog.Logger) (addr string, stop func(), err error) {
	if cfg.MetricsAddr == "" {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return "", nil, fmt.Errorf("listen on E2A_METRICS_ADDR=%s: %w", cfg.MetricsAddr, err)
	}
	ops := http.NewServeMux()
	obs.Register(ops, reg)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", ops)
	// Go's profiles, on this private listener only (never on E2A_HTTP_ADDR):
	// heap and CPU profiles of a running stage, for capacity work.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	srv := newOpsServer(ctx, mux)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener failed", "addr", ln.Addr().String(), "err", err)
		}
	}()
	log.Info("metrics served", "addr", ln.Addr().String())
	return ln.Addr().String(), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

func newOpsServer(ctx context.Context, h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
}

// warnBodyLimit warns when E2A_MAX_BODY_BYTES exceeds the max_payload of
// the NATS server nc is on: bodies between the two are refused with 413
// (their envelope cannot be published), so one of the two settings should
// change.
func warnBodyLimit(cfg Config, nc *nats.Conn, log *slog.Logger) {
	mp := nc.MaxPayload()
	if mp <= 0 || cfg.MaxBodyBytes <= mp {
		return
	}
	log.Warn(fmt.Sprintf("E2A_MAX_BODY_BYTES (%d) exceeds the NATS server's max_payload (%d): requests whose envelope is larger than max_payload are refused with 413. "+
		"Set E2A_MAX_BODY_BYTES below max_payload (the envelope adds about 1 KiB to a body, more with long ids), or raise max_payload in every NATS server's configuration", cfg.MaxBodyBytes, mp),
		"max_body_bytes", cfg.MaxBodyBytes, "nats_max_payload", mp)
}

// processLogger is the process's logger (obs.NewLogger on stderr, in
// E2A_LOG_FORMAT at E2A_LOG_LEVEL), made slog's default too: code that
// logs through slog.Default (the A2A renderers' warnings about an
// unreadable frame, a bridge built without a logger) and the standard
// log package write in the same format and through the same redaction.
// The standard log package's lines come at Error: they are net/http's
// (a handler's panic with its stack, TLS handshake and accept errors),
// which any E2A_LOG_LEVEL must show.
func processLogger(cfg Config) (*slog.Logger, error) {
	log, err := obs.NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	slog.SetDefault(log)
	slog.SetLogLoggerLevel(slog.LevelError)
	return log, nil
}

// startStage is how a stage process (serve, agent, push, archive) starts: its logger,
// the GC target and memory limit notes (logMemoryLimit), tracing as service, and the NATS connection
// (E2A_NATS_URL, or the embedded server), whose events ev logs and counts
// (newRegistry(ev) exposes them); stop closes the connection, then
// tracing.
func startStage(ctx context.Context, cfg Config, service string) (log *slog.Logger, nc *nats.Conn, ev *streams.ConnEvents, stop func(), err error) {
	log, err = processLogger(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if pct := gcDefault(); pct > 0 {
		log.Debug("GC target (GOGC unset)", "GOGC", pct)
	}
	logMemoryLimit(cfg, log)
	stopTracing, err := startTracing(ctx, log, service)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ev = streams.NewConnEvents(log)
	nc, stopNATS, url, err := connectOrEmbed(ctx, cfg, log, ev, false)
	if err != nil {
		stopTracing()
		return nil, nil, nil, nil, err
	}
	if cfg.NatsURL == "" {
		// A pool started beside `e2a dev` without its URL serves a server
		// of its own, which no client reaches: said once, at start.
		log.Warn("no E2A_NATS_URL: this process runs its own embedded NATS server, which no other process uses; "+
			"set E2A_NATS_URL to the URL `e2a dev` printed (or a cluster's) to serve that pipeline", "nats", url)
	}
	return log, nc, ev, func() { stopNATS(); stopTracing() }, nil
}

// newRegistry is obs.NewRegistry with the counts of the process's NATS
// connection events (e2a_nats_connection_events_total).
func newRegistry(ev *streams.ConnEvents) *prometheus.Registry {
	reg := obs.NewRegistry()
	reg.MustRegister(obs.NATSConnEvents(ev))
	return reg
}

// startNATSStage is startStage for a stage that only runs against a NATS
// server of its own (serve, push, archive): without E2A_NATS_URL it fails
// with "<stage> needs E2A_NATS_URL (<embedded>)", embedded saying how e2a
// dev runs it instead. It returns the stage's metrics registry too.
func startNATSStage(ctx context.Context, cfg Config, stage, embedded string) (log *slog.Logger, nc *nats.Conn, reg *prometheus.Registry, stop func(), err error) {
	if cfg.NatsURL == "" {
		return nil, nil, nil, nil, fmt.Errorf("%s needs E2A_NATS_URL (%s)", stage, embedded)
	}
	log, nc, ev, stop, err := startStage(ctx, cfg, "e2a-"+stage)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return log, nc, newRegistry(ev), stop, nil
}

// serveOps serves a stage's operations mux (/healthz, /readyz, /metrics)
// on E2A_HTTP_ADDR, and /metrics on E2A_METRICS_ADDR when set, while run
// runs the stage, until ctx ends or run returns (serveUntil). msg and
// args are the log line saying the stage runs; its "ops" address is
// added.
func serveOps(ctx context.Context, cfg Config, mux http.Handler, reg *prometheus.Registry, log *slog.Logger, run func() error, msg string, args ...any) error {
	o, err := listenOps(ctx, cfg, reg, log)
	if err != nil {
		return err
	}
	defer o.close()
	return o.serve(ctx, cfg, mux, log, run, msg, args...)
}

// opsListeners are a stage's operations listeners, open before the stage
// does anything others see (a bridge pool's card published): a port
// taken then stops the process with nothing left behind.
type opsListeners struct {
	ln          net.Listener
	stopMetrics func()
}

// listenOps opens E2A_METRICS_ADDR (serving /metrics at once) and
// E2A_HTTP_ADDR; close them with close when serve is not called.
func listenOps(ctx context.Context, cfg Config, reg *prometheus.Registry, log *slog.Logger) (*opsListeners, error) {
	_, stopMetrics, err := serveMetrics(ctx, cfg, reg, log)
	if err != nil {
		return nil, err
	}
	ln, err := listenHTTP(cfg.HTTPAddr)
	if err != nil {
		stopMetrics()
		return nil, err
	}
	return &opsListeners{ln: ln, stopMetrics: stopMetrics}, nil
}

// close stops the metrics listener and closes the operations one (which
// serve's server closes itself: closing it again is harmless).
func (o *opsListeners) close() {
	o.stopMetrics()
	_ = o.ln.Close()
}

// serve is serveOps on the listeners o. Once the stage stops (ctx ends),
// the operations listener stays open until run has returned: /metrics
// and /healthz are served through the stage's drain (an agent's
// in-flight requests, for up to E2A_AGENT_DRAIN_TIMEOUT), so that
// Prometheus reads the drain's counters, and /readyz answers 503
// {"status":"stopping"}. (It closed as the drain began: the drain's
// metrics were never scraped unless E2A_METRICS_ADDR served them.)
func (o *opsListeners) serve(ctx context.Context, cfg Config, mux http.Handler, log *slog.Logger, run func() error, msg string, args ...any) error {
	var stopping atomic.Bool
	srv := newOpsServer(ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() && r.URL.Path == "/readyz" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"status":"stopping"}`+"\n")
			return
		}
		mux.ServeHTTP(w, r)
	}))
	done := make(chan error, 1)
	go func() { done <- run() }()
	log.Info(msg, append(args, "ops", o.ln.Addr().String())...)
	return serveUntil(ctx, srv, o.ln, log, done, 1, cfg.AgentDrainTimeout, func() { stopping.Store(true) })
}
