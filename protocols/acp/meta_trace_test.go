package acp_test

import (
	"context"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestPromptMetaTraceContext: an ACP prompt's W3C trace context in
// params._meta (traceparent, tracestate: the root keys ACP reserves for
// it, the only carrier over stdio) is the request's, as a traceparent
// header is on HTTP: the handler's context has it (agent.TraceFrom). An
// invalid one is dropped, as at every door (e2a.CleanTrace). It was
// ignored: a stdio client's trace ended at the pipeline.
func TestPromptMetaTraceContext(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	seen := make(chan e2a.TraceContext, 2)
	s := stdioSession(t, func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		tc, _ := agent.TraceFrom(ctx)
		seen <- tc
		return w.Complete(map[string]any{"content": "ok"})
	})
	for _, c := range []struct {
		meta map[string]any
		want e2a.TraceContext
	}{
		{map[string]any{"traceparent": tp, "tracestate": "congo=t61rcWkgMzE"}, e2a.TraceContext{Traceparent: tp, Tracestate: "congo=t61rcWkgMzE"}},
		{map[string]any{"traceparent": "00-not-a-trace", "tracestate": "congo=t61rcWkgMzE"}, e2a.TraceContext{}},
	} {
		if _, err := s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}, Meta: c.meta}); err != nil {
			t.Fatal(err)
		}
		if got := testkit.Receive(t, seen, 10*time.Second, "the handler never ran"); got != c.want {
			t.Errorf("_meta %v: agent.TraceFrom = %+v, want %+v", c.meta, got, c.want)
		}
	}
}
