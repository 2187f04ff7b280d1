package agent

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestHandleSpanStatus: a delivery's span has an error status for every
// outcome that failed the request (the handler's e2a.error, its deadline,
// a panic, a lost or invalid request, max_deliveries, an interrupted one),
// none for one that succeeded, was cancelled by its client, found final
// already, fenced or handed back. A request that ended "failed" (a bridge's
// upstream_rate_limited, say) had none: a trace's failures could not be
// found by status.
func TestHandleSpanStatus(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	want := map[string]codes.Code{
		OutcomeSucceeded: codes.Unset, OutcomeCancelled: codes.Unset, OutcomeAlreadyFinal: codes.Unset,
		OutcomeFenced: codes.Unset, OutcomeHandedBack: codes.Unset,
		OutcomeFailed: codes.Error, OutcomeDeadline: codes.Error, OutcomePanic: codes.Error, OutcomeLost: codes.Error,
		OutcomeInvalid: codes.Error, OutcomeMaxDeliveries: codes.Error, OutcomeInterrupted: codes.Error,
	}
	for outcome := range want {
		_, span := tp.Tracer("test").Start(context.Background(), outcome)
		endHandleSpan(span, outcome)
	}
	for _, s := range rec.Ended() {
		if got := s.Status().Code; got != want[s.Name()] {
			t.Errorf("outcome %s: span status %v, want %v", s.Name(), got, want[s.Name()])
		}
	}
	if len(rec.Ended()) != len(want) {
		t.Fatalf("%d spans ended, want %d", len(rec.Ended()), len(want))
	}
}
