package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// call is a tool call a fixture holds.
type call struct{ ID, Name, Args string }

// want is what a fixture's stream holds, as the official client reads it
// and as the bridge must write it.
type want struct {
	id, model, content, reasoning, finish string
	calls                                 []call
	totalTokens                           int64 // 0: no usage chunk
	errCode                               string
	// thinkTags: the content starts with a <think> block, which the
	// official client keeps in the content and the bridge writes as
	// reasoning (splitThink says what the bridge writes).
	thinkTags bool
	// bridgeCalls, when set, is what the bridge writes of calls where it
	// deliberately reads the stream otherwise than the official client
	// (a name sent whole again with every fragment is kept once).
	bridgeCalls []call
	// contentParts: the stream's content is an array of parts in some
	// chunks (Mistral's reasoning models: thinking and text parts), which
	// the official client keeps raw: read from its raw JSON (contentOf).
	contentParts bool
	// whole: the fixture is one chat.completion object (testdata/<name>.json)
	// answered to the streamed call, as a server that does not stream
	// answers it; read by the official client's non-streaming call.
	whole bool
	// refusal: the model's refusal (delta.refusal), which the official
	// client keeps apart from the content and the bridge writes as text,
	// its result's refusal member saying so.
	refusal string
	// toolIndex is how the stream numbers its parallel calls: "" by
	// tool_calls[].index, as OpenAI does; "none" without an index (Gemini's
	// OpenAI-compatible endpoint); "zero" index 0 for every call (some
	// proxies). The official accumulator keys calls by index (a missing
	// one is 0) and merges those; their calls are checked from the
	// official client's chunks instead, a new id starting a call.
	toolIndex string
}

