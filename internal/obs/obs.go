package obs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns the process's one registry, with Go runtime and
// process collectors registered.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// secretKeys are attribute keys whose values are never logged.
var secretKeys = []string{"authorization", "bearer_token", "api_key", "apikey", "x-api-key", "password", "secret", "token", "credential", "cookie", "nkey", "seed"}

// IsSecretKey reports whether an attribute or header name designates a
// secret (compared case-insensitively, by substring).
func IsSecretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range secretKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// NewLogger returns a slog logger writing to w in format "json" or "text" at
// level "debug", "info", "warn" or "error". Attributes whose key names a
// secret are replaced by "[redacted]".
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("obs: log level %q: %w", level, err)
	}
	ho := &slog.HandlerOptions{Level: lv, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if IsSecretKey(a.Key) && !strings.HasSuffix(strings.ToLower(a.Key), "_ref") {
			return slog.String(a.Key, "[redacted]")
		}
		return a
	}}
	switch format {
	case "json", "":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("obs: log format %q is not json or text", format)
}

// Check is one readiness check; it returns nil when ready.
type Check func(ctx context.Context) error

// NATSConnected is ready while nc is connected.
func NATSConnected(nc *nats.Conn) Check {
	return func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats: %s", nc.Status())
		}
		return nil
	}
}

// StreamsPresent is ready when every named stream exists.
func StreamsPresent(js jetstream.JetStream, names ...string) Check {
	return func(ctx context.Context) error {
		for _, n := range names {
			if _, err := js.Stream(ctx, n); err != nil {
				return fmt.Errorf("stream %s: %w", n, err)
			}
		}
		return nil
	}
}

// Register mounts GET /metrics (reg), GET /healthz (the process is alive)
// and GET /readyz (every check passes within 2 s) on mux.
func Register(mux *http.ServeMux, reg *prometheus.Registry, checks ...Check) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var failures []string
		for _, c := range checks {
			if err := c(ctx); err != nil {
				failures = append(failures, err.Error())
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if len(failures) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "unavailable", "failures": failures})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "ready"})
	})
}
