package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
)

// With no OTEL_* variable set, Start turns nothing on: the global provider
// stays a no-op one, Enabled is false, and Handler returns its handler.
func TestStartWithoutEnvIsNoop(t *testing.T) {
	clearOTELEnv(t)
	p, err := tracing.Start(context.Background(), tracing.WithServiceName("e2a-test"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled() || tracing.Enabled() {
		t.Fatal("tracing on without OTEL_* variables")
	}
	if _, sdk := otel.GetTracerProvider().(*sdktrace.TracerProvider); sdk {
		t.Fatal("an SDK provider was installed")
	}
	_, span := tracing.Tracer("test").Start(context.Background(), "x")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("the global tracer records")
	}
	h := http.NotFoundHandler()
	if got := tracing.Handler(h); got == nil || got == http.Handler(nil) {
		t.Fatal("nil handler")
	}
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true win over an
// endpoint; an exporter or protocol this build lacks is ErrUnsupported.
func TestStartEnv(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		on   bool
		fail bool
	}{
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, fail: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, fail: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
	} {
		clearOTELEnv(t)
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		p, err := tracing.Start(context.Background())
		if c.fail {
			if !errors.Is(err, tracing.ErrUnsupported) {
				t.Fatalf("%v: err %v, want ErrUnsupported", c.env, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if p.Enabled() != c.on || tracing.Enabled() != c.on {
			t.Fatalf("%v: enabled %v, want %v", c.env, p.Enabled(), c.on)
		}
		// Nothing was exported (no span), so shutting down sends nothing.
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if tracing.Enabled() {
			t.Fatal("still enabled after Shutdown")
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	if _, err := tracing.Start(context.Background(), tracing.WithServiceName(" ")); !errors.Is(err, tracing.ErrInvalidOption) {
		t.Fatalf("empty service name: %v", err)
	}
	if _, err := tracing.Start(context.Background(), tracing.WithExporter(nil)); !errors.Is(err, tracing.ErrInvalidOption) {
		t.Fatalf("nil exporter: %v", err)
	}
	if _, err := tracing.Start(context.Background(), tracing.WithLogger(nil)); !errors.Is(err, tracing.ErrInvalidOption) {
		t.Fatalf("nil logger: %v", err)
	}
}

// Inject and Extract carry a span context through an e2a.TraceContext.
func TestInjectExtract(t *testing.T) {
	in := &e2a.TraceContext{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "congo=t61rcWkgMzE"}
	ctx := tracing.Extract(context.Background(), in)
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("extracted %v", sc)
	}
	out := tracing.Inject(ctx)
	if out == nil || *out != *in {
		t.Fatalf("injected %+v, want %+v", out, in)
	}
	if tracing.Inject(context.Background()) != nil {
		t.Fatal("context without a span injected")
	}
	if tracing.Extract(context.Background(), nil) != context.Background() {
		t.Fatal("nil trace context changed the context")
	}
}

// With WithLogger, an export the collector refuses (nothing listens at the
// endpoint) is logged as a JSON warning on the process's logger, not as a
// plain line of the standard library's log package.
func TestExportErrorsLogged(t *testing.T) {
	clearOTELEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	var buf testkit.Buffer
	p, err := tracing.Start(context.Background(), tracing.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))),
		tracing.WithOTLPOptions(otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	_, span := tracing.Tracer("test").Start(context.Background(), "exported")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.Shutdown(ctx)
	var line struct{ Level, Msg, Err string }
	if err := json.Unmarshal(bytes.TrimSpace([]byte(strings.SplitN(buf.String(), "\n", 2)[0])), &line); err != nil ||
		line.Level != "WARN" || line.Msg != "tracing" || line.Err == "" {
		t.Fatalf("logged %q (%v), want a JSON warning of the failed export", buf.String(), err)
	}
}
