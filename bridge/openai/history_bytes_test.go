package openai_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge/openai"
)

// historyBound is the WithMaxHistoryBytes of the tests below: two turns of
// 10 KiB of text (each stored twice, its envelope and the echo in its
// final frame, about 21 KiB a turn) fit, three do not.
const historyBound = 48 << 10

// TestHistoryBytesBoundOpenAI: with WithMaxHistoryBytes, the model gets
// the newest earlier turns whose stored bytes fit, the oldest dropped
// (without the bound every turn was read and sent).
func TestHistoryBytesBoundOpenAI(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{up: []openai.Option{openai.WithMaxHistoryBytes(historyBound)}})
	session := map[string]any{"session_id": "sess-bytes"}
	pad := strings.Repeat("x", 10<<10)
	for _, id := range []string{"b-0", "b-1", "b-2", "b-3"} {
		read(t, ask(t, p, "", id, id+pad, session))
	}
	read(t, ask(t, p, "", "b-4", "last", session))
	wantMessages(t, "under the bound", lastMessages(t, srv), "user: b-2"+pad, "assistant: echo: b-2"+pad,
		"user: b-3"+pad, "assistant: echo: b-3"+pad, "user: last")
}

// TestToolExchangeNotSplitByBytes: the bound cutting a tool exchange (the
// turn that made the calls past it, the one answering them with a text
// of its own within) leaves the exchange out whole: the answering turn's
// text and reply are not sent without the calls and results they follow.
func TestToolExchangeNotSplitByBytes(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{up: []openai.Option{openai.WithMaxHistoryBytes(historyBound)}})
	session := map[string]any{"session_id": "sess-bytes-tools"}
	read(t, ask(t, p, "", "x-0", "before", session))
	// The calling turn, made large (a system prompt of 40 KiB): within the
	// bound alone, so that the next turn's results still answer it.
	read(t, askWith(t, p, "", "x-1", map[string]any{"content": "fixture:tools", "system": strings.Repeat("s", 40<<10)}, session))
	srv.setScript(func(n int, w http.ResponseWriter, _ *http.Request, body chatRequest) bool {
		replay(w, echoStream("chatcmpl-after-tools", body.Model, "done"))
		return true
	})
	a := read(t, askWith(t, p, "", "x-2", map[string]any{"content": "and the weather?", "data_parts": []any{
		toolResult("call_Wp1XeR4fA2", "get_weather", "18"), toolResult("call_Kz7LmQ9sB3", "get_weather", "22")}}, session))
	if a.text != "done" {
		t.Fatalf("the answering turn: %q, %+v", a.text, a.errBody)
	}
	srv.setScript(nil)
	pad := strings.Repeat("y", 10<<10)
	read(t, ask(t, p, "", "x-3", "thanks"+pad, session))
	read(t, ask(t, p, "", "x-4", "and?", session))
	wantMessages(t, "the exchange past the bound", lastMessages(t, srv),
		"user: thanks"+pad, "assistant: echo: thanks"+pad, "user: and?")
}
