package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	oai "github.com/openai/openai-go/v3"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// sentRequest is the model server's call i (from 0), decoded with
// openai-go's request type (what an OpenAI-compatible server reads), and
// its raw members.
func sentRequest(t *testing.T, srv *modelServer, i int) (oai.ChatCompletionNewParams, map[string]json.RawMessage) {
	t.Helper()
	calls := srv.recordedCalls()
	if len(calls) <= i {
		t.Fatalf("%d upstream calls, want call %d", len(calls), i+1)
	}
	var params oai.ChatCompletionNewParams
	if err := json.Unmarshal(calls[i].Raw, &params); err != nil {
		t.Fatalf("the request does not decode as openai-go's ChatCompletionNewParams: %v\n%s", err, calls[i].Raw)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(calls[i].Raw, &raw); err != nil {
		t.Fatal(err)
	}
	return params, raw
}

// weatherTools are the tools a client declares: get_weather, in the chat
// completions shape.
var weatherTools = []any{map[string]any{"type": "function", "function": map[string]any{
	"name": "get_weather", "description": "The weather of a city",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required": []any{"city"}}}}}

// TestParamsMergedAndCapped: the operator's parameters (WithParams) go
// into every request; a client's (E2A params) replace them, but a client's
// max_tokens above the operator's is capped to it; what the bridge owns
// (model, messages, stream, stream_options, n) is never the client's.
// The body decodes with openai-go's request type to what was asked.
func TestParamsMergedAndCapped(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{up: []openai.Option{openai.WithParams(map[string]any{
		"temperature": 0.2, "max_tokens": 100, "seed": 7, "reasoning_effort": "low"})}})

	read(t, ask(t, p, "", "params-operator", "hi", nil))
	got, raw := sentRequest(t, srv, 0)
	if got.Temperature.Value != 0.2 || got.MaxTokens.Value != 100 || got.Seed.Value != 7 || got.ReasoningEffort != "low" {
		t.Fatalf("operator defaults: temperature %v max_tokens %v seed %v reasoning_effort %q\n%s",
			got.Temperature, got.MaxTokens, got.Seed, got.ReasoningEffort, srv.recordedCalls()[0].Raw)
	}

	read(t, askWith(t, p, "", "params-client", map[string]any{"content": "hi",
		"temperature": 0.9, "top_p": 0.5, "max_tokens": 500, "stop": []any{"END"}, "presence_penalty": 0.1,
		"frequency_penalty": -0.1, "response_format": map[string]any{"type": "json_object"},
		"tools": weatherTools, "tool_choice": "auto", "parallel_tool_calls": false,
		"model": "another-model", "stream": false, "stream_options": map[string]any{"include_usage": false},
		"n": 3, "messages": []any{map[string]any{"role": "system", "content": "injected"}}}, nil))
	got, raw = sentRequest(t, srv, 1)
	switch {
	case got.Temperature.Value != 0.9, got.TopP.Value != 0.5, got.PresencePenalty.Value != 0.1,
		got.FrequencyPenalty.Value != -0.1, got.Seed.Value != 7:
		t.Fatalf("sampling: %s", srv.recordedCalls()[1].Raw)
	case got.MaxTokens.Value != 100:
		t.Fatalf("max_tokens %v, want the client's 500 capped to the operator's 100", got.MaxTokens)
	case !slices.Equal(got.Stop.OfStringArray, []string{"END"}):
		t.Fatalf("stop %+v", got.Stop)
	case got.ResponseFormat.OfJSONObject == nil:
		t.Fatalf("response_format %s", raw["response_format"])
	case len(got.Tools) != 1 || got.Tools[0].OfFunction == nil || got.Tools[0].OfFunction.Function.Name != "get_weather":
		t.Fatalf("tools %s", raw["tools"])
	case got.ToolChoice.OfAuto.Value != "auto", got.ParallelToolCalls.Value:
		t.Fatalf("tool_choice %s parallel_tool_calls %s", raw["tool_choice"], raw["parallel_tool_calls"])
	case got.Model != "test-model", string(raw["stream"]) != "true", string(raw["stream_options"]) != `{"include_usage":true}`,
		raw["n"] != nil, len(got.Messages) != 1:
		t.Fatalf("the bridge's own members taken from the client: %s", srv.recordedCalls()[1].Raw)
	}

	read(t, askWith(t, p, "", "params-below", map[string]any{"content": "hi", "max_completion_tokens": 50}, nil))
	got, raw = sentRequest(t, srv, 2)
	if got.MaxCompletionTokens.Value != 50 || raw["max_tokens"] != nil {
		t.Fatalf("a client's max_completion_tokens under the limit: %s", srv.recordedCalls()[2].Raw)
	}
}

// TestParamsWrongTypeRefused: a client's parameter of the wrong JSON type
// ends the request invalid_request naming it, the model not called.
func TestParamsWrongTypeRefused(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	refusedMembers(t, p, srv, "bad-param-", []map[string]any{
		{"temperature": "hot"},
		{"max_tokens": 1.5},
		{"max_completion_tokens": 0},
		{"seed": "7"},
		{"stop": 3},
		{"stop": []any{"a", 1}},
		{"response_format": "json"},
		{"tools": "get_weather"},
		{"tools": []any{map[string]any{"type": "function"}}},
		{"tool_choice": 5},
		{"parallel_tool_calls": "yes"},
		{"reasoning_effort": 3},
		{"top_p": nil},
	})
}

// TestWithParamsRefused: an operator's parameter that is not a chat
// completions member the bridge sends, or of the wrong type, is refused
// with bridge.ErrInvalidOption naming it; ParseParams reads a JSON object.
func TestWithParamsRefused(t *testing.T) {
	client, err := bridge.NewClient("http://127.0.0.1:1/v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]any{
		{"model": "x"}, {"messages": []any{}}, {"stream": false}, {"stream_options": map[string]any{}}, {"n": 2},
		{"bogus": 1}, {"temperature": "hot"}, {"max_tokens": -1}, {"tools": []any{1}}, {"metadata": map[string]any{"k": 1}},
	} {
		var member string
		for k := range bad {
			member = k
		}
		_, err := openai.New(client, "m", openai.WithParams(bad))
		if !errors.Is(err, bridge.ErrInvalidOption) || !strings.Contains(err.Error(), member) {
			t.Errorf("%v: %v, want ErrInvalidOption naming %s", bad, err, member)
		}
	}
	if _, err := openai.New(client, "m", openai.WithParams(map[string]any{"temperature": 1, "max_tokens": int64(10),
		"stop": []string{"x"}, "user": "ops", "metadata": map[string]string{"team": "a"}, "logit_bias": map[string]int{"50256": -100}})); err != nil {
		t.Fatalf("Go values of the right types: %v", err)
	}
	m, err := openai.ParseParams(`{"temperature": 0.3, "max_tokens": 256}`)
	if err != nil || len(m) != 2 {
		t.Fatalf("ParseParams: %v %v", m, err)
	}
	if _, err := openai.New(client, "m", openai.WithParams(m)); err != nil {
		t.Fatalf("WithParams(ParseParams(...)): %v", err)
	}
	for _, s := range []string{`[1]`, `{"temperature": "hot"}`, `{"temperature": 1} x`, `{"stream": true}`} {
		if _, err := openai.ParseParams(s); !errors.Is(err, bridge.ErrInvalidOption) {
			t.Errorf("ParseParams(%s): %v, want ErrInvalidOption", s, err)
		}
	}
}

// toolResult is an E2A data part holding a function_response (the
// A2A DataPart as the normalizer keeps it in params.data_parts).
func toolResult(id, name string, response any) map[string]any {
	return map[string]any{"data": map[string]any{"id": id, "name": name, "response": response},
		"metadata": map[string]any{"type": e2a.ToolFunctionResponse}}
}

// TestToolLoop: turn 1 declares tools and the model answers two tool calls
// (function_call frames); turn 2 sends their results (no text) and the
// model receives system, user, the assistant message holding the calls,
// then one tool message per result (tool_call_id, the response as JSON
// text), in that order; turn 3's plain text gets that exchange and the
// model's answer to it as history.
func TestToolLoop(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	session := map[string]any{"session_id": "sess-tools"}
	sys := "Use the tools."
	a := read(t, askWith(t, p, "", "tools-1", map[string]any{"content": "fixture:tools", "system": sys, "tools": weatherTools}, session))
	if a.final.ResponseKind != e2a.KindComplete || !equalCalls(a.calls, fixtures["tools"].calls) {
		t.Fatalf("turn 1: final %s, calls %+v", a.final.ResponseKind, a.calls)
	}
	srv.setScript(func(n int, w http.ResponseWriter, _ *http.Request, body chatRequest) bool {
		replay(w, echoStream("chatcmpl-after-tools", body.Model, "Paris 18, Tokyo 22"))
		return true
	})
	a = read(t, askWith(t, p, "", "tools-2", map[string]any{"system": sys, "tools": weatherTools, "data_parts": []any{
		toolResult("call_Wp1XeR4fA2", "get_weather", map[string]any{"temp_c": 18}),
		toolResult("call_Kz7LmQ9sB3", "get_weather", "22 C"),
	}}, session))
	if a.final.ResponseKind != e2a.KindComplete || a.text != "Paris 18, Tokyo 22" {
		t.Fatalf("turn 2: final %s %+v, text %q", a.final.ResponseKind, a.errBody, a.text)
	}
	got, _ := sentRequest(t, srv, 1)
	want := []string{"system: " + sys, "user: fixture:tools",
		`assistant:  calls call_Wp1XeR4fA2 get_weather {"city": "Paris"}; call_Kz7LmQ9sB3 get_weather {"city": "Tokyo", "unit": "c"}`,
		`tool call_Wp1XeR4fA2: {"temp_c":18}`, "tool call_Kz7LmQ9sB3: 22 C"}
	wantMessages(t, "turn 2", describeMessages(got), want...)
	if len(got.Tools) != 1 || got.Tools[0].OfFunction == nil {
		t.Fatalf("turn 2: tools %+v", got.Tools)
	}

	srv.setScript(nil)
	read(t, askWith(t, p, "", "tools-3", map[string]any{"content": "thanks", "system": sys}, session))
	got, _ = sentRequest(t, srv, 2)
	wantMessages(t, "turn 3", describeMessages(got), append(want, "assistant: Paris 18, Tokyo 22", "user: thanks")...)
}

// TestToolResultsRefused: a tool result answering no call of the
// conversation's last turn, or a turn answering only some of its calls,
// ends the request invalid_request naming the call, the model not
// called; a turn that answers none of the calls (plain text) is sent
// without the tool-call turn, as before.
func TestToolResultsRefused(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	result := toolResult("call_Wp1XeR4fA2", "get_weather", "18")
	refused := func(id string, params, extra map[string]any, call string) {
		t.Helper()
		before := len(srv.recordedCalls())
		a := read(t, askWith(t, p, "", id, params, extra))
		if a.final.ResponseKind != e2a.KindError || a.errBody.Code != e2a.ErrCodeInvalidRequest ||
			!strings.Contains(a.errBody.Message, call) {
			t.Fatalf("%s: final %s %+v, want invalid_request naming %s", id, a.final.ResponseKind, a.errBody, call)
		}
		if n := len(srv.recordedCalls()); n != before {
			t.Fatalf("%s: the model was called", id)
		}
	}
	refused("no-conversation", map[string]any{"data_parts": []any{result}}, nil, "call_Wp1XeR4fA2")
	session := map[string]any{"session_id": "sess-refused"}
	refused("first-turn", map[string]any{"data_parts": []any{result}}, session, "call_Wp1XeR4fA2")
	read(t, ask(t, p, "", "tools-1", "fixture:tools", session))
	refused("partial", map[string]any{"data_parts": []any{result}}, session, "call_Kz7LmQ9sB3")
	refused("unknown", map[string]any{"data_parts": []any{result, toolResult("call_Kz7LmQ9sB3", "get_weather", "22"),
		toolResult("call_other", "get_weather", "?")}}, session, "call_other")
	refused("no-id", map[string]any{"data_parts": []any{map[string]any{"data": map[string]any{"response": "x"},
		"metadata": map[string]any{"type": e2a.ToolFunctionResponse}}}}, session, "data_parts[0]")

	read(t, ask(t, p, "", "moved-on", "never mind", session))
	wantMessages(t, "a turn answering no call", lastMessages(t, srv), "user: never mind")
}

// describeMessages is the messages of a request as lines: "role: text",
// an assistant's tool calls after it ("calls ID NAME ARGS; ..."), a tool
// message as "tool ID: text".
func describeMessages(p oai.ChatCompletionNewParams) []string {
	var out []string
	for _, m := range p.Messages {
		switch {
		case m.OfSystem != nil:
			out = append(out, "system: "+m.OfSystem.Content.OfString.Value)
		case m.OfUser != nil:
			out = append(out, "user: "+m.OfUser.Content.OfString.Value)
		case m.OfAssistant != nil:
			s := "assistant: " + m.OfAssistant.Content.OfString.Value
			var calls []string
			for _, c := range m.OfAssistant.ToolCalls {
				if f := c.OfFunction; f != nil {
					calls = append(calls, f.ID+" "+f.Function.Name+" "+f.Function.Arguments)
				} else {
					calls = append(calls, "a call that is not a function")
				}
			}
			if len(calls) > 0 {
				s += " calls " + strings.Join(calls, "; ")
			}
			out = append(out, s)
		case m.OfTool != nil:
			out = append(out, "tool "+m.OfTool.ToolCallID+": "+m.OfTool.Content.OfString.Value)
		default:
			out = append(out, "another message")
		}
	}
	return out
}

// TestToolLoopA2A: an A2A client answers the model's tool calls with
// function_response DataParts (the trpc interaction spec) in the same
// context: the model gets the assistant message holding the calls, then
// the tool messages.
func TestToolLoopA2A(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := a2aupstream.Client(t, p.URL)
	send := func(contextID string, parts ...*a2a.Part) a2a.SendMessageResult {
		t.Helper()
		msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
		msg.ContextID = contextID
		msg.Metadata = map[string]any{"interaction_spec_version": "0.1"}
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		return res
	}
	task, ok := send("", a2a.NewTextPart("fixture:tools")).(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("turn 1: %+v", task)
	}
	srv.setScript(func(n int, w http.ResponseWriter, _ *http.Request, body chatRequest) bool {
		replay(w, echoStream("chatcmpl-after-tools", body.Model, "Paris 18, Tokyo 22"))
		return true
	})
	result := func(id, response string) *a2a.Part {
		p := a2a.NewDataPart(map[string]any{"id": id, "name": "get_weather", "response": response})
		p.Metadata = map[string]any{"type": e2a.ToolFunctionResponse}
		return p
	}
	send(task.ContextID, result("call_Wp1XeR4fA2", "18 C"), result("call_Kz7LmQ9sB3", "22 C"))
	got, _ := sentRequest(t, srv, 1)
	wantMessages(t, "turn 2", describeMessages(got), "user: fixture:tools",
		`assistant:  calls call_Wp1XeR4fA2 get_weather {"city": "Paris"}; call_Kz7LmQ9sB3 get_weather {"city": "Tokyo", "unit": "c"}`,
		"tool call_Wp1XeR4fA2: 18 C", "tool call_Kz7LmQ9sB3: 22 C")
}

// TestToolExchangeKeptWhole: with WithMaxHistoryTurns(1), the turn after
// a tool exchange gets the whole exchange (the turn that made the calls
// and the one that answered them), never tool messages without the calls
// they answer.
func TestToolExchangeKeptWhole(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{up: []openai.Option{openai.WithMaxHistoryTurns(1)}})
	session := map[string]any{"session_id": "sess-window"}
	read(t, ask(t, p, "", "w-0", "before", session))
	read(t, ask(t, p, "", "w-1", "fixture:tools", session))
	srv.setScript(func(n int, w http.ResponseWriter, _ *http.Request, body chatRequest) bool {
		replay(w, echoStream("chatcmpl-after-tools", body.Model, "done"))
		return true
	})
	read(t, askWith(t, p, "", "w-2", map[string]any{"data_parts": []any{
		toolResult("call_Wp1XeR4fA2", "get_weather", "18"), toolResult("call_Kz7LmQ9sB3", "get_weather", "22")}}, session))
	srv.setScript(nil)
	read(t, ask(t, p, "", "w-3", "thanks", session))
	got, _ := sentRequest(t, srv, 3)
	wantMessages(t, "after the exchange", describeMessages(got), "user: fixture:tools",
		`assistant:  calls call_Wp1XeR4fA2 get_weather {"city": "Paris"}; call_Kz7LmQ9sB3 get_weather {"city": "Tokyo", "unit": "c"}`,
		"tool call_Wp1XeR4fA2: 18", "tool call_Kz7LmQ9sB3: 22", "assistant: done", "user: thanks")
	read(t, ask(t, p, "", "w-4", "and?", session))
	wantMessages(t, "one turn later", lastMessages(t, srv), "user: thanks", "assistant: echo: thanks", "user: and?")
}

// refusedMembers sends one request (idPrefix and a letter) per case, each
// a params member and its value beside a text, and checks that each ends
// invalid_request naming its member and that the model was never called.
func refusedMembers(t *testing.T, p *pipetest.Pipeline, srv *modelServer, idPrefix string, cases []map[string]any) {
	t.Helper()
	for i, bad := range cases {
		var member string
		for k := range bad {
			member = k
		}
		params := map[string]any{"content": "hi"}
		for k, v := range bad {
			params[k] = v
		}
		a := read(t, askWith(t, p, "", idPrefix+string(rune('a'+i)), params, nil))
		if a.final.ResponseKind != e2a.KindError || a.errBody.Code != e2a.ErrCodeInvalidRequest ||
			!strings.Contains(a.errBody.Message, member) {
			t.Errorf("%v: final %s %+v, want invalid_request naming %s", bad, a.final.ResponseKind, a.errBody, member)
		}
	}
	if n := len(srv.recordedCalls()); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
}
