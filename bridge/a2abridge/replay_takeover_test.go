package a2abridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// replayPieces is how many text chunks the upstream pipeline's agent
// streams in TestTakeoverUpstreamReplays, 25 ms apart (2 s: the
// redelivery comes after 1 s).
const replayPieces = 80

func replayPiece(i int) string { return fmt.Sprintf("p%d ", i) }

// TestTakeoverUpstreamReplays: the upstream is another E2A pipeline,
// whose SubscribeToTask sends the task without the running turn's
// artifacts, then that turn's events again from its first frame
// (docs/protocols.md, SubscribeToTask). The worker that takes the request
// over must write only what the stored frames lack: the replayed updates
// that repeat what was written are not written again (they were, as whole
// artifact_update frames: E2A and ACP clients got the text twice).
func TestTakeoverUpstreamReplays(t *testing.T) {
	t.Parallel()
	q := pipetest.Start(t)
	q.Pool("slow", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for i := 1; i <= replayPieces; i++ {
			if err := w.Chunk(e2a.DeltaText, replayPiece(i)); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(25 * time.Millisecond):
			}
		}
		return w.Complete(map[string]any{"text": "done"})
	}))
	var want strings.Builder
	for i := 1; i <= replayPieces; i++ {
		want.WriteString(replayPiece(i))
	}
	url := q.URL + "/pools/slow"
	tk := startTakeover(t, url)
	turn := up.NewTurn()
	tk.killAfter(t, turn, 3)
	tk.worker(t, url)
	tk.finish(t, turn)
	if turn.State() != a2a.TaskStateCompleted {
		t.Fatalf("after the takeover: %s", turn.State())
	}
	// What an E2A or ACP client reads of the stored frames: the chunks'
	// text and the text parts of native artifact updates.
	a := stored(t, tk.p)
	var got strings.Builder
	native := 0
	for i, f := range a.Frames {
		if f.Sequence != int64(i) {
			t.Fatalf("stored frame %d has sequence %d", i, f.Sequence)
		}
		if c, err := f.Chunk(); err == nil {
			if s, ok := c.Delta.(string); ok && c.DeltaKind == e2a.DeltaText {
				got.WriteString(s)
			}
			continue
		}
		if f.ResponseKind != e2a.KindA2AStreamEvent {
			continue
		}
		var ev struct {
			Branch  string `json:"branch"`
			Payload struct {
				Artifact struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"artifact"`
			} `json:"payload"`
		}
		if b, err := json.Marshal(f.Body); err == nil && json.Unmarshal(b, &ev) == nil && ev.Branch == "artifact_update" {
			native++
			for _, p := range ev.Payload.Artifact.Parts {
				got.WriteString(p.Text)
			}
		}
	}
	if got.String() != want.String() {
		t.Errorf("stored text (%d native artifact updates):\n got %q\nwant %q", native, got.String(), want.String())
	}
}
