package ingress_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// unreadableReply is a final a2a.message body that e2a.Response.Reply
// takes for the agent's direct answer (parts with text) but that is not
// the A2A Message it names (metadata is not an object): a2amap skips it
// and ends the turn failed (aa31a85, UnreadableFinal).
var unreadableReply = map[string]any{"messageId": "m-bad", "role": "agent",
	"parts": []any{map[string]any{"kind": "text", "text": "hi"}}, "metadata": "not an object"}

// TestUnreadableFinalReplyStreamOpensWithTask: the agent's only
// frame is a final a2a.message that does not read. The stream renderer
// takes the frame for a direct Message answer (e2a.Response.Reply reads
// only the parts), so it withheld the opening Task; a2amap then skips the
// unreadable message and ends the turn with a failed status-update: a
// stream of a lone status-update, neither a Task nor a Message first,
// which A2A v1.0 §3.1.2 requires (found by review). A reply is one the
// renderers read (a2amap.Replied): this stream opens with the Task.
func TestUnreadableFinalReplyStreamOpensWithTask(t *testing.T) {
	pp := pipetest.Start(t, pipetest.WithGRPC())
	pp.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return w.Write(e2a.KindA2AMessage, e2a.StatusSucceeded, unreadableReply, true)
	}))
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	eachV1Binding(t, p, 30*time.Second, func(ctx context.Context, t *testing.T, binding a2a.TransportProtocol, c *a2aclient.Client) {
		events := v1Stream(t, "SendStreamingMessage", c.SendStreamingMessage(ctx, userMessage("hello")))
		var kinds []string
		for _, ev := range events {
			kinds = append(kinds, fmt.Sprintf("%T", ev))
		}
		switch events[0].(type) {
		case *a2a.Task, *a2a.Message:
		default:
			t.Fatalf("over %s: the stream's events are %v; want a Task or a Message first (A2A v1.0 §3.1.2: a stream "+
				"begins with the Task, or is the agent's Message alone): the unreadable final reply made the renderer "+
				"withhold the Task, then a2amap ended the turn with a failed status-update", binding, kinds)
		}
	})
}
