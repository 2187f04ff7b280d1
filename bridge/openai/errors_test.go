package openai_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// firstEvents is the start of an answer: the role chunk and one content
// delta ("echo"), flushed.
func firstEvents(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	evs := bytes.SplitAfter(echoStream("chatcmpl-partial", "m", "echo"), []byte("\n\n"))
	for _, ev := range evs[:2] {
		_, _ = w.Write(ev)
	}
	w.(http.Flusher).Flush()
}

// TestBadUpstream: every way an upstream can fail ends the request with
// the bridge's e2a.error code, retryable as the code says, and is retried
// only while nothing was written: 429, 503 and a body that ends at the
// connection's close in the middle of a line before any frame are retried
// (the second call answers), as is a whole JSON answer (no stream) that
// so ends in the middle of its object; a 500-coded error event, a connection cut
// mid-event or mid-line, garbage, a hang past the idle timeout, or an end
// without finish_reason after a frame are not; a refused key, garbage
// before any frame and an answer that is not an event stream are not
// retryable at all.
func TestBadUpstream(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{client: []bridge.ClientOption{bridge.WithIdleTimeout(300 * time.Millisecond)}})
	type script = func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool
	status := func(code int, retryAfter string) script {
		return func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
			if n > 1 {
				return false // the echo stream
			}
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			http.Error(w, `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`, code)
			return true
		}
	}
	// closeDelimited answers with a body that ends at the connection's
	// close (no Content-Length, no chunking, as Python's http.server does),
	// cut in the middle of a line: a clean end of the body, mid-line.
	closeDelimited := func(frames bool) script {
		return func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
			if n > 1 {
				return false // the echo stream
			}
			var start string
			if frames {
				evs := bytes.SplitAfter(echoStream("chatcmpl-partial", "m", "echo"), []byte("\n\n"))
				start = string(bytes.Join(evs[:2], nil))
			}
			hijacked(t, w, "text/event-stream", start+`data: {"id":"chatcmpl-partial","model":"m","choices":[{"ind`)
			return true
		}
	}
	// wholeCut answers with a whole chat.completion (no stream) in a
	// close-delimited body, the connection closed in the middle of the
	// object: a cut, as the event stream's above, not a bad answer.
	wholeCut := func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
		if n > 1 {
			return false // the echo stream
		}
		hijacked(t, w, "application/json", `{"id":"chatcmpl-whole","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hel`)
		return true
	}
	after := func(tail string) script {
		return func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
			firstEvents(w)
			_, _ = w.Write([]byte(tail))
			return true
		}
	}
	for _, tc := range []struct {
		name      string
		script    script
		code      string // "" : succeeded
		retryable bool
		calls     int
		text      string // the text frames before the end
	}{
		{"429 before any frame", status(http.StatusTooManyRequests, "0"), "", false, 2, "echo: 429 before any frame"},
		{"503 before any frame", status(http.StatusServiceUnavailable, ""), "", false, 2, "echo: 503 before any frame"},
		{"401", status(http.StatusUnauthorized, ""), bridge.CodeAuth, false, 1, ""},
		{"500 error event after a frame", after(`data: {"error":{"message":"boom","type":"internal_error","code":500}}` + "\n\n"),
			bridge.CodeUnavailable, true, 1, "ec"},
		{"cut mid-event after a frame", func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
			firstEvents(w)
			_, _ = w.Write([]byte(`data: {"id":"chatcmpl-partial","choi`))
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return true
		}, bridge.CodeUnavailable, true, 1, "ec"},
		{"cut mid-line before any frame", closeDelimited(false), "", false, 2, "echo: cut mid-line before any frame"},
		{"cut mid-line after a frame", closeDelimited(true), bridge.CodeUnavailable, true, 1, "ec"},
		{"whole answer cut mid-value before any frame", wholeCut, "", false, 2, "echo: whole answer cut mid-value before any frame"},
		{"garbage before any frame", func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("<html><body>Bad Gateway</body></html>\n\n"))
			return true
		}, bridge.CodeProtocol, false, 1, ""},
		{"garbage after a frame", after("data: {not json}\n\n"), bridge.CodeProtocol, false, 1, "ec"},
		{"no event stream", func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"chatcmpl-x","choices":[]}`))
			return true
		}, bridge.CodeProtocol, false, 1, ""},
		{"ends without finish_reason", after(""), bridge.CodeUnavailable, true, 1, "ec"},
		{"hangs after a frame", func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
			firstEvents(w)
			<-r.Context().Done() // until the bridge gives up
			return true
		}, bridge.CodeTimeout, true, 1, "ec"},
		{"hangs before the headers", func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
			<-r.Context().Done()
			return true
		}, bridge.CodeTimeout, true, 4, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.recordedCalls())
			srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool {
				return tc.script(n-before, w, r, body) // n counts this case's calls
			})
			defer srv.setScript(nil)
			id := "bad-" + sanitize(tc.name)
			a := read(t, ask(t, p, "", id, tc.name, nil))
			if got := len(srv.recordedCalls()) - before; got != tc.calls {
				t.Errorf("%d upstream calls, want %d", got, tc.calls)
			}
			if tc.code == "" {
				if a.final.ResponseKind != e2a.KindComplete || a.text != tc.text {
					t.Fatalf("final %s %+v, text %q", a.final.ResponseKind, a.errBody, a.text)
				}
				return
			}
			if a.final.ResponseKind != e2a.KindError || a.errBody.Code != tc.code || a.errBody.Retryable != tc.retryable {
				t.Fatalf("final %s %+v, want e2a.error %s retryable %v", a.final.ResponseKind, a.errBody, tc.code, tc.retryable)
			}
			if a.text != tc.text {
				t.Errorf("text before the error %q, want %q", a.text, tc.text)
			}
		})
	}
}

// hijacked answers 200 with Content-Type ct and body in a body that ends
// at the connection's close (no Content-Length, no chunking, as Python's
// http.server does), then closes the connection.
func hijacked(t *testing.T, w http.ResponseWriter, ct, body string) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	defer conn.Close()
	_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: " + ct + "\r\nConnection: close\r\n\r\n" + body)
	_ = buf.Flush()
}

// TestUnreachableUpstream: an upstream nothing listens on ends the request
// with upstream_unreachable, retryable, after the retries.
func TestUnreachableUpstream(t *testing.T) {
	p := startBridge(t, nil, setup{base: "http://" + testkit.ClosedAddr(t) + "/v1"})
	a := read(t, ask(t, p, "", "unreachable", "anyone there?", nil))
	if a.final.ResponseKind != e2a.KindError || a.errBody.Code != bridge.CodeUnreachable || !a.errBody.Retryable {
		t.Fatalf("final %s %+v", a.final.ResponseKind, a.errBody)
	}
}

// TestNoText: a request without text for the model is invalid_request,
// and the model is not called.
func TestNoText(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	a := read(t, askWith(t, p, "", "no-text", map[string]any{"attachment": "none"}, nil))
	if a.final.ResponseKind != e2a.KindError || a.errBody.Code != e2a.ErrCodeInvalidRequest || a.errBody.Retryable {
		t.Fatalf("final %s %+v", a.final.ResponseKind, a.errBody)
	}
	if n := len(srv.recordedCalls()); n != 0 {
		t.Fatalf("%d upstream calls", n)
	}
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// TestOptionsValidated: every option refuses a bad value with
// bridge.ErrInvalidOption, and New refuses a missing client or model.
func TestOptionsValidated(t *testing.T) {
	client, err := bridge.NewClient("http://127.0.0.1:1/v1")
	if err != nil {
		t.Fatal(err)
	}
	for name, opt := range map[string]openai.Option{
		"empty system":     openai.WithSystem(""),
		"huge system":      openai.WithSystem(strings.Repeat("s", openai.MaxSystemBytes+1)),
		"invalid utf8":     openai.WithSystem("\xff"),
		"history no pool":  openai.WithHistory("", &bridge.Conversations{}),
		"history no store": openai.WithHistory("p", nil),
		"negative turns":   openai.WithMaxHistoryTurns(-1),
		"too many turns":   openai.WithMaxHistoryTurns(bridge.MaxTurns + 1),
		"negative bytes":   openai.WithMaxHistoryBytes(-1),
		"too many bytes":   openai.WithMaxHistoryBytes(bridge.MaxHistoryBytesLimit + 1),
		"tiny event bound": openai.WithMaxEventBytes(100),
		"huge event bound": openai.WithMaxEventBytes(1 << 30),
		"nil logger":       openai.WithLogger(nil),
	} {
		if _, err := openai.New(client, "m", opt); !errors.Is(err, bridge.ErrInvalidOption) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := openai.New(nil, "m"); !errors.Is(err, bridge.ErrInvalidOption) {
		t.Errorf("nil client: %v", err)
	}
	if _, err := openai.New(client, " "); !errors.Is(err, bridge.ErrInvalidOption) {
		t.Errorf("blank model: %v", err)
	}
	up, err := openai.New(client, "m", openai.WithSystem("s"), openai.WithMaxHistoryTurns(0), openai.WithMaxHistoryBytes(0), openai.WithMaxEventBytes(1<<10))
	if err != nil || up.Name() != "openai http://127.0.0.1:1" || up.Model() != "m" {
		t.Fatalf("New: %v, name %q", err, up.Name())
	}
}

// TestLongAnswer: an answer larger than the server's max_payload is
// stored as text frames that fit, and the final frame, which cannot hold
// the whole content, holds the rest of the result and says so.
func TestLongAnswer(t *testing.T) {
	srv := newModelServer(t)
	_, nc := natstest.RunServer(t, natstest.WithMaxPayload(64<<10))
	p := startBridge(t, srv, setup{conn: nc})
	long := strings.Repeat("0123456789", 15<<10) // 150 KiB
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool {
		replay(w, echoStream("chatcmpl-long", "m", long))
		return true
	})
	a := read(t, ask(t, p, "", "long", "write a lot", nil))
	if a.final.ResponseKind != e2a.KindComplete || a.text != long {
		t.Fatalf("final %s, %d bytes of text", a.final.ResponseKind, len(a.text))
	}
	if _, has := a.result["content"]; has || a.result["content_omitted"] == nil || a.result["finish_reason"] != "stop" {
		t.Fatalf("final result %v", a.result)
	}
}

// TestLongRefusal: a refusal (delta.refusal) larger than the server's
// max_payload is the answer's text, stored as text frames that fit, and
// the final frame, without the content, says the answer is a refusal with
// the refusal's first 1,000 characters ("…" after them). The refusal was
// kept whole in that frame too, which the runtime refused: the request
// ended e2a.error frame_too_large after its text was stored.
func TestLongRefusal(t *testing.T) {
	srv := newModelServer(t)
	_, nc := natstest.RunServer(t, natstest.WithMaxPayload(64<<10))
	p := startBridge(t, srv, setup{conn: nc})
	part := strings.Repeat("I cannot. ", 1<<10) // 10 KiB a delta
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 15 {
			_, _ = io.WriteString(w, chunkEvent(`{"refusal":"`+part+`"}`, "null"))
		}
		_, _ = io.WriteString(w, chunkEvent(`{}`, `"stop"`)+"data: [DONE]\n\n")
		return true
	})
	a := read(t, ask(t, p, "", "long-refusal", "do something bad", nil))
	if a.final.ResponseKind != e2a.KindComplete || a.text != strings.Repeat(part, 15) {
		t.Fatalf("final %s %+v, %d bytes of text", a.final.ResponseKind, a.errBody, len(a.text))
	}
	if _, has := a.result["content"]; has || a.result["content_omitted"] == nil || a.result["refusal"] != part[:1000]+"…" {
		t.Fatalf("final result %v, want content_omitted and the refusal's start", a.result)
	}
}

// TestCancelReachesUpstream: cancelling a request whose model call is
// streaming ends it with e2a.error cancelled and closes the call to the
// model server (how an OpenAI-compatible call is cancelled).
func TestCancelReachesUpstream(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	started, gone := make(chan struct{}), make(chan struct{})
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool {
		firstEvents(w)
		close(started)
		<-r.Context().Done()
		close(gone)
		return true
	})
	post(t, p, "", map[string]any{"request_id": "to-cancel", "method": "chat.send", "is_stream": true,
		"params": map[string]any{"content": "talk forever"}})
	<-started
	if _, err := agent.Cancel(context.Background(), p.JS, "to-cancel"); err != nil {
		t.Fatal(err)
	}
	a := read(t, frames(t, p, "", "to-cancel"))
	if a.final.ResponseKind != e2a.KindError || a.errBody.Code != e2a.ErrCodeCancelled {
		t.Fatalf("final %s %+v, text %q", a.final.ResponseKind, a.errBody, a.text)
	}
	testkit.Receive(t, gone, 10*time.Second, "the model call is still open after the cancel")
}

// TestHTTP2ResetBeforeAnyFrameRetried: a model server reached over
// HTTP/2 (an https base URL: the client negotiates h2, as with OpenAI,
// or vLLM behind envoy or nginx) whose first call's stream is reset before
// any header (RST_STREAM INTERNAL_ERROR: a proxy draining, a backend
// restarting) wrote nothing: the bridge retries it, as it retries a reset
// HTTP/1.1 connection, and the second call answers. The request fails
// instead with upstream_protocol_error, not retryable, after one call.
func TestHTTP2ResetBeforeAnyFrameRetried(t *testing.T) {
	srv := &modelServer{t: t}
	srv.Server = httptest.NewUnstartedServer(http.HandlerFunc(srv.serve))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
		if n == 1 {
			panic(http.ErrAbortHandler) // HTTP/2: the stream reset, no headers
		}
		return false // the echo stream
	})
	p := startBridge(t, srv, setup{client: []bridge.ClientOption{bridge.WithTransport(srv.Client().Transport)}})

	a := read(t, ask(t, p, "", "h2-reset", "hello", nil))
	if a.final.ResponseKind != "e2a.complete" || a.text != "echo: hello" {
		t.Errorf("final %s %+v (text %q), want the second call's answer %q", a.final.ResponseKind, a.errBody, a.text, "echo: hello")
	}
	if got := len(srv.recordedCalls()); got != 2 {
		t.Errorf("%d upstream calls, want 2 (the reset one retried)", got)
	}
}
