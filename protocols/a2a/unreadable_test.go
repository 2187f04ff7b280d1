package a2a

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// TestRenderersSkipUnreadableA2AFrame: every renderer of the package (A2A
// v0.3's message/stream and message/send for each client, AgentVault's
// SSE) renders a request with an a2a.stream_event whose payload is not
// the A2A object it names between two text chunks without an error, the
// text around it and (streams) a completed end; the same frame final ends the
// answer failed, a2amap.UnreadableFinal its message.
func TestRenderersSkipUnreadableA2AFrame(t *testing.T) {
	id := "req-unreadable"
	bad := json.RawMessage(`{"branch":"status_update","payload":{"status":42}}`)
	for _, rc := range rendererCases() {
		for _, final := range []bool{false, true} {
			frames := []*e2a.Response{conformance.Chunk(id, 0, e2a.DeltaText, "before ", "")}
			status, want := e2a.StatusInProgress, []string{"before ", "after", "completed"}
			if final {
				status, want = e2a.StatusSucceeded, []string{"before ", a2amap.UnreadableFinal, "failed"}
			} else if !rc.sse {
				want = []string{"before after"} // message/send's Message
			}
			frames = append(frames, conformance.Frame(id, 1, e2a.KindA2AStreamEvent, status, final, bad, nil))
			if !final {
				frames = append(frames, conformance.Chunk(id, 2, e2a.DeltaText, "after", ""),
					conformance.Frame(id, 3, e2a.KindComplete, e2a.StatusSucceeded, true, map[string]any{}, nil))
			}
			sc := conformance.Scenario{Name: "unreadable", Frames: frames, Steps: []conformance.Step{{Kind: conformance.StepStart}}}
			for i := range frames {
				sc.Steps = append(sc.Steps, conformance.Step{Kind: conformance.StepFrame, Frame: i})
			}
			sc.Steps = append(sc.Steps, conformance.Step{Kind: conformance.StepEnd})
			run, err := conformance.Run(sc, func(o *render.Output) render.Renderer { return rc.make(o, sc) })
			if err != nil {
				t.Fatalf("%s (final %v): %v", rc.name, final, err)
			}
			out := run.Body
			for _, w := range want {
				// AgentVault's states are in upper case.
				if !bytes.Contains(bytes.ToLower(out), bytes.ToLower([]byte(w))) {
					t.Errorf("%s (final %v): %q not in\n%s", rc.name, final, w, out)
				}
			}
		}
	}
}
