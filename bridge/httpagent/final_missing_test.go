package httpagent_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestAnswerEndedWithoutFinalFrame: an NDJSON or SSE answer that ends
// before its final frame is retryable only when the connection may have
// cut it. A body whose end the agent itself wrote (its Content-Length
// reached, its last chunk sent, an HTTP/2 stream ended) is the agent's
// whole answer: it took the request and ended without a final word, and
// it will do so again, so the request ends upstream_protocol_error, not
// retryable, after one POST (as a JSON answer so framed already does:
// TestMalformedJSONAnswerNotRetriedWhenFramed). Such an answer ended
// upstream_unavailable, retryable, and one with no frame at all was POSTed
// again and again (re-running whatever the agent does). A connection
// reset mid-answer, or a body delimited by the connection's close (HTTP/1.0
// agents, Python's http.server), stays upstream_unavailable, retryable.
func TestAnswerEndedWithoutFinalFrame(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		answer    func(w http.ResponseWriter)
		code      string
		retryable bool
		calls     int32
	}{
		{"empty, content-length 0", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Content-Length", "0")
		}, bridge.CodeProtocol, false, 1},
		{"a frame, then chunked end", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = io.WriteString(w, chunk)
			w.(http.Flusher).Flush()
		}, bridge.CodeProtocol, false, 1},
		{"sse ended mid-event", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+chunk+"\ndata: {\"resp")
		}, bridge.CodeProtocol, false, 1},
		{"connection reset mid-answer", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = io.WriteString(w, chunk)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // no last chunk: the connection is cut
		}, bridge.CodeUnavailable, true, 1},
		{"close-delimited", func(w http.ResponseWriter) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			_, _ = io.WriteString(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n"+chunk)
			_ = buf.Flush()
		}, bridge.CodeUnavailable, true, 1},
	}
	calls := make([]atomic.Int32, len(cases))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env, err := e2a.FromJSON(mustRead(r))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		i := env.ParamInt("case", 0)
		calls[i].Add(1)
		cases[i].answer(w)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			eb := finalError(t, r.ask(t, fmt.Sprintf(`{"request_id":"nofinal-%d","params":{"case":%d}}`, i, i)))
			if eb.Code != c.code || eb.Retryable != c.retryable || calls[i].Load() != c.calls {
				t.Errorf("ended %s retryable=%v (%q) after %d POSTs; want %s retryable=%v after %d",
					eb.Code, eb.Retryable, eb.Message, calls[i].Load(), c.code, c.retryable, c.calls)
			}
		})
	}
}
