package main

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/streams"
)

func newOpsMux(reg *prometheus.Registry, nc *nats.Conn, js jetstream.JetStream) *http.ServeMux {
	mux := http.NewServeMux()
	obs.Register(mux, reg, obs.NATSConnected(nc), obs.StreamsPresent(js, streams.RequestsStream, streams.ResponsesStream))
	return mux
}

func newOpsServer(ctx context.Context, h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
}
