package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// PathChatCompletions is where an OpenAI-compatible server answers chat
// completions (its base URL ends in /v1).
const PathChatCompletions = "/v1/chat/completions"

// ChatUpstream is an OpenAI-compatible model server on a loopback port, in
// this process: POST /v1/chat/completions answers every request with the
// same chat completions event stream, in the wire format of OpenAI's API
// (bridge/openai/testdata/text.sse and usage.sse): a role chunk, Chunks
// content chunks of ChunkBytes bytes each, a finish chunk, a usage chunk
// and data: [DONE], each event flushed on its own as a model server
// writes its tokens, Delay apart when set (between content chunks and
// before the finish chunk, as the bench agent spaces its frames). It
// stands for the upstream in `e2a bench --bridge openai`, called directly
// by the load generator and through the bridge alike. Its goroutines carry
// the profiler label bench=upstream, so a CPU profile tells its work apart.
type ChatUpstream struct {
	// URL is the server's base URL (http://127.0.0.1:PORT/v1).
	URL string

	chunks int
	delay  time.Duration
	events [][]byte // role, content, finish, usage, done
	srv    *http.Server
	ln     net.Listener
}

// Events of ChatUpstream's answer, by index in its events.
const (
	upRole = iota
	upContent
	upFinish
	upUsage
	upDone
)

// StartChatUpstream starts the server: chunks content chunks of chunkBytes
// bytes of text (payload) per answer, delay between them.
func StartChatUpstream(chunks, chunkBytes int, delay time.Duration) (*ChatUpstream, error) {
	if chunks < 1 || chunkBytes < 1 || delay < 0 {
		return nil, fmt.Errorf("bench: upstream of %d chunks of %d bytes, delay %v (want ≥ 1, ≥ 1, ≥ 0)", chunks, chunkBytes, delay)
	}
	const head = `data: {"id":"chatcmpl-e2abench0001","object":"chat.completion.chunk","created":1767225600,"model":"bench-model","system_fingerprint":"fp_e2abench",`
	ev := func(rest string) []byte { return []byte(head + rest + "\n\n") }
	u := &ChatUpstream{chunks: chunks, delay: delay, events: [][]byte{
		upRole:    ev(`"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`),
		upContent: ev(`"choices":[{"index":0,"delta":{"content":"` + payload(chunkBytes) + `"},"logprobs":null,"finish_reason":null}],"usage":null}`),
		upFinish:  ev(`"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`),
		upUsage: ev(fmt.Sprintf(`"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":%d,"total_tokens":%d,`+
			`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,`+
			`"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`, chunks, chunks+12)),
		upDone: []byte("data: [DONE]\n\n"),
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u.ln, u.URL = ln, "http://"+ln.Addr().String()+"/v1"
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathChatCompletions, u.serve)
	u.srv = serveUpstream(ln, mux)
	return u, nil
}

// Close stops the server.
func (u *ChatUpstream) Close() { shutdownUpstream(u.srv) }

// serveUpstream serves h on ln, an in-process upstream's listener, from a
// goroutine with the profiler label bench=upstream: the connections'
// goroutines (and what they start, a2asrv's executions) inherit the label
// of the one that accepts them.
func serveUpstream(ln net.Listener, h http.Handler) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	pprof.Do(context.Background(), pprof.Labels(labelKey, labelUpstream), func(context.Context) {
		go func() { _ = srv.Serve(ln) }()
	})
	return srv
}

// shutdownUpstream stops srv, waiting up to 5 s for its connections.
func shutdownUpstream(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

// serve answers one chat completions request. It reads the whole body and
// refuses one that does not ask for a stream, as the API would (it does
// not decode the conversation: the answer is fixed).
func (u *ChatUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		return
	}
	if !bytes.Contains(body, []byte(`"stream":true`)) || !bytes.Contains(body, []byte(`"messages":[`)) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"this server answers streamed chat completions only","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	fl, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	write := func(ev []byte) bool {
		if _, err := w.Write(ev); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	if !write(u.events[upRole]) {
		return
	}
	for i := range u.chunks {
		if i > 0 && u.delay > 0 && sleepctx.SleepCause(r.Context(), u.delay) != nil {
			return
		}
		if !write(u.events[upContent]) {
			return
		}
	}
	// A delay before the finish chunk too, as the bench agent waits before
	// its final frame.
	if u.delay > 0 && sleepctx.SleepCause(r.Context(), u.delay) != nil {
		return
	}
	for _, e := range u.events[upFinish:] {
		if !write(e) {
			return
		}
	}
}

// Content is the text of one answer (every content chunk's, joined).
func (u *ChatUpstream) Content() string {
	_, after, _ := strings.Cut(string(u.events[upContent]), `"delta":{"content":"`)
	chunk, _, _ := strings.Cut(after, `"`)
	return strings.Repeat(chunk, u.chunks)
}
