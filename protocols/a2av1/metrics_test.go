package a2av1_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// egressValue is the value of metric name's series with labels (0: none).
func egressValue(t *testing.T, p *pipetest.Pipeline, name string, labels map[string]string) float64 {
	t.Helper()
	sum := 0.0
next:
	for _, s := range testkit.Series(t, p.Registry, name) {
		for k, v := range labels {
			if s.Labels[k] != v {
				continue next
			}
		}
		sum += s.Value
	}
	return sum
}

// TestV1AnswersCounted: every A2A v1.0 answer is one response of egress's
// metrics (operations.md: e2a_egress_streams_total, streams_open,
// frames_written_total, by format), on every binding, counted once:
// blocking SendMessage as a2av1_json, the gRPC binding's
// SendStreamingMessage and SubscribeToTask as a2av1_grpc, the HTTP
// bindings' streams as a2av1_sse. Blocking SendMessage and the gRPC
// streams, read through the SDK's handler rather than egress's serving
// path, were counted nowhere.
func TestV1AnswersCounted(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithDefaultPool("demo")))
	gate := make(chan struct{})
	p.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "echo"); err != nil {
			return err
		}
		if env.ParamString("text") == "wait" {
			select { // the turn waits for its subscriber
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return w.Complete(map[string]any{"content": "echo"})
	}))
	for _, c := range []struct {
		binding a2a.TransportProtocol
		stream  string
	}{
		{a2a.TransportProtocolJSONRPC, a2av1.StreamFormat},
		{a2a.TransportProtocolHTTPJSON, a2av1.StreamFormat},
		{a2a.TransportProtocolGRPC, a2av1.GRPCStreamFormat},
	} {
		url := p.URL + a2av1.Path
		if c.binding == a2a.TransportProtocolGRPC {
			url = p.GRPCAddr
		}
		cl, err := a2aclient.NewFromEndpoints(context.Background(), []*a2a.AgentInterface{a2a.NewAgentInterface(url, c.binding)},
			a2aclient.WithJSONRPCTransport(http.DefaultClient), a2aclient.WithRESTTransport(http.DefaultClient),
			grpcv1.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Destroy() })
		ctx := context.Background()
		final := func(format string) float64 {
			return egressValue(t, p, "e2a_egress_streams_total", map[string]string{"format": format, "outcome": "final"})
		}
		frames := func(format string) float64 {
			return egressValue(t, p, "e2a_egress_frames_written_total", map[string]string{"format": format})
		}

		// Blocking SendMessage: a2av1_json.
		before, fbefore := final(a2av1.SendFormat), frames(a2av1.SendFormat)
		if _, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))}); err != nil {
			t.Fatalf("%s: SendMessage: %v", c.binding, err)
		}
		if got := final(a2av1.SendFormat) - before; got != 1 {
			t.Errorf("%s: SendMessage: %s{format=%q,outcome=final} +%v, want +1", c.binding, "e2a_egress_streams_total", a2av1.SendFormat, got)
		}
		if got := frames(a2av1.SendFormat) - fbefore; got != 2 {
			t.Errorf("%s: SendMessage: frames_written_total{format=%q} +%v, want +2", c.binding, a2av1.SendFormat, got)
		}

		// SendStreamingMessage: the binding's stream format, once.
		before, fbefore = final(c.stream), frames(c.stream)
		for _, err := range cl.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))}) {
			if err != nil {
				t.Fatalf("%s: SendStreamingMessage: %v", c.binding, err)
			}
		}
		if got := final(c.stream) - before; got != 1 {
			t.Errorf("%s: SendStreamingMessage: streams_total{format=%q,outcome=final} +%v, want +1", c.binding, c.stream, got)
		}
		if got := frames(c.stream) - fbefore; got != 2 {
			t.Errorf("%s: SendStreamingMessage: frames_written_total{format=%q} +%v, want +2", c.binding, c.stream, got)
		}

		// SubscribeToTask of a running task: the binding's stream format, once.
		res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("wait")),
			Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
		if err != nil {
			t.Fatalf("%s: SendMessage, returning at once: %v", c.binding, err)
		}
		task, ok := res.(*a2a.Task)
		if !ok {
			t.Fatalf("%s: SendMessage, returning at once: %T, want a task", c.binding, res)
		}
		before = final(c.stream)
		n := 0
		for ev, err := range cl.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
			if err != nil {
				t.Fatalf("%s: SubscribeToTask: %v", c.binding, err)
			}
			if n++; n == 1 {
				gate <- struct{}{} // the subscriber holds the task: let its turn end
			}
			_ = ev
		}
		if got := final(c.stream) - before; got != 1 {
			t.Errorf("%s: SubscribeToTask: streams_total{format=%q,outcome=final} +%v, want +1", c.binding, c.stream, got)
		}
		for _, f := range []string{a2av1.SendFormat, c.stream} {
			if v := egressValue(t, p, "e2a_egress_streams_open", map[string]string{"format": f}); v != 0 {
				t.Errorf("%s: streams_open{format=%q} = %v after the answers, want 0", c.binding, f, v)
			}
		}
	}
}
