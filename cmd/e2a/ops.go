package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/streams"
)

// newOpsMux returns the operations endpoints (/metrics, /healthz, /readyz)
// of a process, mounted on mux by mountOps; details are added to /readyz.
func newOpsMux(reg *prometheus.Registry, nc *nats.Conn, js jetstream.JetStream, details ...obs.Detail) *http.ServeMux {
	mux := http.NewServeMux()
	obs.RegisterWithDetails(mux, reg, details, obs.NATSConnected(nc), obs.StreamsPresent(js, streams.RequestsStream, streams.ResponsesStream))
	return mux
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
// the GC target note, tracing as service, and the NATS connection
// (E2A_NATS_URL, or the embedded server); stop closes the connection,
// then tracing.
func startStage(ctx context.Context, cfg Config, service string) (log *slog.Logger, nc *nats.Conn, stop func(), err error) {
	log, err = processLogger(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if pct := gcDefault(); pct > 0 {
		log.Debug("GC target (GOGC unset)", "GOGC", pct)
	}
	stopTracing, err := startTracing(ctx, log, service)
	if err != nil {
		return nil, nil, nil, err
	}
	nc, stopNATS, _, err := connectOrEmbed(ctx, cfg, log)
	if err != nil {
		stopTracing()
		return nil, nil, nil, err
	}
	return log, nc, func() { stopNATS(); stopTracing() }, nil
}

// startNATSStage is startStage for a stage that only runs against a NATS
// server of its own (serve, push, archive): without E2A_NATS_URL it fails
// with "<stage> needs E2A_NATS_URL (<embedded>)", embedded saying how e2a
// dev runs it instead. It returns the stage's metrics registry too.
func startNATSStage(ctx context.Context, cfg Config, stage, embedded string) (log *slog.Logger, nc *nats.Conn, reg *prometheus.Registry, stop func(), err error) {
	if cfg.NatsURL == "" {
		return nil, nil, nil, nil, fmt.Errorf("%s needs E2A_NATS_URL (%s)", stage, embedded)
	}
	if log, nc, stop, err = startStage(ctx, cfg, "e2a-"+stage); err != nil {
		return nil, nil, nil, nil, err
	}
	return log, nc, obs.NewRegistry(), stop, nil
}

// serveOps serves a stage's operations mux (/healthz, /readyz, /metrics)
// on E2A_HTTP_ADDR, and /metrics on E2A_METRICS_ADDR when set, while run
// runs the stage, until ctx ends or run returns (serveUntil). msg and
// args are the log line saying the stage runs; its "ops" address is
// added.
func serveOps(ctx context.Context, cfg Config, mux http.Handler, reg *prometheus.Registry, log *slog.Logger, run func() error, msg string, args ...any) error {
	_, stopMetrics, err := serveMetrics(ctx, cfg, reg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	ln, err := listenHTTP(cfg.HTTPAddr)
	if err != nil {
		return err
	}
	srv := newOpsServer(ctx, mux)
	done := make(chan error, 1)
	go func() { done <- run() }()
	log.Info(msg, append(args, "ops", ln.Addr().String())...)
	return serveUntil(ctx, srv, ln, log, done, 1)
}
