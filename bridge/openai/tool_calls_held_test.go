package openai_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// TestToolCallsHeldPastAnswerBound: a server that streams a tool call
// whose arguments never become whole ("{"), then more calls, each whole,
// then holds its answer open, makes the bridge hold those calls (they are
// written in order, after the first): once they are more than is left of
// the answer bound (bridge.WithMaxAnswerBytes, 1 MiB here) the request
// ends upstream_protocol_error, not retryable, naming the bound, and the
// call is cut. The bound counts only the frames written, so the bridge
// held every call (up to 256 of up to 1 MiB each) until the server ended
// its answer or went silent for the idle timeout: the request ended
// upstream_timeout, retryable, after the server had sent all its 62 MiB.
func TestToolCallsHeldPastAnswerBound(t *testing.T) {
	t.Parallel()
	srv := newModelServer(t)
	sent := make(chan int, 1)
	srv.setScript(func(_ int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(call int, args string) bool {
			_, err := io.WriteString(w, chunkEvent(fmt.Sprintf(
				`{"tool_calls":[{"index":%d,"id":"call%d","type":"function","function":{"name":"f","arguments":%q}}]}`, call, call, args), "null"))
			w.(http.Flusher).Flush()
			return err == nil
		}
		calls := 0
		if event(0, "{") {
			for calls = 1; calls < 250 && event(calls, `{"x":"`+strings.Repeat("x", 256<<10)+`"}`); calls++ {
			}
		}
		select {
		case sent <- calls: // the first call's (a retry's would be another)
		default:
		}
		<-r.Context().Done() // open until the bridge ends the call
		return true
	})
	p := startBridge(t, srv, setup{client: []bridge.ClientOption{bridge.WithIdleTimeout(3 * time.Second)},
		handler: []bridge.Option{bridge.WithMaxAnswerBytes(1 << 20)}})
	a := read(t, ask(t, p, "", "held-calls", "call tools", nil))
	if a.errBody.Code != bridge.CodeProtocol || a.errBody.Retryable || !strings.Contains(a.errBody.Message, "bound on the answer's bytes") {
		t.Fatalf("final frame %s %+v, want upstream_protocol_error, not retryable, naming the answer bound", a.final.ResponseKind, a.errBody)
	}
	if n := <-sent; n >= 250 {
		t.Fatalf("the server sent all its %d calls: the bridge read on past the bound", n)
	}
	if len(a.calls) != 0 {
		t.Fatalf("%d tool calls written, want none (the first never became whole)", len(a.calls))
	}
}
