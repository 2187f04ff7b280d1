package openai_test

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestToolsMalformedRefused: tools and a tool_choice a chat completions
// server refuses with a 400 (a function's parameters that are no object,
// a description or strict of the wrong type, a tool_choice naming no
// function or no mode), and custom tools, whose calls the bridge neither
// streams nor replays (it carries function calls only), end the request
// invalid_request naming the member, the model not called: the client's
// mistake, never an upstream_rejected after a call.
func TestToolsMalformedRefused(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	fn := func(def map[string]any) []any { return []any{map[string]any{"type": "function", "function": def}} }
	refusedMembers(t, p, srv, "bad-tool-", []map[string]any{
		{"tools": []any{map[string]any{"type": "custom", "custom": map[string]any{"name": "grammar"}}}},
		{"tools": fn(map[string]any{"name": "f", "parameters": `{"type":"object"}`})},
		{"tools": fn(map[string]any{"name": "f", "parameters": []any{}})},
		{"tools": fn(map[string]any{"name": "f", "description": 3})},
		{"tools": fn(map[string]any{"name": "f", "strict": "yes"})},
		{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}, "x"}},
		{"tool_choice": "sometimes"},
		{"tool_choice": map[string]any{"type": "function"}},
		{"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": ""}}},
		{"tool_choice": map[string]any{"type": "custom", "custom": map[string]any{"name": "grammar"}}},
	})
	a := read(t, askWith(t, p, "", "good-tools", map[string]any{"content": "hi", "tools": append(fn(map[string]any{
		"name": "get_weather", "description": "d", "strict": true, "parameters": map[string]any{"type": "object"}}),
		fn(map[string]any{"name": "now"})...),
		"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "now"}}}, nil))
	if a.final.ResponseKind != e2a.KindComplete {
		t.Fatalf("well-formed tools: final %s %+v", a.final.ResponseKind, a.errBody)
	}
	for _, choice := range []string{"none", "auto", "required"} {
		a := read(t, askWith(t, p, "", "choice-"+choice, map[string]any{"content": "hi", "tools": weatherTools, "tool_choice": choice}, nil))
		if a.final.ResponseKind != e2a.KindComplete {
			t.Fatalf("tool_choice %q: final %s %+v", choice, a.final.ResponseKind, a.errBody)
		}
	}
}
