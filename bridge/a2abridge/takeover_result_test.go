package a2abridge_test

import (
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// TestTakeoverCompleteResultText: the final e2a.complete of an answer with
// deltas holds {"upstream_task_id", "upstream_context_id", "text"}, text
// being the answer's text. After a takeover, the worker that completes the
// request counts the text deltas the first worker stored: the result's
// text is the whole answer, not its part after the takeover.
func TestTakeoverCompleteResultText(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 30 * time.Millisecond, SlowChunks: slowChunks})
	tk := startTakeover(t, srv.BaseURL())
	turn := up.NewTurn()
	tk.killAfter(t, turn, 3)
	tk.worker(t, srv.BaseURL())
	tk.finish(t, turn)
	a := stored(t, tk.p)
	if a.Text(e2a.DeltaText) != slowText(slowChunks) {
		t.Fatalf("stored deltas %q (the takeover itself failed)", a.Text(e2a.DeltaText))
	}
	c, err := a.Final().Complete()
	if err != nil {
		t.Fatalf("final %s: %v", a.Final().ResponseKind, err)
	}
	res, _ := c.Result.(map[string]any)
	if got, _ := res["text"].(string); got != slowText(slowChunks) {
		t.Errorf("the final result's text after a takeover: %d bytes %q…, want the answer's %d bytes",
			len(got), got[:min(len(got), 40)], len(slowText(slowChunks)))
	}
}
