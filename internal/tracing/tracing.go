package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/internal/option"
)

// ErrInvalidOption is wrapped by the errors of options given bad values.
var ErrInvalidOption = errors.New("tracing: invalid option")

// ErrUnsupported is wrapped by Start's error when the environment asks for
// an exporter or protocol this build does not have (only OTLP over HTTP
// with protobuf is).
var ErrUnsupported = errors.New("tracing: unsupported configuration")

// Attribute keys the stages set. No payload or secret is ever an
// attribute.
const (
	AttrRequestID = attribute.Key("e2a.request_id")
	AttrPool      = attribute.Key("e2a.pool")
	AttrProtocol  = attribute.Key("e2a.protocol")
	AttrFormat    = attribute.Key("e2a.format")
	AttrSequence  = attribute.Key("e2a.frame.sequence")
	AttrOutcome   = attribute.Key("e2a.outcome")
)

// MessagingSystem is the messaging.system attribute of every NATS span.
var MessagingSystem = attribute.String("messaging.system", "nats")

// Destination is the messaging.destination.name attribute.
func Destination(subject string) attribute.KeyValue {
	return attribute.String("messaging.destination.name", subject)
}

var enabled atomic.Bool

// Enabled tells whether a Provider started by Start exports spans. The
// stages make no span when it is false.
func Enabled() bool { return enabled.Load() }

// Tracer returns the named tracer of the global provider.
func Tracer(name string) trace.Tracer { return otel.GetTracerProvider().Tracer(name) }

type config struct {
	service  string
	exporter sdktrace.SpanExporter
	opts     []otlptracehttp.Option
	log      *slog.Logger
}

// Option configures Start.
type Option func(*config) error

// WithServiceName sets the service.name used when neither
// OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names the service. An
// empty name is ErrInvalidOption.
func WithServiceName(name string) Option {
	return func(c *config) error {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("%w: empty service name", ErrInvalidOption)
		}
		c.service = name
		return nil
	}
}

// WithExporter exports to e instead of OTLP, whatever the environment
// says: tracing is on. A nil exporter is ErrInvalidOption.
func WithExporter(e sdktrace.SpanExporter) Option {
	return option.NotNil(ErrInvalidOption, "exporter", e, func(c *config) { c.exporter = e })
}

// WithLogger logs the OpenTelemetry SDK's errors (a failed export: no
// collector at the endpoint, a refused batch) to log, as warnings, when
// tracing is on; without it they go to the SDK's default, the standard
// library's log package (plain text, not the process's JSON lines). A nil
// logger is ErrInvalidOption.
func WithLogger(log *slog.Logger) Option {
	return option.NotNil(ErrInvalidOption, "logger", log, func(c *config) { c.log = log })
}

// WithOTLPOptions adds options to the OTLP/HTTP exporter; they win over
// the environment.
func WithOTLPOptions(opts ...otlptracehttp.Option) Option {
	return func(c *config) error {
		c.opts = append(c.opts, opts...)
		return nil
	}
}

// Provider is the process's tracing: a no-op one when the environment does
// not turn tracing on.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Start reads the environment (see the package documentation) and, when
// tracing is on, installs an SDK provider exporting over OTLP/HTTP as the
// global one, and the W3C trace context propagator. Otherwise it changes
// nothing and returns a Provider whose methods do nothing. Errors wrap
// ErrInvalidOption or ErrUnsupported, or are the exporter's.
func Start(ctx context.Context, opts ...Option) (*Provider, error) {
	var c config
	if err := option.Apply(ErrInvalidOption, &c, opts); err != nil {
		return nil, err
	}
	exp := sdktrace.SpanExporter(c.exporter)
	if exp == nil {
		on, err := fromEnv()
		if err != nil || !on {
			return &Provider{}, err
		}
		e, err := otlptracehttp.New(ctx, c.opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
		exp = e
	}
	res := resource.Default()
	if c.service != "" && !serviceFromEnv() {
		if r, err := resource.Merge(res, resource.NewSchemaless(semconv.ServiceName(c.service))); err == nil {
			res = r
		}
	}
	if c.log != nil {
		log := c.log
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	enabled.Store(true)
	return &Provider{tp: tp}, nil
}

// fromEnv tells whether the environment turns tracing on.
func fromEnv() (bool, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	exporter := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")))
	switch exporter {
	case "none":
		return false, nil
	case "", "otlp":
	default:
		return false, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q (only otlp or none)", ErrUnsupported, exporter)
	}
	if exporter == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return false, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return false, fmt.Errorf("%w: OTLP protocol %q (only http/protobuf)", ErrUnsupported, proto)
	}
	return true, nil
}

func serviceFromEnv() bool {
	if os.Getenv("OTEL_SERVICE_NAME") != "" {
		return true
	}
	for _, kv := range strings.Split(os.Getenv("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		if k, _, _ := strings.Cut(kv, "="); strings.TrimSpace(k) == "service.name" {
			return true
		}
	}
	return false
}

// Enabled tells whether p exports spans.
func (p *Provider) Enabled() bool { return p != nil && p.tp != nil }

// ForceFlush exports the spans ended so far. It does nothing when p is
// off.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}

// Shutdown exports what is left and stops p; the global provider becomes a
// no-op again. It does nothing when p is off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	enabled.Store(false)
	otel.SetTracerProvider(noop.NewTracerProvider())
	return p.tp.Shutdown(ctx)
}

