package a2amap_test

import (
	"bytes"
	"encoding/json"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// mustJSON is v encoded.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return b
}

// nativeFrames are a2a.* frames of every event kind and part kind, in
// v0.3's JSON and in proto-style JSON, each once final and once not.
func nativeFrames() []*e2a.Response {
	parts := []any{
		map[string]any{"kind": "text", "text": "hello", "metadata": map[string]any{"thought": true}},
		map[string]any{"kind": "data", "data": map[string]any{"k": []any{1.0, "v"}}, "metadata": map[string]any{"type": "custom"}},
		map[string]any{"kind": "file", "file": map[string]any{"uri": "https://example.com/a.png", "mimeType": "image/png", "name": "a.png"}},
		map[string]any{"kind": "file", "file": map[string]any{"bytes": "aGVsbG8=", "mimeType": "text/plain"}},
		map[string]any{"text": "proto text"},
	}
	msg := map[string]any{"messageId": "m1", "role": "agent", "parts": parts, "metadata": map[string]any{"x": "y"}}
	bodies := []e2a.StreamEventBody{
		{Branch: e2a.BranchStatusUpdate, Payload: map[string]any{"taskId": "t1", "contextId": "c1", "final": true,
			"status": map[string]any{"state": "input-required", "message": msg, "timestamp": "2026-01-02T03:04:05Z"}}},
		{Branch: e2a.BranchStatusUpdate, Payload: map[string]any{"task_id": "t1", "context_id": "c1",
			"status": map[string]any{"state": "TASK_STATE_WORKING"}, "metadata": map[string]any{"m": 1.0}}},
		{Branch: e2a.BranchStatusUpdate, Payload: map[string]any{"status": map[string]any{"state": "failed"}}},
		{Branch: e2a.BranchArtifactUpdate, Payload: map[string]any{"append": true, "lastChunk": true,
			"artifact": map[string]any{"artifactId": "a1", "name": "n", "description": "d", "parts": parts}}},
		{Branch: e2a.BranchArtifactUpdate, Payload: map[string]any{"artifact": map[string]any{"artifactId": "a2", "parts": []any{}}}},
		{Branch: e2a.BranchMessage, Payload: msg},
		{Branch: e2a.BranchMessage, Payload: map[string]any{"messageId": "m2", "parts": []any{}}},
		{Branch: e2a.BranchTask, Payload: map[string]any{"id": "t1", "contextId": "c1",
			"status":    map[string]any{"state": "completed", "message": msg},
			"history":   []any{msg, map[string]any{"messageId": "u1", "role": "user", "parts": parts[:1]}},
			"artifacts": []any{map[string]any{"artifactId": "a1", "parts": parts}}, "metadata": map[string]any{"t": true}}},
	}
	var out []*e2a.Response
	for i, b := range bodies {
		for _, final := range []bool{false, true} {
			out = append(out, conformance.Frame("req-native", int64(2*i), e2a.KindA2AStreamEvent, e2a.StatusInProgress, final, b, nil))
		}
	}
	return out
}

// TestV03RoundTrip: the v0.3 edge is the inverse of the SDK's v0.3 → v1.0
// conversion, both ways. Every event an agent's a2a.* frame carries
// (v0.3 as written) converted to v1.0 and back is the same v0.3 bytes, its
// final flag kept by the mapper (Mapper.Final); and every event the mapper
// builds for the conformance scenarios and those frames, converted to v0.3
// and back, is the same v1.0 bytes.
func TestV03RoundTrip(t *testing.T) {
	for _, f := range nativeFrames() {
		old, err := a2amap.NativeEvent(f)
		if err != nil || old == nil {
			t.Fatalf("native event of %+v: %v", f.Body, err)
		}
		final := false
		if su, ok := old.(*legacy.TaskStatusUpdateEvent); ok {
			final = su.Final
		}
		v1, err := a2av0.ToV1Event(old)
		if err != nil {
			t.Fatal(err)
		}
		back, err := a2amap.V03Event(v1, final)
		if err != nil {
			t.Fatal(err)
		}
		if w, g := mustJSON(t, old), mustJSON(t, back); !bytes.Equal(w, g) {
			t.Errorf("v0.3 → v1.0 → v0.3:\n got %s\nwant %s", g, w)
		}
	}
	scenarios := conformance.Scenarios()
	scenarios = append(scenarios, conformance.Scenario{Name: "native", Frames: nativeFrames()},
		conformance.Scenario{Name: "text", Frames: conformance.TextFrames()})
	for _, sc := range scenarios {
		m := a2amap.NewStreamMapper(sc.RequestID(), a2amap.Params{TaskID: "task-1", ContextID: "ctx-1"}, 0)
		for i, f := range sc.Frames {
			evs, err := m.Events(f)
			if err != nil {
				t.Fatalf("%s frame %d: %v", sc.Name, i, err)
			}
			for _, ev := range evs {
				su, isStatus := ev.(*a2a.TaskStatusUpdateEvent)
				old, err := a2amap.V03Event(ev, isStatus && m.Final(su))
				if err != nil {
					t.Fatal(err)
				}
				back, err := a2av0.ToV1Event(old)
				if err != nil {
					t.Fatal(err)
				}
				w, g := mustJSON(t, a2a.StreamResponse{Event: ev}), mustJSON(t, a2a.StreamResponse{Event: back})
				if !bytes.Equal(bytes.ReplaceAll(w, []byte(`"parts":[]`), []byte(`"parts":null`)), g) {
					t.Errorf("%s frame %d: v1.0 → v0.3 → v1.0:\n got %s\nwant %s", sc.Name, i, g, w)
				}
			}
		}
	}
}

// TestFinal: the status-update a final frame's events end with is final
// (v0.3's flag), an agent's own is final when it says so or when it
// interrupts the turn, and no other is.
func TestFinal(t *testing.T) {
	for _, sc := range conformance.Scenarios() {
		m := a2amap.NewStreamMapper(sc.RequestID(), a2amap.Params{}, 0)
		for i, f := range sc.Frames {
			evs, err := m.Events(f)
			if err != nil {
				t.Fatal(err)
			}
			for j, ev := range evs {
				su, ok := ev.(*a2a.TaskStatusUpdateEvent)
				if !ok {
					continue
				}
				want := f.IsFinal && j == len(evs)-1
				if got := m.Final(su); got != want {
					t.Errorf("%s frame %d event %d (%s): final %v, want %v", sc.Name, i, j, su.Status.State, got, want)
				}
			}
		}
	}
	// An agent's own final status-update on a frame that is not final
	// keeps its flag; its working one is not final.
	m := a2amap.NewStreamMapper("req-native", a2amap.Params{}, 0)
	for _, f := range nativeFrames()[:4] {
		evs, err := m.Events(f)
		if err != nil {
			t.Fatal(err)
		}
		su := evs[0].(*a2a.TaskStatusUpdateEvent)
		want := su.Status.State == a2a.TaskStateInputRequired
		if got := m.Final(su); got != want {
			t.Errorf("%s (final frame %v): final %v, want %v", su.Status.State, f.IsFinal, got, want)
		}
	}
	if m.Final(m.StatusUpdate(a2a.TaskStateSubmitted, nil, nil)) {
		t.Error("an opening status-update is final")
	}
}
