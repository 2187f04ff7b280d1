package a2abridge_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestLongTextAnswer: a bridged A2A agent's text answer larger than the
// NATS server's max_payload (1 MiB here) is stored as text frames that
// fit, and the request completes: its final frame, which cannot hold the
// whole text again, names the upstream's task and context and says the
// text is left out (as the OpenAI bridge's TestLongAnswer). The final
// frame held the text, was refused, and the request ended e2a.error
// frame_too_large after every chunk of the answer was stored: an A2A
// client saw the task fail. On gRPC an answer over grpc-go's 4 MiB
// default bound on a message is taken as on the other bindings: it was
// RESOURCE_EXHAUSTED, read as the agent's rate limit, retried (the agent
// ran the task again each time) and the request ended
// upstream_rate_limited, retryable. A text of more than half the bridge's
// answer bound (bridge.WithMaxAnswerBytes, 64 KiB in the cases "bound"),
// under max_payload, completes so too: its final frame, counted with the
// text, passed the bound, and the request ended upstream_protocol_error
// after the whole text was stored.
func TestLongTextAnswer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o     up.Options
		size  int   // over max_payload (on gRPC over grpc-go's 4 MiB too), or over half the bound
		bound int64 // the answer bound, when set
	}{
		{up.Options{Binding: up.JSONRPC}, 3 << 19, 0}, {up.Options{Binding: up.JSONRPC, NoStreaming: true}, 3 << 19, 0},
		{up.Options{Binding: up.GRPC}, 9 << 19, 0}, {up.Options{Binding: up.GRPC, NoStreaming: true}, 9 << 19, 0},
		{up.Options{Binding: up.JSONRPC}, 40 << 10, 64 << 10}, {up.Options{Binding: up.JSONRPC, NoStreaming: true}, 40 << 10, 64 << 10},
	} {
		name := string(c.o.Binding) + map[bool]string{false: "/streamed", true: "/polled"}[c.o.NoStreaming]
		if c.bound > 0 {
			name += "/bound"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := up.Start(t, c.o)
			p := pipetest.Start(t)
			if c.bound > 0 {
				p.Pool("agent", handlerWith(t, p, "agent", srv.BaseURL(), bridge.WithMaxAnswerBytes(c.bound), nil))
			} else {
				bridgePool(t, p, "agent", srv.BaseURL())
			}
			a := p.Ask(t, "agent", `{"params":{"text":"big: `+strconv.Itoa(c.size)+`"}}`)
			f := a.Final()
			if f == nil || f.ResponseKind != e2a.KindComplete {
				code, retryable := a.ErrorCode()
				t.Fatalf("final frame %s (%s, retryable %v), want e2a.complete", kindOf(f), code, retryable)
			}
			if text := a.Text(e2a.DeltaText); text != strings.Repeat("x", c.size) {
				t.Fatalf("%d bytes of text stored, want the agent's %d", len(text), c.size)
			}
			fin, err := f.Complete()
			res, _ := fin.Result.(map[string]any)
			if err != nil || res["text"] != nil || res["text_omitted"] == nil || res["upstream_task_id"] == nil || res["upstream_context_id"] == nil {
				t.Fatalf("final result %v (%v): want the upstream's ids and text_omitted, without the text", res, err)
			}
		})
	}
}
