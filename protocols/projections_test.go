package protocols_test

import (
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// TestE2AResponseToA2AStreamPayload: an a2a.stream_event frame is its
// payload under its branch, a chunk none; the projections of a frame are
// filled on a copy, the ACP one a session/update for a text chunk.
func TestE2AResponseToA2AStreamPayload(t *testing.T) {
	r := conformance.Frame("r", 0, e2a.KindA2AStreamEvent, e2a.StatusInProgress, false, e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate,
		Payload: map[string]any{"task_id": "t", "status": map[string]any{"state": "TASK_STATE_WORKING"}}}, nil)
	got, ok := a2amap.E2AResponseToA2AStreamPayload(r)
	if !ok || len(got) != 1 || got[e2a.BranchStatusUpdate] == nil {
		t.Fatalf("%v %v", got, ok)
	}
	if _, ok := a2amap.E2AResponseToA2AStreamPayload(conformance.Chunk("r", 0, e2a.DeltaText, "x", "")); ok {
		t.Error("a chunk is not a stream payload")
	}
	// Projections are filled on request and do not change the frame.
	p := protocols.FillProjections(r)
	if p.Projections["a2a"] == nil || r.Projections != nil {
		t.Fatalf("projections %v / original %v", p.Projections, r.Projections)
	}
	c := protocols.FillProjections(conformance.Chunk("r", 0, e2a.DeltaText, "x", ""))
	acpProj, _ := c.Projections["acp"].(map[string]any)
	if acpProj["method"] != "session/update" {
		t.Fatalf("acp projection %v", c.Projections)
	}
}

// TestProjectionsWithoutACPTarget: the ACP projection is left out of a
// frame it cannot be projected to (spec §8's adapter "returns None if not
// applicable"): a response of a request without jsonrpc_id (a JSON-RPC
// result may not have id null), an update of one without session_id
// (sessionId "" names no session).
func TestProjectionsWithoutACPTarget(t *testing.T) {
	final := conformance.Frame("r", 1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "hi"}}, nil)
	chunk := conformance.Chunk("r", 0, e2a.DeltaText, "x", "")
	final.JSONRPCID, final.SessionID, chunk.JSONRPCID, chunk.SessionID = nil, "", nil, ""
	for name, r := range map[string]*e2a.Response{"final": final, "chunk": chunk} {
		if p := protocols.FillProjections(r); p.Projections["acp"] != nil {
			t.Errorf("%s of a request without jsonrpc_id or session_id: acp projection %v, want none", name, p.Projections["acp"])
		}
	}
	final.JSONRPCID = json.RawMessage(`7`)
	acpProj, _ := protocols.FillProjections(final).Projections["acp"].(map[string]any)
	if acpProj["id"] != float64(7) || acpProj["result"] == nil {
		t.Fatalf("final of a request with jsonrpc_id 7: acp projection %v", acpProj)
	}
}
