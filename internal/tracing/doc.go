// Package tracing sets up OpenTelemetry tracing for the pipeline's
// processes and holds the few helpers the stages use to make their spans.
//
// Tracing is off unless the standard OpenTelemetry environment turns it
// on: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set,
// or OTEL_TRACES_EXPORTER=otlp (OTEL_TRACES_EXPORTER=none and
// OTEL_SDK_DISABLED=true turn it off). When on, spans are exported over
// OTLP/HTTP (protobuf) with the exporter's own reading of the OTEL_EXPORTER_OTLP_*
// variables (endpoint, headers, timeout, compression, TLS), sampled as
// OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG say (parentbased_always_on
// by default), and named by OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES.
//
// When off, the global OpenTelemetry provider is left as it is (a no-op)
// and [Enabled] is false: the stages test it before making any span, so
// tracing costs one atomic load on their hot paths.
//
// Spans of one request, joined across the NATS hops by the W3C trace
// context the envelope and the message headers carry:
//
//	HTTP POST /v1/requests   (server; ingress, parent: the client's traceparent)
//	└─ publish e2a.req       (producer; its context is written into the envelope and headers;
//	                          a call whose trace context is in its body only, an ACP prompt's
//	                          params._meta, an envelope's trace: the child of that context,
//	                          linking the server span)
//	   └─ process <pool>     (consumer; the agent's handling)
//	      └─ publish e2a.resp (producer; one per frame)
//	GET /v1/requests/{id}/stream → egress <format> (the stream or replay;
//	   parent: the HTTP request's context, else the request's publish span)
package tracing
