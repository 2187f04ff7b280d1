package openai_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// chatRequest is what the test server records of a chat completions call.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string      `json:"role"`
		Content textContent `json:"content"`
	} `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions map[string]any `json:"stream_options"`
}

// textContent is a message's content as the fixtures and echoes read it:
// a string as it is, a content-part array (a user message with images or
// audio) as its text parts joined; the parts themselves are checked on the
// recorded body with openai-go's types (sentParams).
type textContent string

func (c *textContent) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = textContent(s)
		return nil
	}
	var parts []struct {
		Type, Text string
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return fmt.Errorf("content neither a string nor an array of parts: %w", err)
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	*c = textContent(strings.Join(texts, "\n"))
	return nil
}

// lastUser is the request's last user message.
func (r chatRequest) lastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return string(r.Messages[i].Content)
		}
	}
	return ""
}

// roles is the request's messages as "role: content" lines.
func (r chatRequest) roles() []string {
	out := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		out[i] = m.Role + ": " + string(m.Content)
	}
	return out
}

type recorded struct {
	Header http.Header
	Body   chatRequest
	Raw    []byte // the body as sent
}

// modelServer is an OpenAI-compatible chat completions server on
// httptest that replays the wire-format streams of testdata: a request
// whose last user message is "fixture:NAME" gets testdata/NAME.sse, event
// by event (flushed); any other gets a stream replying "echo: TEXT". A
// test can take over the answer with script (n counts calls from 1).
type modelServer struct {
	*httptest.Server
	t      testing.TB
	mu     sync.Mutex
	calls  []recorded
	script func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool
	// live are the model calls the bridges' transport (transport) has in
	// flight; most is the most at once, those abandoned left out.
	liveMu sync.Mutex
	live   map[*http.Request]bool
	most   atomic.Int32
}

// transport is the bridges' transport to the server, counting the calls
// in flight as a bridge sees them: from the call to the end of its answer
// (countedBody) or the call's error, and not once the call's context
// has ended (the bridge abandoned it: a cancelled turn, whose final frame
// the agent writes once its context ends, while the call closes). The
// server's side cannot tell: a call the bridge cancelled or read to its
// end still runs there until its handler notices or returns, after the
// next turn's call may have come (seen in CI).
func (s *modelServer) transport() http.RoundTripper { return countedCalls{s.Client().Transport, s} }

// mostAtOnce is the most model calls in flight at once so far.
func (s *modelServer) mostAtOnce() int32 { return s.most.Load() }

type countedCalls struct {
	rt http.RoundTripper
	s  *modelServer
}

func (c countedCalls) RoundTrip(r *http.Request) (*http.Response, error) {
	c.s.liveMu.Lock()
	if c.s.live == nil {
		c.s.live = map[*http.Request]bool{}
	}
	now := int32(1)
	for other := range c.s.live {
		if other.Context().Err() == nil {
			now++
		}
	}
	c.s.live[r] = true
	if now > c.s.most.Load() {
		c.s.most.Store(now)
	}
	c.s.liveMu.Unlock()
	end := sync.OnceFunc(func() {
		c.s.liveMu.Lock()
		delete(c.s.live, r)
		c.s.liveMu.Unlock()
	})
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		end()
		return nil, err
	}
	resp.Body = countedBody{resp.Body, end, new([]byte)}
	return resp, nil
}

// countedBody is a model call's answer: the call ends (end) once the
// bridge has read its last event ([DONE]: the bridge may write the turn's
// final frame, and the next turn begin, before it closes the body), its
// body's end, or when it is closed.
type countedBody struct {
	io.ReadCloser
	end  func()
	tail *[]byte // the last bytes read, for a [DONE] split across reads
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	*b.tail = append(*b.tail, p[:n]...)
	if bytes.Contains(*b.tail, []byte("[DONE]")) || err != nil {
		b.end()
	}
	if len(*b.tail) > 8 {
		*b.tail = append((*b.tail)[:0], (*b.tail)[len(*b.tail)-8:]...)
	}
	return n, err
}

func (b countedBody) Close() error {
	defer b.end()
	return b.ReadCloser.Close()
}

func newModelServer(t testing.TB) *modelServer {
	s := &modelServer{t: t}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// base is the server's API base, as a user configures it.
func (s *modelServer) base() string { return s.URL + "/v1" }

func (s *modelServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	var body chatRequest
	raw, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.calls = append(s.calls, recorded{Header: r.Header.Clone(), Body: body, Raw: raw})
	n, script := len(s.calls), s.script
	s.mu.Unlock()
	if script != nil && script(n, w, r, body) {
		return
	}
	if name, ok := strings.CutPrefix(body.lastUser(), "fixture:"); ok {
		if b, err := os.ReadFile(filepath.Join("testdata", name+".json")); err == nil {
			// A whole completion, as a server that does not stream
			// answers a streamed call.
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
			return
		}
		b, err := os.ReadFile(filepath.Join("testdata", name+".sse"))
		if err != nil {
			http.Error(w, `{"error":{"message":"no such fixture","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		replay(w, b)
		return
	}
	replay(w, echoStream("chatcmpl-echo-"+fmt.Sprint(n), body.Model, "echo: "+body.lastUser()))
}

// replay writes an SSE body event by event, flushing each.
func replay(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	for ev := range bytes.SplitAfterSeq(b, []byte("\n\n")) {
		_, _ = w.Write(ev)
		w.(http.Flusher).Flush()
	}
}

// echoStream is a completion stream answering text in two deltas.
func echoStream(id, model, text string) []byte {
	var b bytes.Buffer
	ev := func(delta map[string]any, finish any) {
		c, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1767225600,
			"model": model, "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(&b, "data: %s\n\n", c)
	}
	ev(map[string]any{"role": "assistant", "content": ""}, nil)
	half := len(text) / 2
	ev(map[string]any{"content": text[:half]}, nil)
	ev(map[string]any{"content": text[half:]}, nil)
	ev(map[string]any{}, "stop")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// recordedCalls is a copy of the calls so far.
func (s *modelServer) recordedCalls() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.calls...)
}

// setScript replaces the answer (nil: fixtures and echoes again).
func (s *modelServer) setScript(f func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool) {
	s.mu.Lock()
	s.script = f
	s.mu.Unlock()
}
