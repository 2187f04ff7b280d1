package ingress_test

import (
	"context"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// One trace id joins every stage: the HTTP traceparent reaches the
// envelope, the request's NATS headers, the handler's context and every
// frame's headers.
func TestTraceContextJoinsEveryStage(t *testing.T) {
	p := startPipeline(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const ts = "congo=t61rcWkgMzE"
	seen := make(chan e2a.TraceContext, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(ctx, p.nc, "trace", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			tc, _ := agent.TraceFrom(ctx)
			seen <- tc
			if err := w.Chunk(e2a.DeltaText, "a"); err != nil {
				return err
			}
			return w.Complete(map[string]any{"content": "a"})
		}))
	}()
	t.Cleanup(func() { cancel(); <-done })

	if r := p.post(t, "/v1/requests?agent=trace&wait=true", "", `{"request_id":"trace-1","params":{"text":"x"}}`); r.StatusCode != 200 {
		t.Fatalf("post: %d", r.StatusCode)
	}
	r2, _ := do(t, "POST", p.url+"/v1/requests?agent=trace", `{"request_id":"trace-2","params":{"text":"x"}}`, "traceparent", tp, "tracestate", ts)
	if r2.StatusCode != 202 {
		t.Fatalf("post: %d", r2.StatusCode)
	}
	// The first request carried no trace context.
	if tc := <-seen; tc.Traceparent != "" {
		t.Fatalf("first request has trace %+v", tc)
	}
	tc := testkit.Receive(t, seen, 10*time.Second, "handler not called")
	if tc.Traceparent != tp || tc.Tracestate != ts {
		t.Fatalf("handler context trace %+v", tc)
	}
	subj, _ := subjects.Request("trace", "trace-2")
	msg, err := streams.LastBySubject(context.Background(), p.nc, streams.RequestsStream, subj)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("traceparent") != tp {
		t.Fatalf("request headers %v", msg.Header)
	}
	env, _ := e2a.FromJSON(msg.Data)
	if env.Trace == nil || env.Trace.Traceparent != tp {
		t.Fatalf("envelope trace %+v", env.Trace)
	}
	if r := p.get(t, "/v1/requests/trace-2?wait=true"); r.StatusCode != 200 {
		t.Fatalf("wait: %d", r.StatusCode)
	}
	rs, _ := subjects.Response("trace-2")
	frames, err := streams.DirectGetAll(context.Background(), p.nc, streams.ResponsesStream, rs, 0, 16)
	if err != nil || len(frames) < 2 {
		t.Fatalf("frames %d %v", len(frames), err)
	}
	for _, f := range frames {
		if f.Header.Get("traceparent") != tp || f.Header.Get("tracestate") != ts {
			t.Fatalf("frame headers %v", f.Header)
		}
	}
}
