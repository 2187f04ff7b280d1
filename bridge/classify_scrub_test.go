package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// malformedHeaderServer is a raw TCP upstream that answers every request
// with a status line then a header line that is not "Name: value" (what a
// broken proxy or a non-HTTP service behind an HTTP port sends); it counts
// the requests it read.
func malformedHeaderServer(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
					return
				}
				calls.Add(1)
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nthis line is no header\r\nContent-Length: 2\r\n\r\n{}")
			}()
		}
	}()
	return "http://" + ln.Addr().String(), &calls
}

// TestMalformedHeadersStayProtocolError: an upstream whose answer has a
// malformed header line (net/http: "malformed MIME header line") sent an
// answer that is not HTTP: upstream_protocol_error, not retryable, and
// the Handler calls it once (classifyCall retries only a call cut short).
func TestMalformedHeadersStayProtocolError(t *testing.T) {
	url, calls := malformedHeaderServer(t)
	c, err := NewClient(url, WithIdleTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(`{}`)))
	resp, err := c.Do(req, nil)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a malformed answer succeeded")
	}
	var be *Error
	if !errors.As(err, &be) {
		t.Fatalf("error %T %v, want a *bridge.Error", err, err)
	}
	if be.Code != CodeProtocol || be.Retryable {
		t.Errorf("a malformed header line: %s retryable=%v (%v), want %s not retryable", be.Code, be.Retryable, err, CodeProtocol)
	}
	// Through the Handler: one call, not 1+retries.
	calls.Store(0)
	h, err := New("p", &clientUpstream{c: c, url: url}, WithMetrics(prometheus.NewRegistry()),
		WithRetry(2, time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_ = h.Serve(ctx, &e2a.Envelope{RequestID: "r1"}, &recWriter{})
	if n := calls.Load(); n != 1 {
		t.Errorf("the Handler called the malformed upstream %d times, want 1 (not retryable)", n)
	}
}

// resultWriter records the result of Complete.
type resultWriter struct {
	recWriter
	result any
}

func (w *resultWriter) Complete(r any) error { w.result = r; return w.recWriter.Complete(r) }

// TestHeaderWordNotSecret: a non-secret, multi-word header the operator
// sets (OpenRouter's X-Title: "Acme Helpdesk") is a secret as a whole
// only: its second word is no credential (only an Authorization value or
// one starting with an authentication scheme is split), so an HTTP agent's
// answer that holds "Helpdesk" reaches the client as written.
func TestHeaderWordNotSecret(t *testing.T) {
	const answer = `{"text":"The Helpdesk will call you back."}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, WithCredentials(Credentials{APIKey: "sk-0123456789abcdef",
		Headers: map[string]string{"X-Title": "Acme Helpdesk"}}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New("p", &clientUpstream{c: c, url: srv.URL, body: true}, WithMetrics(prometheus.NewRegistry()), WithRetry(0, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	w := &resultWriter{}
	if err := h.Serve(context.Background(), &e2a.Envelope{RequestID: "r1"}, w); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(w.result)
	if !strings.Contains(string(got), "Helpdesk will call") {
		t.Errorf("the HTTP agent's answer %s reached the client as %s: a word of a non-secret header was scrubbed", answer, got)
	}
}
