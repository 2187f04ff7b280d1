package a2av1

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// TestStreamSkipsUnreadableA2AFrame: the stream of every case (JSON-RPC
// for each client, HTTP+JSON) renders a request with an a2a.stream_event
// whose payload is not the A2A object it names between two text chunks
// without an error: the text around it, then the completed status; the
// same frame final ends the stream failed, a2amap.UnreadableFinal its
// status message.
func TestStreamSkipsUnreadableA2AFrame(t *testing.T) {
	id := "req-unreadable"
	bad := json.RawMessage(`{"branch":"status_update","payload":{"status":42}}`)
	for _, c := range streamCases {
		for _, final := range []bool{false, true} {
			frames := []*e2a.Response{conformance.Chunk(id, 0, e2a.DeltaText, "before ", "")}
			status, want := e2a.StatusInProgress, []string{"before ", "after", "TASK_STATE_COMPLETED"}
			if final {
				status, want = e2a.StatusSucceeded, []string{"before ", a2amap.UnreadableFinal, "TASK_STATE_FAILED"}
			}
			frames = append(frames, conformance.Frame(id, 1, e2a.KindA2AStreamEvent, status, final, bad, nil))
			if !final {
				frames = append(frames, conformance.Chunk(id, 2, e2a.DeltaText, "after", ""),
					conformance.Frame(id, 3, e2a.KindComplete, e2a.StatusSucceeded, true, map[string]any{}, nil))
			}
			out, err := conformance.RenderFrames(func(o *render.Output) render.Renderer { return c.newStream(o, id, 0) }, frames, false)
			if err != nil {
				t.Fatalf("%s (final %v): %v", c.name, final, err)
			}
			for _, w := range want {
				if !bytes.Contains(out, []byte(w)) {
					t.Errorf("%s (final %v): %q not in\n%s", c.name, final, w, out)
				}
			}
		}
	}
}
