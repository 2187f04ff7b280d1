// Package obs owns what every process exposes for operations: the
// Prometheus registry and /metrics, /healthz and /readyz, and the slog
// logger (JSON in production) with secret redaction.
package obs
