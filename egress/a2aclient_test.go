package egress_test

import (
	"context"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/render"
)

// a2aRenderers are protocols/a2a's A2A v0.3 renderers, answers and error
// table.
var a2aRenderers = egress.A2ARenderers{
	Stream: func(o *render.Output, requestID string, p egress.A2AParams, from int64) render.Renderer {
		return a2a.NewStream(o, requestID, a2aParams(p), from)
	},
	Send: func(o *render.Output, requestID string, p egress.A2AParams) render.Renderer {
		return a2a.NewSend(o, requestID, a2aParams(p))
	},
	Task: func(ctx context.Context, svc *egress.Service, taskID, contextID string, ids []string, historyLength *int) (*legacy.Task, error) {
		t, err := a2a.NewAnswers(svc).A2ATask(ctx, taskID, contextID, ids, historyLength)
		return a2amap.V03Task(t), err
	},
	Cancel: func(ctx context.Context, svc *egress.Service, taskID, contextID string, ids []string, cancel egress.CancelFunc) (*legacy.Task, error) {
		t, err := a2a.NewAnswers(svc).A2ACancel(ctx, taskID, contextID, ids, cancel)
		return a2amap.V03Task(t), err
	},
	Error: a2a.Error, StreamFormat: a2a.StreamFormat, SendFormat: a2a.SendFormat}

// a2aParams are the parameters of the test servers' calls as package
// a2amap's.
func a2aParams(p egress.A2AParams) a2amap.Params {
	return a2amap.Params{JSONRPCID: p.JSONRPCID, TaskID: p.TaskID, ContextID: p.ContextID, Resubscribe: p.Resubscribe, Interaction: p.Interaction}
}

// TestA2AClient drives protocols/a2a's renderers, served by egress, with
// the a2a-go client's JSON-RPC transport: message/stream,
// tasks/resubscribe, message/send, tasks/get and tasks/cancel.
func TestA2AClient(t *testing.T) { egress.RunA2AClient(t, a2aRenderers) }

// TestEndToEndDemoAgent: the demo agent (agent SDK, fenced frames) answers
// requests while egress streams them as E2A SSE, and replays them to the
// a2a-go client with protocols/a2a's renderer.
func TestEndToEndDemoAgent(t *testing.T) { egress.RunEndToEnd(t, a2aRenderers) }
