package a2abridge_test

import (
	"strconv"
	"strings"
	"testing"

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
// client saw the task fail.
func TestLongTextAnswer(t *testing.T) {
	const size = 3 << 20
	for _, o := range []up.Options{{Binding: up.JSONRPC}, {Binding: up.JSONRPC, NoStreaming: true}} {
		t.Run(string(o.Binding)+map[bool]string{false: "/streamed", true: "/polled"}[o.NoStreaming], func(t *testing.T) {
			srv := up.Start(t, o)
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", srv.BaseURL())
			a := p.Ask(t, "agent", `{"params":{"text":"big: `+strconv.Itoa(size)+`"}}`)
			f := a.Final()
			if f == nil || f.ResponseKind != e2a.KindComplete {
				code, retryable := a.ErrorCode()
				t.Fatalf("final frame %s (%s, retryable %v), want e2a.complete", kindOf(f), code, retryable)
			}
			if text := a.Text(e2a.DeltaText); text != strings.Repeat("x", size) {
				t.Fatalf("%d bytes of text stored, want the agent's %d", len(text), size)
			}
			c, err := f.Complete()
			res, _ := c.Result.(map[string]any)
			if err != nil || res["text"] != nil || res["text_omitted"] == nil || res["upstream_task_id"] == nil || res["upstream_context_id"] == nil {
				t.Fatalf("final result %v (%v): want the upstream's ids and text_omitted, without the text", res, err)
			}
		})
	}
}
