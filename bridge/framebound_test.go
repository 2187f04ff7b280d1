package bridge_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// frameBoundUpstream completes with the frame bound its writer tells
// (agent.MaxFrameBytes).
type frameBoundUpstream struct{}

func (frameBoundUpstream) Name() string { return "test http://upstream" }

func (frameBoundUpstream) Call(_ context.Context, _ *e2a.Envelope, w agent.Writer) error {
	return w.Complete(map[string]any{"max_frame_bytes": agent.MaxFrameBytes(w)})
}

// TestFrameBoundPassedOn: an upstream's writer tells the runtime's frame
// bound, the server's max_payload (agent.MaxFrameBytes through the
// Handler's counting writer), with which the OpenAI bridge drops an
// answer's text that no final frame can hold: it told 0, unknown.
func TestFrameBoundPassedOn(t *testing.T) {
	_, nc := natstest.RunServer(t, natstest.WithMaxPayload(64<<10))
	p := pipetest.Start(t, pipetest.WithConn(nc))
	h, err := bridge.New("fb", frameBoundUpstream{})
	if err != nil {
		t.Fatal(err)
	}
	p.Pool("fb", h)
	a := p.Ask(t, "fb", `{"request_id":"fb-1","params":{"text":"hi"}}`)
	c, err := a.Final().Complete()
	if err != nil {
		t.Fatalf("final frame %s %s", a.Final().ResponseKind, a.Final().Body)
	}
	if got := fmt.Sprint(c.Result.(map[string]any)["max_frame_bytes"]); got != fmt.Sprint(nc.MaxPayload()) || got != "65536" {
		t.Fatalf("the upstream's writer told a frame bound of %v, want the server's max_payload %d", c.Result, nc.MaxPayload())
	}
}
