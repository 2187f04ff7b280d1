package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

// wordsUpstream is an Upstream for a service of its own protocol: POST
// {base}/answer with {"text":…} answers {"words":[…]}. It reaches the
// service through a bridge.Client (timeouts, credentials, trace context;
// a non-2xx answer is a *bridge.Error quoting the error page, the
// client's credentials taken out), and is a bridge.Scrubber, so that the
// Handler takes them out of every error and final frame the upstream
// words itself too.
type wordsUpstream struct{ c *bridge.Client }

func (u wordsUpstream) Name() string          { return "words " + u.c.Name() }
func (u wordsUpstream) Scrub(s string) string { return u.c.Scrub(s) }

func (u wordsUpstream) Call(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	body, _ := json.Marshal(map[string]string{"text": bridge.UserText(env)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.c.Base().JoinPath("answer").String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := u.c.Do(req, env)
	if err != nil {
		return err // classified: retried by the Handler when retryable
	}
	defer resp.Body.Close()
	var answer struct{ Words []string }
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return bridge.Errorf(bridge.CodeProtocol, false, "unreadable answer: %v", err)
	}
	for _, word := range answer.Words {
		if err := w.Chunk(e2a.DeltaText, word+" "); err != nil {
			return err
		}
	}
	return w.Complete(map[string]any{"words": len(answer.Words)})
}

// An agent that already exists, behind the pool "words": an Upstream
// (here wordsUpstream, for an HTTP service of its own protocol), made an
// agent.Handler by bridge.New and served by agent.Run like any pool. The
// service is busy at its first call (503, Retry-After): nothing was
// written yet, so the Handler retries it. A request the service refuses
// (401, its error page quoting the request's Authorization header) ends
// with an e2a.error frame: upstream_auth, not retryable, the API key
// taken out of the quote.
func Example() {
	var calls atomic.Int32
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		var req struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		switch {
		case n == 1:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case req.Text == "forbidden":
			http.Error(w, "bad credentials: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"words": strings.Fields(strings.ToUpper(req.Text))})
		}
	}))
	defer service.Close()

	// An embedded JetStream server with the pipeline's streams.
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()

	// The bridge: the service's client with its credentials, and
	// bridge.New around the upstream (retries bounded to 10 ms here,
	// whatever Retry-After says).
	client, err := bridge.NewClient(service.URL+"/v1", bridge.WithCredentials(bridge.Credentials{APIKey: "sk-example-0123456789"}))
	if err != nil {
		panic(err)
	}
	h, err := bridge.New("words", wordsUpstream{client}, bridge.WithRetry(3, time.Millisecond, 10*time.Millisecond),
		bridge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx, mem.Conn, "words", h, agent.WithCoalesce(0, 0)) }()

	// Send each request, then read its frames in order: egress.Replay
	// waits for those not written yet and returns after the final one.
	pub := ingress.NewPublisher(mem.JetStream, 10*time.Second)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, req := range []struct{ id, text string }{{"req-1", "hello from the bridge"}, {"req-2", "forbidden"}} {
		env := &e2a.Envelope{RequestID: req.id, IsStream: true, Params: map[string]any{"text": req.text}}
		if _, err := pub.Publish(ctx, "words", env); err != nil {
			panic(err)
		}
		if err := egress.Replay(rctx, mem.Conn, req.id, 0, printFrame); err != nil {
			panic(err)
		}
	}
	fmt.Println("upstream calls:", calls.Load())
	// Credentials print which are set, never their values.
	fmt.Println("credentials:", bridge.Credentials{APIKey: "sk-example-0123456789"})

	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// req-1 0 e2a.chunk "HELLO "
	// req-1 1 e2a.chunk "FROM "
	// req-1 2 e2a.chunk "THE "
	// req-1 3 e2a.chunk "BRIDGE "
	// req-1 4 e2a.complete succeeded {"result":{"words":4}}
	// req-2 0 e2a.error failed upstream_auth retryable=false "upstream answered 401: bad credentials: Bearer [redacted]"
	// upstream calls: 3
	// credentials: api key
	// Run: <nil>
}

// printFrame prints a frame's request, sequence and kind, and its text
// delta, its result or its error.
func printFrame(fr render.Frame) error {
	f := fr.Response
	if c, err := f.Chunk(); err == nil {
		fmt.Printf("%s %d %s %q\n", f.RequestID, f.Sequence, f.ResponseKind, c.Delta)
	} else if e, err := f.Error(); err == nil {
		fmt.Printf("%s %d %s %s %s retryable=%t %q\n", f.RequestID, f.Sequence, f.ResponseKind, f.Status, e.Code, e.Retryable, e.Message)
	} else {
		fmt.Printf("%s %d %s %s %s\n", f.RequestID, f.Sequence, f.ResponseKind, f.Status, f.Body)
	}
	return nil
}

