package httpagent_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestZZTruncatedJSONAnswerRetried: an HTTP agent answering one JSON value
// with a body delimited by the connection's close (HTTP/1.0 style, as
// Python's http.server writes it: the examples' agent) whose connection
// drops mid-answer was cut off, not wrong. The package documentation:
// "An answer that ends before its final frame (the connection closed or
// reset, …) ends it with upstream_unavailable, retryable", and a call that
// failed retryably before any frame is retried, as the NDJSON and SSE
// readers treat a last line cut at EOF (errTruncated). The JSON answer
// was called upstream_protocol_error, not retryable, and never retried.
func TestTruncatedJSONAnswerRetried(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if calls.Add(1) == 1 {
			// The answer is cut mid-value: the body ends with the
			// connection, without a Content-Length or chunked framing.
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + `{"reply":"a long answer that is cut`)
			_ = buf.Flush()
			_ = conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"reply":"whole"}`)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{})
	frames := r.ask(t, `{"request_id":"json-cut","params":{"text":"hi"}}`)
	last := frames[len(frames)-1]
	if last.ResponseKind == e2a.KindError {
		eb, _ := last.Error()
		t.Fatalf("a JSON answer cut by a dropped connection ended the request %s (retryable %v) after %d call(s): %q; "+
			"want upstream_unavailable, retryable, and the call retried (the second POST answers)", eb.Code, eb.Retryable, calls.Load(), eb.Message)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("%d upstream calls, want 2 (the cut one retried)", got)
	}
}

// TestZZRetriedPOSTHistoryHoldsNoLaterTurn: the history member holds "the
// earlier turns of the request's conversation" (doc.go), and "a retried
// POST is the same turn" (docs/agents.md). Turn A of an E2A context is
// POSTed; while it is in flight turn B of the same context is sent and
// answered; A's POST then fails 503 and the bridge retries it. The retried
// POST of A carried B (a later turn: its user message and its answer) in
// its history, as if B came before A: history() (history.go) read the
// conversation again and kept every recorded request but A's own; now
// only those recorded before A.
func TestRetriedPOSTHistoryHoldsNoLaterTurn(t *testing.T) {
	t.Parallel()
	aArrived, bDone := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var bodiesA [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := mustRead(r)
		var env struct {
			RequestID string `json:"request_id"`
		}
		_ = json.Unmarshal(b, &env)
		if env.RequestID == "later-a" {
			mu.Lock()
			bodiesA = append(bodiesA, b)
			n := len(bodiesA)
			mu.Unlock()
			if n == 1 {
				close(aArrived)
				select {
				case <-bDone:
				case <-r.Context().Done():
				case <-time.After(25 * time.Second):
				}
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"response_kind":"e2a.complete","body":{"result":"answer of `+env.RequestID+`"}}`+"\n")
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{})
	aDone := make(chan error, 1)
	go func() {
		resp, err := r.post(`{"request_id":"later-a","context_id":"later-ctx","params":{"text":"turn A"}}`)
		if err == nil {
			_, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body))
			_ = resp.Body.Close()
		}
		aDone <- err
	}()
	select {
	case <-aArrived:
	case <-time.After(25 * time.Second):
		t.Fatal("turn A never reached the HTTP agent")
	}
	r.ask(t, `{"request_id":"later-b","context_id":"later-ctx","params":{"text":"turn B"}}`)
	close(bDone)
	select {
	case err := <-aDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("turn A never ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodiesA) != 2 {
		t.Fatalf("turn A POSTed %d times, want 2 (a 503, then the retry)", len(bodiesA))
	}
	for i, b := range bodiesA {
		var body struct {
			History []httpagent.HistoryMessage `json:"history"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		for _, m := range body.History {
			if m.RequestID == "later-b" {
				t.Errorf("POST %d of turn A: its history holds turn B, sent after A (%s message %q %v); want only earlier turns (none), as in A's first POST",
					i+1, m.Role, m.Text, m.Result)
			}
		}
	}
}
