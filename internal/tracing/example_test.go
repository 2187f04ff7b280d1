package tracing_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/e2a-pipeline/pipeline/internal/tracing"
)

func ExampleStart() {
	ctx := context.Background()
	// A process calls Start(ctx) alone: the OTEL_* variables decide. Here
	// an in-memory exporter stands in for OTLP.
	exp := tracetest.NewInMemoryExporter()
	p, err := tracing.Start(ctx, tracing.WithExporter(exp), tracing.WithServiceName("e2a-example"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Shutdown(ctx) // flushes on exit

	if tracing.Enabled() {
		_, span := tracing.Tracer("example").Start(ctx, "work")
		span.End()
	}
	_ = p.ForceFlush(ctx)
	for _, s := range exp.GetSpans() {
		fmt.Println(s.Name)
	}
	// Output: work
}
