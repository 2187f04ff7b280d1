package openai_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
)

// TestStreamContentTypes: an answer to stream: true is taken for an event
// stream by its body, as the official clients take it (openai-python and
// openai-go read any 200 body of a streamed call as SSE, whatever its
// Content-Type), not by its Content-Type alone. vLLM, llama.cpp's server,
// Ollama's OpenAI layer and OpenAI send text/event-stream, but LitServe's
// OpenAISpec sent its "data:" lines as application/x-ndjson (until its
// issue #359), a Go server that sets no type has its stream sniffed as
// text/plain, and Starlette's StreamingResponse without a media type sends
// none. The bridge refused
// every answer not typed text/event-stream with upstream_protocol_error,
// never retried. What is clearly no stream, an HTML page or a JSON object
// that is neither a completion nor an error (Ollama's native format), is
// still upstream_protocol_error (a whole completion is read as one:
// TestBridgeFixtures; an error object as the upstream's error:
// TestErrorAnsweredWith200).
func TestStreamContentTypes(t *testing.T) {
	for _, tc := range []struct {
		ctype, body string
		ok          bool
	}{
		{"text/event-stream; charset=utf-8", helloEvents, true},
		{"application/x-ndjson", helloEvents, true},
		{"text/plain; charset=utf-8", helloEvents, true},
		{"", helloEvents, true},
		{"application/octet-stream", "\ufeff: keep-alive\r\n\r\n" + helloEvents, true},
		{"text/plain", "\n\nevent: message\n" + helloEvents, true},
		{"application/json", `{"id":"x","object":"list","data":[]}`, false},
		{"application/json", `{"object":"chat.completion","choices":[{"message":{"tool_calls":[null]}}]}`, false}, // it panicked
		{"text/html; charset=utf-8", "<!DOCTYPE html><html><body>Bad Gateway</body></html>", false},
		{"text/plain; charset=utf-8", "Internal Server Error", false},
		{"", "", false},
		{"application/x-ndjson", `{"model":"m","message":{"content":"Hi"},"done":false}` + "\n", false},
	} {
		w, err := serveWith(t, func(w http.ResponseWriter, r *http.Request) {
			if tc.ctype == "" {
				w.Header()["Content-Type"] = nil // no type, none sniffed
			} else {
				w.Header().Set("Content-Type", tc.ctype)
			}
			_, _ = w.Write([]byte(tc.body))
		})
		if tc.ok {
			if err != nil || deltaText(t, w) != "Hi" || !w.Final() {
				t.Errorf("%q %.20q: err %v, text %q, kinds %v; want the text \"Hi\" then e2a.complete",
					tc.ctype, tc.body, err, deltaText(t, w), w.Kinds())
			}
			continue
		}
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != bridge.CodeProtocol || be.Retryable || len(w.Frames()) != 0 {
			t.Errorf("%q %.20q: %v, frames %v; want %s, not retryable, no frame", tc.ctype, tc.body, err, w.Kinds(), bridge.CodeProtocol)
		}
	}
}

// TestStreamByteByByte: a stream whose every byte is a write of its own
// (a data line split across TCP reads, CRLF line ends, comments, id and
// event lines, a last chunk then the end of the body without [DONE]) is
// read as the same stream in one write.
func TestStreamByteByByte(t *testing.T) {
	body := ": hi\r\nid: 1\r\nevent: message\r\n" + strings.ReplaceAll(strings.TrimSuffix(helloEvents, "data: [DONE]\n\n"), "\n", "\r\n")
	w, err := serveWith(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range len(body) {
			_, _ = w.Write([]byte{body[i]})
			w.(http.Flusher).Flush()
		}
	})
	if err != nil || deltaText(t, w) != "Hi" || !w.Final() || read(t, w.Frames()).result["finish_reason"] != "stop" {
		t.Fatalf("err %v, text %q, kinds %v; want the text \"Hi\" then e2a.complete", err, deltaText(t, w), w.Kinds())
	}
}

// TestErrorAnsweredWith200: a server that answers the streamed call with
// an error object and status 200 (as some proxies and wrappers do) fails
// the request with the upstream's error as its words and kind say (a
// server error or a rate limit retryable, a refused request not), as an
// error sent in a stream is; it was upstream_protocol_error, "answer not
// understood", whatever it said. So was an error in Google's form (an
// array holding the error object) and one after a byte order mark.
func TestErrorAnsweredWith200(t *testing.T) {
	for _, tc := range []struct {
		body      string
		code      string
		retryable bool
	}{
		{`{"error":{"message":"model not found","type":"invalid_request_error","code":404}}`, bridge.CodeRejected, false},
		{`{"error":{"message":"The server is overloaded","type":"server_error","code":null}}`, bridge.CodeUnavailable, true},
		{`{"object":"error","message":"Rate limit reached","type":"RateLimitError","code":429}`, bridge.CodeRateLimited, true},
		{"\n" + `{"error":"overloaded"}`, bridge.CodeUnavailable, true},
		// Google's error body, an array of one error object (Gemini's
		// OpenAI-compatible endpoint; gateways in front of it pass it on).
		{`[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]`,
			bridge.CodeRateLimited, true},
		{"\ufeff" + `{"error":{"message":"bad model","type":"invalid_request_error"}}`, bridge.CodeRejected, false},
	} {
		w, err := serveWith(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(tc.body))
		})
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != tc.code || be.Retryable != tc.retryable || len(w.Frames()) != 0 ||
			!strings.HasPrefix(be.Message, "upstream error (answered with 200): ") {
			t.Errorf("%s: %v (%+v), frames %v; want %s retryable %v, no frame", tc.body, err, be, w.Kinds(), tc.code, tc.retryable)
		}
	}
}

// TestWholeAnswerAtItsBound: a whole completion is read up to the
// bound of one event (WithMaxEventBytes, here its default) and gives its
// text, however large within it and whatever its characters; one byte
// more is upstream_protocol_error naming the bound. The completion became
// a chunk re-encoded by encoding/json, which writes <, > and & as six
// bytes each and renames its members: one of code or HTML well within
// the bound, or one right at it, failed as "not a server-sent event
// stream: a line longer than 1048576 bytes".
func TestWholeAnswerAtItsBound(t *testing.T) {
	whole := func(content string) string { // as Python's json.dumps writes it: < > & as they are
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(content); err != nil {
			t.Fatal(err)
		}
		return `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` +
			strings.TrimSuffix(b.String(), "\n") + `},"finish_reason":"stop"}]}`
	}
	html := strings.Repeat("<a>&</a>", openai.DefaultMaxEventBytes/4/8)
	pad := openai.DefaultMaxEventBytes - len(whole(""))
	for _, tc := range []struct {
		name, content string
		ok            bool
	}{
		{"HTML, a quarter of the bound", html, true},
		{"text, at the bound", strings.Repeat("x", pad), true},
		{"text, one byte past it", strings.Repeat("x", pad+1), false},
	} {
		w, err := serveWith(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(whole(tc.content)))
		})
		if !tc.ok {
			var be *bridge.Error
			if !errors.As(err, &be) || be.Code != bridge.CodeProtocol || !strings.Contains(be.Message, "larger than 1048576 bytes") {
				t.Errorf("%s: %v; want %s naming the bound", tc.name, err, bridge.CodeProtocol)
			}
			continue
		}
		if err != nil || deltaText(t, w) != tc.content || !w.Final() {
			t.Errorf("%s: %v, %d bytes of text, kinds %v; want the whole text then e2a.complete", tc.name, err, len(deltaText(t, w)), w.Kinds())
		}
	}
}