var fixtures = map[string]want{
	"text": {id: "chatcmpl-BtextPlain0001", model: "gpt-4.1-mini-2025-04-14",
		content: "Hello! How can I help you today?", finish: "stop"},
	// A stream whose chunks name no model (older llama.cpp servers, some
	// proxies): the bridge names the model it asked for (model "").
	"usage_nomodel": {id: "chatcmpl-NoModelNamed0013", content: "Hi", finish: "stop", totalTokens: 4},
	"usage": {id: "chatcmpl-BusageChunk0002", model: "gpt-4.1-mini-2025-04-14",
		content: "Paris is the capital.", finish: "stop", totalTokens: 23},
	"reasoning": {id: "0f6c2b3e-7a41-4d1c-9b8e-reasoning003", model: "deepseek-reasoner",
		content: "2 + 2 = 4.", reasoning: "The user asks for 2+2. That is 4.", finish: "stop", totalTokens: 30},
	"tools": {id: "chatcmpl-BparallelTools004", model: "gpt-4.1-mini-2025-04-14", finish: "tool_calls", totalTokens: 126,
		calls: []call{{"call_Wp1XeR4fA2", "get_weather", `{"city": "Paris"}`},
			{"call_Kz7LmQ9sB3", "get_weather", `{"city": "Tokyo", "unit": "c"}`}}},
	"tools_sequential": {id: "chatcmpl-BsequentialTools5", model: "gpt-4.1-mini-2025-04-14", finish: "tool_calls",
		calls: []call{{"call_seq0", "lookup", `{"q": "e2a"}`}, {"call_seq1", "now", `{}`}}},
	"error": {id: "chatcmpl-BmidStreamError06", model: "gpt-4.1-mini-2025-04-14", content: "Once upon a time",
		errCode: bridge.CodeUnavailable},
	"tools_indexless": {id: "vh9yaJ6hLsWz1MkP2LDn4AE", model: "gemini-2.5-flash", finish: "stop", totalTokens: 95,
		toolIndex: "none", calls: []call{{"function-call-13072861962153466717", "get_weather", `{"city":"London"}`},
			{"function-call-13072861962153466718", "get_time", `{"tz":"UTC"}`}}},
	// A server that streams its tool calls without ids (some local model
	// servers): the bridge names each call, uniquely in the session.
	"tools_idless": {id: "chatcmpl-BidlessTools00008", model: "gpt-4.1-mini-2025-04-14", finish: "tool_calls",
		calls: []call{{"", "lookup", `{"q": "e2a"}`}, {"", "now", `{}`}}},
	"tools_same_index": {id: "chatcmpl-BsameIndexTools07", model: "gpt-4.1-mini-2025-04-14", finish: "tool_calls",
		toolIndex: "zero", calls: []call{{"call_Pq3ZsX1", "lookup", `{"q": "e2a"}`}, {"call_Rt8WvY2", "lookup", `{"q": "nats"}`}}},
	// A call's function name in several fragments (OpenAI sends it once,
	// whole, in the call's first delta; some servers split it, or send it
	// whole again with every fragment, as MiniMax M2 behind NVIDIA NIM
	// does): the official accumulator appends every fragment's name; the
	// bridge appends a fragment unless it equals the name so far (the name
	// sent whole again), as Continue reads it: "read_fileread_file" is no
	// function a client can run.
	"tools_name_split": {id: "chatcmpl-BnameSplitTools11", model: "Qwen/Qwen3-8B", finish: "tool_calls",
		calls: []call{{"chatcmpl-tool-split1", "get_weather", `{"city": "Paris"}`}}},
	"tools_name_repeated": {id: "chatcmpl-BnameRepeated0012", model: "minimaxai/minimax-m2", finish: "tool_calls",
		calls:       []call{{"call_rep1", "read_fileread_fileread_file", `{"path": "a.txt"}`}},
		bridgeCalls: []call{{"call_rep1", "read_file", `{"path": "a.txt"}`}}},
	// Servers that answer a streamed call with the whole completion: OpenAI's
	// own format, and vLLM's with reasoning and parallel tool calls.
	"completion_text": {id: "chatcmpl-BwholeText0000009", model: "gpt-4.1-mini-2025-04-14", whole: true,
		content: "Hello from a server that does not stream.", finish: "stop", totalTokens: 21},
	// LM Studio's stream of a Qwen3 model: the reasoning inline in the
	// content, in a <think> block (its closing tag cut between deltas),
	// which the bridge writes as reasoning (thinkTags).
	"think_tags": {id: "chatcmpl-8cybkqa7743exgha66o2hg", model: "qwen3-30b-a3b-128k", thinkTags: true, finish: "stop",
		content: "<think>\nThe user says hello; answer briefly.\n</think>\n\nHello! How can I help?"},
	// OpenAI's stream of a refusal (structured outputs): the refusal in
	// delta.refusal, no content, finish_reason stop.
	"refusal": {id: "chatcmpl-BrefusalStructured7", model: "gpt-4o-2024-08-06", finish: "stop", totalTokens: 24,
		refusal: "I'm sorry, I can't help with that."},
	// llama.cpp's stream of a DeepSeek-R1 distilled model without a
	// reasoning parser (--reasoning-format none): the chat template opened
	// <think> in the prompt, so the content is the reasoning, </think>
	// (cut between deltas), then the answer. Without WithThinkOpen it is
	// text as it comes (TestThinkOpen: with it).
	"think_open": {id: "chatcmpl-R1distillThinkOpen01", model: "DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf", finish: "stop", totalTokens: 36,
		content: "Okay, the user says hi. I should greet them back.\n</think>\n\nHello! How can I assist you today?"},
	// llama.cpp's stream of the same model with --reasoning-format
	// deepseek-legacy (its chat parser before the PEG parsers, b6710): in a
	// stream the reasoning is kept in the content only, the <think> the
	// template opened written back before it and </think> after it, the
	// white space around it stripped; reasoning_content is not sent
	// (common/chat-parser.cpp try_parse_reasoning, reasoning_in_content:
	// add_content, never add_reasoning_content; test-chat-parser.cpp's
	// "<think>Cogito</think>"). The bridge writes the reasoning once.
	"think_legacy": {id: "chatcmpl-R1distillLegacy0001", model: "DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf", thinkTags: true,
		finish: "stop", totalTokens: 36,
		content: "<think>Okay, the user says hi. I should greet them back.</think>Hello! How can I assist you today?"},
	// Magistral's stream (Mistral's API): thinking parts, then text as a
	// part and as a string; usage in the last chunk.
	"magistral": {id: "c3c77283055240cbbaf6f01d384cfccb", model: "magistral-medium-2509", contentParts: true,
		content: "Hello! How can I help?", reasoning: "The user says hi's a greeting, I should return a greeting.",
		finish: "stop", totalTokens: 40},
	"completion_magistral": {id: "6b0a4d1c8e2f4a7f9c1d2e3f4a5b6c7d", model: "magistral-medium-2509", whole: true, contentParts: true,
		content: "Hello! How can I help?", reasoning: "A greeting: answer in kind.", finish: "stop", totalTokens: 30},
	// Hugging Face TGI's answer: the arguments a JSON object, not the
	// string holding it; no completion id.
	"completion_tools_object": {id: "", model: "Qwen/Qwen2-72B-Instruct", whole: true, finish: "eos_token", totalTokens: 349,
		calls: []call{{"0", "retrieve_payment_status", `{"transaction_id":"T1001"}`}}},
	"completion_tools": {id: "chatcmpl-wholeTools000010", model: "Qwen/Qwen3-8B", whole: true, finish: "tool_calls", totalTokens: 190,
		reasoning: "The user wants the weather in two cities: two calls.",
		calls:     []call{{"chatcmpl-tool-5a1c", "get_weather", `{"city": "Paris"}`}, {"chatcmpl-tool-9d2e", "get_weather", `{"city": "Tokyo", "unit": "c"}`}}},
}

