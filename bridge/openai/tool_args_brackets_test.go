package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// oneToolCallStream is an OpenAI chat.completion.chunk stream of one tool call
// whose arguments arrive in the fragments args (the first chunk carries
// the call's index, id, type and name with empty arguments, as OpenAI
// streams them), then the finish reason, a usage chunk and [DONE].
func oneToolCallStream(id string, args ...string) []byte {
	var b bytes.Buffer
	ev := func(v map[string]any) {
		c, _ := json.Marshal(v)
		fmt.Fprintf(&b, "data: %s\n\n", c)
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1767225600,
			"model": "gpt-4.1-mini-2025-04-14", "system_fingerprint": "fp_e2a0test",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}, "usage": nil}
	}
	ev(chunk(map[string]any{"role": "assistant", "content": nil, "refusal": nil, "tool_calls": []any{map[string]any{
		"index": 0, "id": "call_code0001", "type": "function",
		"function": map[string]any{"name": "run_python", "arguments": ""}}}}, nil))
	for _, a := range args {
		ev(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
			"function": map[string]any{"arguments": a}}}}, nil))
	}
	ev(chunk(map[string]any{}, "tool_calls"))
	ev(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1767225600,
		"model": "gpt-4.1-mini-2025-04-14", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 9, "total_tokens": 19}})
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// TestToolArgumentsWithBracketsInAString: a tool call's arguments are
// one JSON object whose string value holds code ("m[i][j]"); the model's
// tokens split it between "]" and "[" (a fragment ending in "]", the next
// starting with "["). The official client assembles the one valid call;
// the bridge must write it as one function_call with those arguments. It
// took the split for "a second JSON value" (secondValue looked only at the
// last byte before and the first after, not whether the arguments so far
// were a whole value or inside a string) and failed the turn with
// upstream_protocol_error.
func TestToolArgumentsWithBracketsInAString(t *testing.T) {
	const id = "chatcmpl-BracketsInArgs01"
	frags := []string{`{"code": "`, `print(m[i]`, `[j])`, `"}`}
	want := `{"code": "print(m[i][j])"}`
	stream := oneToolCallStream(id, frags...)

	srv := newModelServer(t)
	srv.setScript(func(_ int, w http.ResponseWriter, _ *http.Request, _ chatRequest) bool {
		replay(w, stream)
		return true
	})

	// The stream is the real wire format: the official client reads it to
	// one call with the whole arguments.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(srv.base()), option.WithAPIKey("sk-fixture"), option.WithMaxRetries(0))
	s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("run it")}})
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if tc := acc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Arguments != want || !json.Valid([]byte(want)) {
		t.Fatalf("official client: %+v", tc)
	}

	p := startBridge(t, srv, setup{})
	a := read(t, ask(t, p, "", "brackets", "run it", nil))
	if a.final.ResponseKind != e2a.KindComplete || len(a.calls) != 1 || a.calls[0].Args != want ||
		a.calls[0].ID != "call_code0001" || a.calls[0].Name != "run_python" {
		t.Fatalf("final %s %+v, calls %+v; want e2a.complete and one call run_python %s", a.final.ResponseKind,
			a.errBody, a.calls, want)
	}
}
