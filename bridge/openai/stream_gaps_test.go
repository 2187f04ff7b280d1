package openai_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// parsedChunks checks that every event is a chunk the official openai-go
// accumulator takes, and returns the tool calls it assembles ("id name
// args" each).
func parsedChunks(t *testing.T, events []string) []string {
	t.Helper()
	var acc oai.ChatCompletionAccumulator
	for _, ev := range events {
		var c oai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil || !acc.AddChunk(c) {
			t.Fatalf("the official accumulator refuses %s: %v", ev, err)
		}
	}
	var calls []string
	for _, tc := range acc.Choices[0].Message.ToolCalls {
		calls = append(calls, fmt.Sprintf("%s %s %s", tc.ID, tc.Function.Name, tc.Function.Arguments))
	}
	return calls
}

// toolCallsAsOfficial checks that the official accumulator assembles the
// tool calls of events as official ("[id name args ...]"), and that the
// bridge writes the same calls, in that order, as its tool frames.
func toolCallsAsOfficial(t *testing.T, events []string, official string) {
	t.Helper()
	want := parsedChunks(t, events)
	if fmt.Sprint(want) != official {
		t.Fatalf("the official accumulator reads %q", want)
	}
	body := ""
	for _, ev := range events {
		body += "data: " + ev + "\n\n"
	}
	w, err := serveEvents(t, body+"data: [DONE]\n\n")
	var got []string
	for _, f := range w.Frames() {
		if c, cerr := f.Chunk(); cerr == nil && c.DeltaKind == e2a.DeltaTool {
			d := c.Delta.(map[string]any)
			got = append(got, fmt.Sprintf("%v %v %v", d["id"], d["name"], d["args"]))
		}
	}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tool calls %q, err %v; want %q", got, err, want)
	}
}

// TestLlamaCppStreamErrorField: llama.cpp's server (README: a supported
// model server) reports a failure that comes after the 200 headers as an
// "error:" field of its event stream, then "data: [DONE]"
// (handle_completions_impl: server_sent_event(sink, "error", error_data),
// error_data being format_error_response's {code, message, type}). That is
// an error object in the stream, which the package documentation maps by
// its code or type, as it does the same object sent as "event: error"
// (≥ 500 upstream_unavailable, retryable, and so retried
// before any frame; 400 upstream_rejected). The bridge's SSE reader takes
// any field but data/event/id/retry for "not a server-sent event stream"
// (sse.go next, default case) and fails the call with
// upstream_protocol_error, never retryable, its message the line cut to
// 60 characters: a server error is never retried, and a prompt over the
// context size is reported as a protocol fault.
func TestLlamaCppStreamErrorField(t *testing.T) {
	role := `{"id":"chatcmpl-llama01","object":"chat.completion.chunk","created":1767225600,"model":"qwen2.5","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}`
	parsedChunks(t, []string{role})
	for name, c := range map[string]struct {
		errData   string
		code      string
		retryable bool
	}{
		"server_error 500": {`{"code":500,"message":"Failed to parse tool call arguments as JSON","type":"server_error"}`,
			bridge.CodeUnavailable, true},
		"exceed_context_size_error 400": {`{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}`,
			bridge.CodeRejected, false},
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			var obj struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Type    string `json:"type"`
			}
			if err := json.Unmarshal([]byte(c.errData), &obj); err != nil || obj.Code == 0 || obj.Message == "" {
				t.Fatalf("error object %s: %v", c.errData, err)
			}
			w, err := serveEvents(t, "data: "+role+"\n\nerror: "+c.errData+"\n\ndata: [DONE]\n\n")
			var be *bridge.Error
			if !errors.As(err, &be) || be.Code != c.code || be.Retryable != c.retryable {
				t.Fatalf("llama.cpp's error field: err %v (frames %v); want %s retryable %v, as the same object in an \"event: error\" event is",
					err, w.Kinds(), c.code, c.retryable)
			}
		})
	}
}

// TestToolCallIDArrivingLate: a call streamed with its name and whole
// arguments but no id, whose id comes in a later fragment after another
// call started, is, as the official accumulator assembles it, call 0 {id
// a, name f, args {}} then call 1 {id b, name g, args {}}. The bridge
// writes call 0 as soon as call 1 starts (its arguments were whole,
// stream.go startCall → flush(idx, true)) under a made-up id
// call_<request>_0, then drops the fragment carrying its real id without
// a word (addFragment: a written call's fragment without arguments is
// ignored): the client sees a tool call id the model never gave.
func TestToolCallIDArrivingLate(t *testing.T) {
	events := []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":""}}]},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	}
	toolCallsAsOfficial(t, events, "[a f {} b g {}]")
}
