// Package obs owns what every process exposes for operations: the
// Prometheus registry and /metrics, /healthz and /readyz, the slog
// logger (JSON in production) with secret redaction, and [MetricSet],
// with which each stage (agent, bridge, ingress, egress, push) declares
// and registers its collectors.
package obs