var w3c = propagation.TraceContext{}

// carrier is a TextMapCarrier over an e2a.TraceContext.
type carrier struct{ t *e2a.TraceContext }

func (c carrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.t.Traceparent
	case "tracestate":
		return c.t.Tracestate
	}
	return ""
}

func (c carrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.t.Traceparent = value
	case "tracestate":
		c.t.Tracestate = value
	}
}

func (c carrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// Extract returns ctx with the remote span context t carries as its parent
// (ctx unchanged when t is nil or its traceparent invalid). t is checked
// as the front door checks it ([e2a.CleanTrace]): a tracestate out of the
// W3C limits is not taken.
func Extract(ctx context.Context, t *e2a.TraceContext) context.Context {
	if t = e2a.CleanTrace(t); t == nil {
		return ctx
	}
	return w3c.Extract(ctx, carrier{t})
}

// Inject returns the W3C trace context of the span in ctx, or nil when
// ctx holds no valid span context. Its tracestate is one [e2a.CleanTrace]
// keeps (OpenTelemetry's own limits are wider: 32 members of up to 256
// characters each), else empty.
func Inject(ctx context.Context) *e2a.TraceContext {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	t := &e2a.TraceContext{}
	w3c.Inject(ctx, carrier{t})
	return e2a.CleanTrace(t)
}

// knownMethods are the HTTP methods a server span is named by
// (OpenTelemetry HTTP semantic conventions: RFC 9110's and PATCH).
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodDelete: true, http.MethodConnect: true, http.MethodOptions: true, http.MethodTrace: true,
	http.MethodPatch: true,
}

// spanMethod is the method a server span records: m when it is a known one,
// else "_OTHER", and the prefix of its name, "HTTP <m>" or "HTTP". A
// client's arbitrary method never becomes a span name or an attribute
// value, so the span names stay a bounded set.
func spanMethod(m string) (attr, name string) {
	if knownMethods[m] {
		return m, "HTTP " + m
	}
	return "_OTHER", "HTTP"
}

// Handler wraps h with a server span per request, named by the method (a
// known one, else none: spanMethod) and the route pattern (the path is not
// used: it holds request ids), whose parent is the request's traceparent
// header with its tracestate headers, checked as the normalizer checks
// them (Extract, [e2a.CleanTrace]). Requests whose path is one of skip
// (health probes, /metrics) get no span. When tracing is off it returns h
// itself.
func Handler(h http.Handler, skip ...string) http.Handler {
	if !Enabled() {
		return h
	}
	tr := Tracer("github.com/e2a-pipeline/pipeline/internal/tracing")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range skip {
			if r.URL.Path == p {
				h.ServeHTTP(w, r)
				return
			}
		}
		ctx := Extract(r.Context(), &e2a.TraceContext{Traceparent: r.Header.Get("traceparent"),
			Tracestate: strings.Join(r.Header.Values("tracestate"), ",")})
		method, name := spanMethod(r.Method)
		ctx, span := tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method)))
		defer span.End()
		rw := &obs.StatusWriter{ResponseWriter: w}
		r = r.WithContext(ctx)
		h.ServeHTTP(rw, r)
		if r.Pattern != "" {
			_, route, _ := strings.Cut(r.Pattern, " ")
			if route == "" {
				route = r.Pattern
			}
			span.SetName(name + " " + route)
			span.SetAttributes(semconv.HTTPRoute(route))
		}
		code := rw.Code
		if code == 0 {
			code = http.StatusOK
		}
		span.SetAttributes(semconv.HTTPResponseStatusCode(code))
		if code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
	})
}
