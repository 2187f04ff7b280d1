package ingress_test

import (
	"context"
	"io"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
)

// TestACPAgentA2ATaskAnswerShown: an agent that answers its turn with its
// A2A Task (an HTTP agent wrapping an A2A framework that answers
// message/send with a completed Task: a final a2a.task frame) has its
// answer in the task's artifacts; acp-go-sdk's client gets them as
// agent_message_chunk updates, live and from session/load, and an
// artifact the turn already streamed (an artifact-update event before the
// Task) only once, nor again when the turn streamed its text as chunks
// before its Task. The ACP answer was an empty turn ending end_turn: the
// Task's artifacts were never read (only its status message), while the
// A2A doors showed them.
func TestACPAgentA2ATaskAnswerShown(t *testing.T) {
	const answer = "Paris is the capital of France."
	artifact := map[string]any{"artifactId": "a1", "parts": []any{map[string]any{"kind": "text", "text": answer}}}
	task := map[string]any{"kind": "task", "id": "t1", "contextId": "c1",
		"status": map[string]any{"state": "completed"}, "artifacts": []any{artifact}}
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if demo.Text(env) == "chunked" { // its text streamed as chunks, then its Task repeating it
			if err := w.Chunk(e2a.DeltaText, answer); err != nil {
				return err
			}
		}
		if demo.Text(env) == "streamed" {
			if err := w.Write(e2a.KindA2AStreamEvent, e2a.StatusInProgress, map[string]any{"branch": e2a.BranchArtifactUpdate,
				"payload": map[string]any{"kind": "artifact-update", "artifact": artifact, "lastChunk": true}}, false); err != nil {
				return err
			}
		}
		return w.Write(e2a.KindA2ATask, e2a.StatusSucceeded, task, true)
	})
	srv, _ := stdioPipeline(t, h, ingress.WithDefaultPool("demo"))
	s := acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ingress.ServeACPStdio(ctx, in, out, srv)
	})
	for _, text := range []string{"snapshot", "streamed", "chunked"} {
		if stop, said := s.Prompt(t, text); stop != acp.StopReasonEndTurn || said != answer {
			t.Errorf("%s: the agent's Task answered stopReason %q, said %q; want end_turn and %q (its artifact, once)", text, stop, said, answer)
		}
	}
	if _, err := s.Conn.LoadSession(s.Ctx, acp.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if said := acptest.Said(s.Rec.Take(s.ID)); said != answer+answer+answer {
		t.Errorf("session/load replayed %q, want the Task's artifact once per turn: %q", said, answer+answer+answer)
	}
}
