package openai_test

import (
	"context"
	"errors"
	"fmt"
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

// The chunks of a short answer ("Hello world", stop, then the usage
// chunk), as OpenAI streams them.
const (
	quirkRole   = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`
	quirkHello  = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`
	quirkWorld  = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}`
	quirkFinish = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`
	quirkUsage  = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`
)

// TestFinishThenPingsCompletes: a server that, after the choice's
// finish_reason (and the usage chunk, or not), keeps the stream open with
// SSE comment pings (": ping") and never sends [DONE] nor closes it held
// the call until the request's context ended, the comments renewing the
// idle timeout, and the request then FAILED although the whole answer was
// streamed. The answer is complete at the finish reason: a usage chunk or
// [DONE] is waited for a short grace only, which comments do not renew,
// then the request completes with the finish reason, and the usage when
// it came. (The official openai-go client itself never returns on these
// bytes: its stream's Next blocks until the request's context ends, and
// fails with it; the chunks are what its accumulator reads.)
func TestFinishThenPingsCompletes(t *testing.T) {
	parsedChunks(t, []string{quirkRole, quirkHello, quirkWorld, quirkFinish, quirkUsage})
	for name, usage := range map[string]bool{"usage after pings": true, "no usage": false} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			ping := func(w http.ResponseWriter, r *http.Request, d time.Duration) bool {
				for end := time.Now().Add(d); time.Now().Before(end); {
					select {
					case <-r.Context().Done():
						return false
					case <-time.After(50 * time.Millisecond):
					}
					_, _ = w.Write([]byte(": ping\n\n"))
					w.(http.Flusher).Flush()
				}
				return true
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for _, c := range []string{quirkRole, quirkHello, quirkWorld, quirkFinish} {
					_, _ = w.Write([]byte("data: " + c + "\n\n"))
				}
				w.(http.Flusher).Flush()
				if usage {
					if !ping(w, r, 100*time.Millisecond) {
						return
					}
					_, _ = w.Write([]byte("data: " + quirkUsage + "\n\n"))
				}
				ping(w, r, time.Hour) // until the bridge ends the call
			}))
			t.Cleanup(srv.Close)
			client, err := bridge.NewClient(srv.URL+"/v1", bridge.WithIdleTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			up, err := openai.New(client, "m")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			defer cancel()
			w := &agenttest.Writer{}
			start := time.Now()
			err = up.Call(ctx, &e2a.Envelope{RequestID: "q", Params: map[string]any{"content": "hi"}}, w)
			took := time.Since(start)
			if err != nil || !w.Final() {
				t.Fatalf("after %v: err %v, kinds %v; want the answer completed", took, err, w.Kinds())
			}
			a := read(t, w.Frames())
			u, _ := a.result["usage"].(map[string]any)
			if a.text != "Hello world" || a.result["finish_reason"] != "stop" || (fmt.Sprint(u["total_tokens"]) == "7") != usage {
				t.Fatalf("text %q, result %v; want \"Hello world\", stop, usage %v", a.text, a.result, usage)
			}
			if took > 3*time.Second {
				t.Errorf("the call took %v after the finish reason (want the short grace)", took)
			}
		})
	}
}

// TestNamedEventIgnored: sse-starlette before 1.4.0 pings with an SSE
// event named ping whose data is a timestamp ("event: ping\r\ndata:
// 2024-03-01 10:00:00.123456"); the bridge decoded it as a chunk and
// failed the request with upstream_protocol_error. An event whose name is
// not the default ("message"), "error" or one carrying [DONE] is no chunk
// (an EventSource's onmessage never sees it): ignored. (The official
// openai-go client fails on these bytes, decoding every event's data as a
// chunk: "invalid character '-' after top-level value"; the chunks are
// what its accumulator reads.)
func TestNamedEventIgnored(t *testing.T) {
	parsedChunks(t, []string{quirkRole, quirkHello, quirkWorld, quirkFinish})
	crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	ping := "event: ping\r\ndata: 2024-03-01 10:00:00.123456\r\n\r\n"
	body := ping + crlf("data: "+quirkRole+"\n\ndata: "+quirkHello+"\n\n") + ping +
		"event: heartbeat\ndata: still here\n\n" + crlf("data: "+quirkWorld+"\n\ndata: "+quirkFinish+"\n\ndata: [DONE]\n\n")
	w, err := serveEvents(t, body)
	if err != nil || deltaText(t, w) != "Hello world" || !w.Final() {
		t.Fatalf("ping events: err %v, text %q, kinds %v; want \"Hello world\" then e2a.complete", err, deltaText(t, w), w.Kinds())
	}
}

// TestTextRateLimit: an error given only as text that says rate limit (an
// error event's data, or a 200 text/plain body) is upstream_rate_limited,
// retryable, as the JSON rate-limit errors are, and so retried before any
// frame, as a 429 is. The error event was upstream_failed, not retryable;
// the text/plain answer upstream_protocol_error. Text that says something
// else is classed as before. (The official openai-go client fails on the
// event: "invalid character 'T' looking for beginning of value".)
func TestTextRateLimit(t *testing.T) {
	parsedChunks(t, []string{quirkRole, quirkHello})
	head := "data: " + quirkRole + "\n\ndata: " + quirkHello + "\n\n"
	for text, code := range map[string]string{
		"Too many requests, please slow down":   bridge.CodeRateLimited,
		"Rate limit reached for this model":     bridge.CodeRateLimited,
		"HTTP 429: try again later":             bridge.CodeRateLimited,
		"CUDA out of memory":                    bridge.CodeFailed,
		"the prompt has 14290 tokens, too long": bridge.CodeFailed,
	} {
		_, err := serveEvents(t, head+"event: error\ndata: "+text+"\n\n")
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != code || be.Retryable != (code == bridge.CodeRateLimited) {
			t.Errorf("event: error %q after a frame: %v; want %s", text, err, code)
		}
	}
	for text, code := range map[string]string{
		"Too many requests, please slow down": bridge.CodeRateLimited,
		"429 Too Many Requests\n":             bridge.CodeRateLimited,
		"Hello, world":                        bridge.CodeProtocol,
	} {
		_, err := serveWith(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(text))
		})
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != code || be.Retryable != (code == bridge.CodeRateLimited) {
			t.Errorf("a 200 text/plain answer %q: %v; want %s", text, err, code)
		}
	}

	// Before any frame the bridge retries it, as a 429.
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	for name, first := range map[string]func(w http.ResponseWriter){
		"error event": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: error\ndata: Too many requests, please slow down\n\n"))
		},
		"text/plain": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("Too many requests, please slow down"))
		},
	} {
		t.Run(sanitize(name), func(t *testing.T) {
			before := len(srv.recordedCalls())
			srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool {
				if n-before > 1 {
					return false // the echo stream
				}
				first(w)
				return true
			})
			defer srv.setScript(nil)
			a := read(t, ask(t, p, "", "text-429-"+sanitize(name), "again", nil))
			if a.final.ResponseKind != e2a.KindComplete || a.text != "echo: again" {
				t.Fatalf("final %s %+v, text %q; want the retried call's answer", a.final.ResponseKind, a.errBody, a.text)
			}
			if got := len(srv.recordedCalls()) - before; got != 2 {
				t.Errorf("%d upstream calls, want 2", got)
			}
		})
	}
}
