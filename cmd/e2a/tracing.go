package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/tracing"
)

// startTracing turns OpenTelemetry tracing on when the standard OTEL_*
// variables say so (package tracing) and returns the function that flushes
// and stops it on exit (it does nothing when tracing is off).
func startTracing(ctx context.Context, log *slog.Logger, service string) (func(), error) {
	p, err := tracing.Start(ctx, tracing.WithServiceName(service), tracing.WithLogger(log))
	if err != nil {
		return nil, err
	}
	if !p.Enabled() {
		return func() {}, nil
	}
	log.Info("tracing on: exporting spans over OTLP/HTTP")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			log.Warn("tracing: flushing spans on exit", "err", err)
		}
	}, nil
}

// untraced are the paths that get no server span: probes and scrapes.
var untraced = []string{"/healthz", "/readyz", "/metrics"}