// TestFixturesAreTheWireFormat: every fixture, served by the test server,
// is read by the official openai-go client (its SSE stream and
// ChatCompletionAccumulator) to what the fixture is said to hold: the
// fixtures are the real chat completions wire format, so the bridge's
// tests against them test the real thing.
func TestFixturesAreTheWireFormat(t *testing.T) {
	srv := newModelServer(t)
	client := openai.NewClient(option.WithBaseURL(srv.base()), option.WithAPIKey("sk-fixture"), option.WithMaxRetries(0))
	for name, w := range fixtures {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if w.whole {
				checkWholeFixture(t, ctx, client, name, w)
				return
			}
			stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model:         "m",
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("fixture:" + name)},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			})
			var acc openai.ChatCompletionAccumulator
			var reasoning string
			var fragments []openai.ChatCompletionChunkChoiceDeltaToolCall
			var partsText string // contentParts: the text, read from the raw content
			for stream.Next() {
				ch := stream.Current()
				if !acc.AddChunk(ch) {
					t.Fatalf("the accumulator refused chunk %s", ch.RawJSON())
				}
				for _, c := range ch.Choices {
					fragments = append(fragments, c.Delta.ToolCalls...)
					if w.contentParts {
						text, thinking := contentOf(t, c.Delta.JSON.Content.Raw())
						partsText += text
						reasoning += thinking
					}
					if f, ok := c.Delta.JSON.ExtraFields["reasoning_content"]; ok && f.Raw() != "null" {
						var s string
						if err := unmarshalString(f.Raw(), &s); err != nil {
							t.Fatalf("reasoning_content %s: %v", f.Raw(), err)
						}
						reasoning += s
					}
				}
			}
			var se *ssestream.StreamError
			switch err := stream.Err(); {
			case w.errCode != "" && !errors.As(err, &se):
				t.Fatalf("stream error %v, want the stream's error event", err)
			case w.errCode == "" && err != nil:
				t.Fatalf("stream: %v", err)
			}
			if acc.ID != w.id || acc.Model != w.model || len(acc.Choices) != 1 {
				t.Fatalf("accumulated id %q model %q, %d choices", acc.ID, acc.Model, len(acc.Choices))
			}
			got := acc.Choices[0]
			if w.contentParts {
				got.Message.Content = partsText
			}
			if got.Message.Content != w.content || reasoning != w.reasoning || got.Message.Refusal != w.refusal {
				t.Errorf("content %q reasoning %q refusal %q, want %q, %q and %q", got.Message.Content, reasoning, got.Message.Refusal,
					w.content, w.reasoning, w.refusal)
			}
			if w.errCode == "" && string(got.FinishReason) != w.finish {
				t.Errorf("finish_reason %q, want %q", got.FinishReason, w.finish)
			}
			if acc.Usage.TotalTokens != w.totalTokens {
				t.Errorf("total tokens %d, want %d", acc.Usage.TotalTokens, w.totalTokens)
			}
			var calls []call
			for _, tc := range got.Message.ToolCalls {
				calls = append(calls, call{tc.ID, tc.Function.Name, tc.Function.Arguments})
			}
			if w.toolIndex != "" {
				calls = callsByID(t, fragments, w.toolIndex)
			}
			if !equalCalls(calls, w.calls) {
				t.Errorf("tool calls %+v, want %+v", calls, w.calls)
			}
		})
	}
}

