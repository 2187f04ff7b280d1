package a2a

import (
	"bytes"
	"testing"

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
	for _, rc := range rendererCases() {
		for _, final := range []bool{false, true} {
			frames := conformance.UnreadableFrames("req-unreadable", final)
			want := []string{"before ", "after", "completed"}
			if final {
				want = []string{"before ", a2amap.UnreadableFinal, "failed"}
			} else if !rc.sse {
				want = []string{"before after"} // message/send's Message
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
