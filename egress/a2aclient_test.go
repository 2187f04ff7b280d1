package egress_test

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
)

// a2aRenderers are protocols/a2a's A2A v0.3 renderers and error table.
var a2aRenderers = egress.A2ARenderers{Stream: a2a.NewStream, Send: a2a.NewSend, Error: a2a.Error,
	StreamFormat: a2a.StreamFormat, SendFormat: a2a.SendFormat}

// TestA2AClient drives protocols/a2a's renderers, served by egress, with
// the a2a-go client's JSON-RPC transport: message/stream,
// tasks/resubscribe, message/send, tasks/get and tasks/cancel.
func TestA2AClient(t *testing.T) { egress.RunA2AClient(t, a2aRenderers) }

// TestEndToEndDemoAgent: the demo agent (agent SDK, fenced frames) answers
// requests while egress streams them as E2A SSE, and replays them to the
// a2a-go client with protocols/a2a's renderer.
func TestEndToEndDemoAgent(t *testing.T) { egress.RunEndToEnd(t, a2aRenderers) }
