package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// serveEvents calls an Upstream whose model server (a real HTTP server)
// answers every chat completions call with body as an event stream, and
// returns the frames written and the call's error.
func serveEvents(t *testing.T, body string) (*agenttest.Writer, error) {
	t.Helper()
	return serveWith(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(body))
	})
}

// serveWith calls an Upstream whose model server (a real HTTP server)
// answers every chat completions call with h, and returns the frames
// written and the call's error.
func serveWith(t *testing.T, h http.HandlerFunc) (*agenttest.Writer, error) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client, err := bridge.NewClient(srv.URL + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	up, err := openai.New(client, "m")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := &agenttest.Writer{}
	return w, up.Call(ctx, &e2a.Envelope{RequestID: "q", Params: map[string]any{"content": "hi"}}, w)
}

// deltaText is the text of the frames' text deltas (read's).
func deltaText(t *testing.T, w *agenttest.Writer) string {
	t.Helper()
	if len(w.Frames()) == 0 {
		return ""
	}
	return read(t, w.Frames()).text
}

const helloEvents = `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}` + "\n\n" +
	`data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
	"data: [DONE]\n\n"

// TestSSEByteOrderMark: an event stream may start with a UTF-8 BOM, which
// every event-stream reader strips (WHATWG HTML §9.2.6). The bridge's
// reader did not (httpagent's did): it read the line "\ufeffdata: {...}"
// as a line that is no SSE field and failed the whole answer with
// upstream_protocol_error.
func TestSSEByteOrderMark(t *testing.T) {
	w, err := serveEvents(t, "\ufeff"+helloEvents)
	if err != nil || deltaText(t, w) != "Hi" || !w.Final() {
		t.Fatalf("a stream starting with a BOM: err %v, text %q, kinds %v; want the text \"Hi\" then e2a.complete",
			err, deltaText(t, w), w.Kinds())
	}
}

// TestSSELoneCRLineEnds: the event-stream format ends lines with CRLF, LF
// or a lone CR (WHATWG HTML §9.2.5: end-of-line = ( cr lf / cr / lf )), not
// with LF or CRLF only, as the bridge's reader had it: it split lines on
// LF only, so a stream with CR line ends was one line and the answer
// failed (upstream_unavailable, "ended mid-line").
func TestSSELoneCRLineEnds(t *testing.T) {
	w, err := serveEvents(t, strings.ReplaceAll(helloEvents, "\n", "\r"))
	if err != nil || deltaText(t, w) != "Hi" || !w.Final() {
		t.Fatalf("a stream with CR line ends: err %v, text %q, kinds %v; want the text \"Hi\" then e2a.complete",
			err, deltaText(t, w), w.Kinds())
	}
}

// TestStreamServerErrorRetryable: an error object sent mid-stream for a
// server-side failure is upstream_unavailable, retryable, as the same
// failure answered as an HTTP status is (bridge.FromResponse: 408 and
// 5xx). "api_error" is Anthropic's error type for its 500 ("an
// unexpected error internal to Anthropic's systems", sent in an error
// event mid-stream); 408 is a timeout. streamError mapped both to
// upstream_failed, not retryable (only "server_error", "overloaded",
// "internal" or a code ≥ 500 counted as a server failure).
func TestStreamServerErrorRetryable(t *testing.T) {
	hi := `data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n"
	for name, ev := range map[string]string{
		"api_error (Anthropic's 500)": "event: error\ndata: " + `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
		"code 408":                    "data: " + `{"error":{"message":"Request timed out","type":"timeout","code":408}}`,
	} {
		_, err := serveEvents(t, hi+ev+"\n\n")
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != bridge.CodeUnavailable || !be.Retryable {
			t.Errorf("%s: %v; want %s, retryable", name, err, bridge.CodeUnavailable)
		}
	}
}

// TestToolCallArgumentsBeforeName: a tool call whose arguments arrive
// before its id and name (another call starting in between) is one call,
// as the official client's accumulator assembles it: call 0 {id a, name
// f, args {}}, call 1 {id b, name g, args {}}. The bridge wrote call 0 as
// soon as call 1 started (its arguments were whole), without its name,
// then failed the answer on the fragment naming it ("a fragment of tool
// call 0 after its arguments were whole"): a call is now written early
// only once it has a name.
func TestToolCallArgumentsBeforeName(t *testing.T) {
	events := []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	}
	toolCallsAsOfficial(t, events, "[a f {} b g {}]")
}
