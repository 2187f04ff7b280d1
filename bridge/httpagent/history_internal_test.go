package httpagent

import (
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestWithHistory: the history member is added as the last member of the
// envelope's object (none when there is no earlier message), and the
// body stays one JSON object; an earlier turn's final frames read as the
// agent's message (interrupt, completion, error).
func TestWithHistory(t *testing.T) {
	msgs := []HistoryMessage{{Role: "user", RequestID: "r1", Text: "the weather"}, {Role: "agent", RequestID: "r1", State: e2a.StateInputRequired, Text: "Which city?"}}
	for in, want := range map[string]string{
		`{"request_id":"r2"}`: `{"request_id":"r2","history":[{"role":"user","request_id":"r1","text":"the weather"},{"role":"agent","request_id":"r1","text":"Which city?","state":"input-required"}]}`,
		"{}\n":                `{"history":[{"role":"user","request_id":"r1","text":"the weather"},{"role":"agent","request_id":"r1","text":"Which city?","state":"input-required"}]}`,
		`{"params":{"a":1}} `: `{"params":{"a":1},"history":[{"role":"user","request_id":"r1","text":"the weather"},{"role":"agent","request_id":"r1","text":"Which city?","state":"input-required"}]}`,
	} {
		got, err := withHistory([]byte(in), msgs)
		if err != nil || string(got) != want || !json.Valid(got) {
			t.Errorf("withHistory(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	if got, _ := withHistory([]byte(`{"a":1}`), nil); string(got) != `{"a":1}` {
		t.Errorf("no history: %s", got)
	}
	frame := func(kind, status string, body any) *e2a.Response {
		return &e2a.Response{IsFinal: true, ResponseKind: kind, Status: status, Body: e2a.MarshalBody(body)}
	}
	for _, c := range []struct {
		f    *e2a.Response
		want HistoryMessage
	}{
		{frame(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, e2a.InterruptBody(e2a.StateAuthRequired, "Sign in")), HistoryMessage{Role: "agent", State: e2a.StateAuthRequired, Text: "Sign in"}},
		{frame(e2a.KindComplete, e2a.StatusSucceeded, e2a.CompleteBody{Result: "Hello"}), HistoryMessage{Role: "agent", State: "succeeded", Text: "Hello", Result: "Hello"}},
		{frame(e2a.KindError, e2a.StatusFailed, e2a.ErrorBody{Code: "x", Message: "broke"}), HistoryMessage{Role: "agent", State: "failed", Code: "x", Text: "broke"}},
		{frame(e2a.KindA2AMessage, e2a.StatusSucceeded, map[string]any{"kind": "message", "role": "agent", "parts": []any{map[string]any{"kind": "text", "text": "Hi"}}}), HistoryMessage{Role: "agent", State: "succeeded", Text: "Hi"}},
	} {
		if got := agentMessage(c.f); got != c.want {
			t.Errorf("agentMessage(%s %s) = %+v, want %+v", c.f.ResponseKind, c.f.Body, got, c.want)
		}
	}
}
