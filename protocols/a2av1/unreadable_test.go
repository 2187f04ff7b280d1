package a2av1

import (
	"bytes"
	"testing"

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
	for _, c := range streamCases {
		for _, final := range []bool{false, true} {
			want := []string{"before ", "after", "TASK_STATE_COMPLETED"}
			if final {
				want = []string{"before ", a2amap.UnreadableFinal, "TASK_STATE_FAILED"}
			}
			frames := conformance.UnreadableFrames(id, final)
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
