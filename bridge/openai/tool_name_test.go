package openai_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestToolCallWithoutName: a tool call no fragment names (a stream whose
// call has an id and arguments but no function.name, or a whole
// completion whose call's function has none) is, as the official client
// assembles it, a call of the function "": no call a client can run or
// answer. The bridge wrote it as a function_call tool delta with an empty
// name; it is upstream_protocol_error, not retryable, as other malformed
// tool calls are, and no tool delta is written. A name arriving in a later
// fragment (TestToolCallArgumentsBeforeName) still makes the call whole.
func TestToolCallWithoutName(t *testing.T) {
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	finish := head + `{},"finish_reason":"tool_calls"}]}`
	for name, events := range map[string][]string{
		"indexed": {
			head + `{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"arguments":"{\"x\":"}}]},"finish_reason":null}]}`,
			head + `{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":null}]}`,
			finish,
		},
		"after a named call": {
			head + `{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}`,
			head + `{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"arguments":"{}"}}]},"finish_reason":null}]}`,
			finish,
		},
		"without an index": {
			head + `{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"arguments":"{}"}}]},"finish_reason":null}]}`,
			finish,
		},
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			calls := parsedChunks(t, events)
			if len(calls) == 0 || strings.SplitN(calls[len(calls)-1], " ", 3)[1] != "" {
				t.Fatalf("the official accumulator reads %q: want the last call nameless", calls)
			}
			body := "data: " + strings.Join(events, "\n\ndata: ") + "\n\ndata: [DONE]\n\n"
			w, err := serveEvents(t, body)
			checkNameless(t, w.Frames(), err)
		})
	}

	t.Run("whole_completion", func(t *testing.T) {
		const whole = `{"id":"chatcmpl-nameless","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
		var c oai.ChatCompletion
		if err := json.Unmarshal([]byte(whole), &c); err != nil || len(c.Choices) != 1 || len(c.Choices[0].Message.ToolCalls) != 1 ||
			c.Choices[0].Message.ToolCalls[0].Function.Name != "" {
			t.Fatalf("the official client reads %+v (%v): want one nameless call", c.Choices, err)
		}
		w, err := serveWith(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(whole))
		})
		checkNameless(t, w.Frames(), err)
	})
}

// checkNameless checks that a call ended upstream_protocol_error, not
// retryable, naming the nameless call, with no tool delta written.
func checkNameless(t *testing.T, frames []*e2a.Response, err error) {
	t.Helper()
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeProtocol || be.Retryable || !strings.Contains(be.Message, "without a function name") {
		t.Errorf("err %v; want %s, not retryable, naming the call without a function name", err, bridge.CodeProtocol)
	}
	for _, f := range frames {
		if c, cerr := f.Chunk(); cerr == nil && c.DeltaKind == e2a.DeltaTool {
			if d, _ := c.Delta.(map[string]any); d["name"] == "" {
				t.Errorf("a nameless tool delta was written: %v", d)
			}
		}
	}
}