// checkWholeFixture checks a whole-completion fixture as the official
// client's non-streaming call reads it.
func checkWholeFixture(t *testing.T, ctx context.Context, client openai.Client, name string, w want) {
	t.Helper()
	c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("fixture:" + name)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != w.id || c.Model != w.model || len(c.Choices) != 1 || c.Usage.TotalTokens != w.totalTokens {
		t.Fatalf("completion id %q model %q, %d choices, %d tokens", c.ID, c.Model, len(c.Choices), c.Usage.TotalTokens)
	}
	got := c.Choices[0]
	var reasoning string
	if w.contentParts {
		got.Message.Content, reasoning = contentOf(t, got.Message.JSON.Content.Raw())
	}
	if f, ok := got.Message.JSON.ExtraFields["reasoning_content"]; ok {
		if err := unmarshalString(f.Raw(), &reasoning); err != nil {
			t.Fatalf("reasoning_content %s: %v", f.Raw(), err)
		}
	}
	if got.Message.Content != w.content || reasoning != w.reasoning || string(got.FinishReason) != w.finish {
		t.Errorf("content %q reasoning %q finish %q, want %q, %q, %q", got.Message.Content, reasoning, got.FinishReason,
			w.content, w.reasoning, w.finish)
	}
	var calls []call
	for _, tc := range got.Message.ToolCalls {
		args := tc.Function.Arguments
		if raw := tc.Function.JSON.Arguments.Raw(); strings.HasPrefix(raw, "{") {
			args = raw // arguments as an object, which the client keeps raw
		}
		calls = append(calls, call{tc.ID, tc.Function.Name, args})
	}
	if !equalCalls(calls, w.calls) {
		t.Errorf("tool calls %+v, want %+v", calls, w.calls)
	}
}

// callsByID assembles tool call fragments, as the official client reads
// them, by id (a fragment with a new id starts a call, one without
// continues the last), checking that each is numbered as toolIndex says.
func callsByID(t *testing.T, fragments []openai.ChatCompletionChunkChoiceDeltaToolCall, toolIndex string) []call {
	t.Helper()
	var calls []call
	for _, f := range fragments {
		if f.JSON.Index.Valid() != (toolIndex == "zero") || f.Index != 0 {
			t.Fatalf("fragment %s: numbered otherwise than %q", f.RawJSON(), toolIndex)
		}
		if f.ID != "" && (len(calls) == 0 || calls[len(calls)-1].ID != f.ID) {
			calls = append(calls, call{ID: f.ID})
		}
		if len(calls) == 0 {
			t.Fatalf("fragment %s before any call's id", f.RawJSON())
		}
		c := &calls[len(calls)-1]
		c.Name += f.Function.Name
		c.Args += f.Function.Arguments
	}
	return calls
}

// equalCalls reports whether the calls a are those b says: a call of b
// without an id (a fixture whose server gives none) matches one of any id.
func equalCalls(a, b []call) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if b[i].ID == "" {
			a[i].ID = ""
		}
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func unmarshalString(raw string, s *string) error { return json.Unmarshal([]byte(raw), s) }

// contentOf reads a delta's raw content as the official client keeps it: a
// string is text; an array holds text parts and thinking parts (their
// thinking an array of text parts).
func contentOf(t *testing.T, raw string) (text, thinking string) {
	t.Helper()
	if raw == "" || raw == "null" {
		return "", ""
	}
	if unmarshalString(raw, &text) == nil {
		return text, ""
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"thinking"`
	}
	if err := json.Unmarshal([]byte(raw), &parts); err != nil {
		t.Fatalf("content %s: %v", raw, err)
	}
	for _, p := range parts {
		switch p.Type {
		case "text":
			text += p.Text
		case "thinking":
			for _, q := range p.Thinking {
				thinking += q.Text
			}
		}
	}
	return text, thinking
}

// splitThink is what the bridge writes of a content that starts with a
// <think> block: the block's text as reasoning, the rest, its leading line
// breaks dropped, as text.
func splitThink(content string) (reasoning, text string) {
	inner, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimLeft(content, " \t\r\n"), "<think>"), "</think>")
	if !ok {
		return "", content
	}
	return inner, strings.TrimLeft(rest, "\r\n")
}
