package ingress_test

import (
	"context"
	"io"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
)

// TestACPAgentFailedA2AStatusEndsTurn: an agent (an HTTP agent wrapping an
// A2A framework, say) ends its turn with its own final A2A status-update
// in state failed; acp-go-sdk's client over stdio gets session/prompt's
// error, as the A2A task is failed. It got stopReason end_turn, as if the
// turn had succeeded.
func TestACPAgentFailedA2AStatusEndsTurn(t *testing.T) {
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return w.Write(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, map[string]any{"branch": e2a.BranchStatusUpdate,
			"payload": map[string]any{"kind": "status-update", "final": true, "status": map[string]any{"state": "failed",
				"message": map[string]any{"kind": "message", "role": "agent", "messageId": "m1",
					"parts": []any{map[string]any{"kind": "text", "text": "upstream model unavailable"}}}}}}, true)
	})
	srv, _ := stdioPipeline(t, h, ingress.WithDefaultPool("demo"))
	s := acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ingress.ServeACPStdio(ctx, in, out, srv)
	})
	res, err := s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	if err == nil {
		t.Errorf("a turn the agent ended failed was answered stopReason %q (said %q), want a JSON-RPC error",
			res.StopReason, acptest.Said(s.Rec.Take(s.ID)))
	}
}
