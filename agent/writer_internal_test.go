package agent

import (
	"errors"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// Frames of Write are checked against §12.2 before anything is published.
func TestCheckRaw(t *testing.T) {
	chunk := e2a.ChunkBody{DeltaKind: "text", Delta: "x"}
	cases := []struct {
		name         string
		kind, status string
		body         any
		final, ok    bool
	}{
		{"chunk", e2a.KindChunk, e2a.StatusInProgress, chunk, false, true},
		{"chunk final in progress", e2a.KindChunk, e2a.StatusInProgress, chunk, true, false},
		{"chunk not final succeeded", e2a.KindChunk, e2a.StatusSucceeded, chunk, false, false},
		{"chunk without delta kind", e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{Delta: "x"}, false, false},
		{"chunk as map", e2a.KindChunk, e2a.StatusInProgress, map[string]any{"delta_kind": "text", "delta": "x"}, false, true},
		{"chunk map without delta kind", e2a.KindChunk, e2a.StatusInProgress, map[string]any{"delta": "x"}, false, false},
		{"chunk with ext body", e2a.KindChunk, e2a.StatusInProgress, e2a.ExtBody{ExtMethod: "m"}, false, false},
		{"error succeeded", e2a.KindError, e2a.StatusSucceeded, e2a.ErrorBody{Code: "c", Message: "m"}, true, false},
		{"error without code", e2a.KindError, e2a.StatusFailed, e2a.ErrorBody{Message: "m"}, true, false},
		{"error", e2a.KindError, e2a.StatusFailed, e2a.ErrorBody{Code: "c", Message: "m"}, true, true},
		{"complete failed", e2a.KindComplete, e2a.StatusFailed, e2a.CompleteBody{}, true, false},
		{"unknown kind", "x.y", e2a.StatusInProgress, map[string]any{}, false, false},
		{"bad status", e2a.KindExt, "done", e2a.ExtBody{ExtMethod: "m"}, true, false},
		{"ext final", e2a.KindExt, e2a.StatusSucceeded, e2a.ExtBody{ExtMethod: "m"}, true, true},
		{"acp update", e2a.KindACPSessionUpd, e2a.StatusInProgress, map[string]any{"sessionUpdate": "plan"}, false, true},
		{"stream event bad branch", e2a.KindA2AStreamEvent, e2a.StatusInProgress, e2a.StreamEventBody{Branch: "x"}, false, false},
		{"stream event", e2a.KindA2AStreamEvent, e2a.StatusInProgress, e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate, Payload: map[string]any{}}, false, true},
	}
	for _, c := range cases {
		r := e2a.Response{ProtocolVersion: "1.0", ResponseID: "r", RequestID: "q", Timestamp: e2a.Now(),
			Provenance: e2a.Provenance{SourceProtocol: "e2a"}, ResponseKind: c.kind, Status: c.status, IsFinal: c.final,
			Body: e2a.MarshalBody(c.body)}
		err := checkRaw(&r, c.body, nil)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
		if err != nil && !errors.Is(err, e2a.ErrInvalidResponse) {
			t.Errorf("%s: %v does not wrap ErrInvalidResponse", c.name, err)
		}
	}
}