// A bridge maps an upstream's HTTP refusal to the e2a.error it ends the
// request with (bridge.Client.Do does so for every non-2xx answer): its
// code, whether the client may retry, the status, and the upstream's
// Retry-After, which the Handler's retries honour.
func ExampleFromResponse() {
	for _, answer := range []struct {
		status     int
		retryAfter string
		body       string
	}{
		{http.StatusTooManyRequests, "30", `{"error":"slow down"}`},
		{http.StatusBadGateway, "", "bad gateway\n<html>…</html>"},
		{http.StatusUnauthorized, "", "invalid api key"},
		{http.StatusNotImplemented, "", ""},
		{http.StatusBadRequest, "", "unknown model"},
	} {
		rec := httptest.NewRecorder()
		if answer.retryAfter != "" {
			rec.Header().Set("Retry-After", answer.retryAfter)
		}
		rec.WriteHeader(answer.status)
		io.WriteString(rec, answer.body)

		e := bridge.FromResponse(rec.Result())
		fmt.Println(e.Code, e.Retryable, e.Status, e.RetryAfter)
		fmt.Println("  ", e)
	}
	// Output:
	// upstream_rate_limited true 429 30s
	//    bridge: upstream_rate_limited (HTTP 429): upstream answered 429: {"error":"slow down"}
	// upstream_unavailable true 502 0s
	//    bridge: upstream_unavailable (HTTP 502): upstream answered 502: bad gateway <html>…</html>
	// upstream_auth false 401 0s
	//    bridge: upstream_auth (HTTP 401): upstream answered 401: invalid api key
	// upstream_rejected false 501 0s
	//    bridge: upstream_rejected (HTTP 501): upstream answered 501: Not Implemented
	// upstream_rejected false 400 0s
	//    bridge: upstream_rejected (HTTP 400): upstream answered 400: unknown model
}

// Classify reads an Upstream's error as the *bridge.Error the request ends
// with: a timeout, a connection that failed, an answer cut short, or
// garbage. An *Error the upstream returned stays as it is, and the end of
// the request itself (a cancel) is left to the agent runtime.
func ExampleClassify() {
	for _, err := range []error{
		bridge.ErrIdleTimeout,
		context.DeadlineExceeded,
		fmt.Errorf("reading the answer: %w", io.ErrUnexpectedEOF),
		errors.New("invalid character '<' looking for beginning of value"),
		bridge.Errorf(bridge.CodeFailed, false, "the agent reported the task failed"),
	} {
		var e *bridge.Error
		if errors.As(bridge.Classify(err), &e) {
			fmt.Println(e.Code, e.Retryable)
		}
	}
	fmt.Println(bridge.Classify(context.Canceled) == context.Canceled, bridge.Classify(nil))
	// Output:
	// upstream_timeout true
	// upstream_timeout true
	// upstream_unavailable true
	// upstream_protocol_error false
	// upstream_failed false
	// true <nil>
}

// UserText is what an upstream that takes text is sent, whatever the
// request's front door: the text of an A2A message or an E2A request, or
// an ACP prompt's blocks, the files the editor attached included.
func ExampleUserText() {
	fmt.Printf("%q\n", bridge.UserText(&e2a.Envelope{Params: map[string]any{"text": "What is the capital of France?"}}))
	fmt.Printf("%q\n", bridge.UserText(&e2a.Envelope{Params: map[string]any{"query": "List desktop files"}}))
	acp := &e2a.Envelope{Params: map[string]any{"prompt": []any{
		map[string]any{"type": "text", "text": "Explain this function:"},
		map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///src/main.go", "text": "func main() {}"}},
		map[string]any{"type": "resource_link", "uri": "file:///README.md", "name": "README"},
		map[string]any{"type": "image", "data": "iVBORw0KGgo="},
	}}}
	fmt.Println(bridge.UserText(acp))
	// Output:
	// "What is the capital of France?"
	// "List desktop files"
	// Explain this function:
	// <context ref="file:///src/main.go">
	// func main() {}
	// </context>
	// [README](file:///README.md)
}

// WatchIdle bounds how long a call of a transport of its own waits for
// its answer, telling a request never sent (a retry is safe) from one sent
// and not answered (the upstream may be acting on it): the bridges' HTTP
// client watches every call so, the A2A bridge its gRPC calls.
func ExampleWatchIdle() {
	ctx, w := bridge.WatchIdle(context.Background(), 50*time.Millisecond)
	defer w.End()
	w.Sent() // the request is written: the answer gets the idle timeout from now
	<-ctx.Done()
	cause := context.Cause(ctx)
	fmt.Println(cause == bridge.ErrAwaitingAnswer, errors.Is(cause, bridge.ErrIdleTimeout), w.Stop() == cause)
	// Output: true true true
}
