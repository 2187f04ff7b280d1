package bridge_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// flood is an HTTP agent answering NDJSON: up to n text chunks of size
// bytes each, then its final frame; it reports on sent how many chunks it
// wrote before it ended or the bridge went away.
func flood(t *testing.T, n, size int, sent chan<- int) string {
	t.Helper()
	line := []byte(`{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"` + strings.Repeat("a", size) + `"}}` + "\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		fl := w.(http.Flusher)
		i := 0
		defer func() { sent <- i }()
		for ; i < n; i++ {
			if r.Context().Err() != nil {
				return
			}
			if _, err := w.Write(line); err != nil {
				return
			}
			fl.Flush()
		}
		_, _ = w.Write([]byte(`{"response_kind":"e2a.complete","status":"succeeded","is_final":true,"body":{"result":"done"}}` + "\n"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// servePool serves pool on p with the HTTP agent at url, the answer
// bounded to max bytes, logging into log.
func servePool(t *testing.T, p *pipetest.Pipeline, pool, url string, max int64, log *testkit.Buffer) {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(log, nil))
	c, err := bridge.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	up, err := httpagent.New(c, httpagent.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	serveUpstream(t, p, pool, up, logger, bridge.WithMaxAnswerBytes(max))
}

// serveUpstream serves pool on p with up, logging to logger, with the
// bridge's options opts.
func serveUpstream(t *testing.T, p *pipetest.Pipeline, pool string, up bridge.Upstream, logger *slog.Logger, opts ...bridge.Option) {
	t.Helper()
	h, err := bridge.New(pool, up, append([]bridge.Option{bridge.WithLogger(logger)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	p.Pool(pool, h)
}

// modelStream is an OpenAI-compatible server answering n content deltas
// of size bytes each, written at once (the bridge reads them as fast as
// it can: the runtime coalesces them), then its finish reason and
// [DONE]; every event names one completion id (the frames' metadata).
func modelStream(t *testing.T, n, size int) string {
	t.Helper()
	event := func(delta, finish string) string {
		return `data: {"id":"chatcmpl-9f8e7d6c5b4a39281706","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":` +
			delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	body := strings.Repeat(event(`{"content":"`+strings.Repeat("a", size)+`"}`, "null"), n) + event(`{}`, `"stop"`) + "data: [DONE]\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// serveModel serves pool on p with the OpenAI bridge to the model server
// at url, the answer bounded to max bytes, its client with copts.
func serveModel(t *testing.T, p *pipetest.Pipeline, pool, url string, max int64, copts ...bridge.ClientOption) {
	t.Helper()
	c, err := bridge.NewClient(url, copts...)
	if err != nil {
		t.Fatal(err)
	}
	up, err := openai.New(c, "m")
	if err != nil {
		t.Fatal(err)
	}
	serveUpstream(t, p, pool, up, slog.Default(), bridge.WithMaxAnswerBytes(max))
}

// TestAnswerBoundCountsStoredText: the answer bound counts an answer's
// text deltas as the runtime stores them, coalesced into frames that
// carry the frames' metadata (an OpenAI answer's completion id) and the
// delta's kind once: an answer of many small deltas reaches about the
// bound in text before it is refused. Each delta was counted with its
// own metadata, kind and quotes, so an answer of 16-byte deltas was
// refused after about a quarter of the bound (16 of the ~65 bytes
// counted per delta were its text), and one of 40 % of the bound failed.
func TestAnswerBoundCountsStoredText(t *testing.T) {
	const size, max = 16, 64 << 10
	p := pipetest.Start(t)

	serveModel(t, p, "under", modelStream(t, 4*max/10/size, size), max)
	a := p.Ask(t, "under", `{"request_id":"under-1","params":{"text":"hi"}}`)
	if f := a.Final(); f == nil || f.ResponseKind != e2a.KindComplete {
		code, _ := a.ErrorCode()
		t.Fatalf("an answer of %d bytes of text under a bound of %d: final frame e2a.error %s, %d bytes of text stored, want e2a.complete",
			4*max/10, max, code, len(a.Text(e2a.DeltaText)))
	}
	if n := len(a.Text(e2a.DeltaText)); n != 4*max/10/size*size {
		t.Fatalf("%d bytes of text stored, want %d", n, 4*max/10/size*size)
	}

	serveModel(t, p, "over", modelStream(t, 2*max/size, size), max)
	a = p.Ask(t, "over", `{"request_id":"over-1","params":{"text":"hi"}}`)
	if code, retryable := a.ErrorCode(); code != bridge.CodeProtocol || retryable {
		t.Fatalf("an answer of twice the bound: final frame %s (%s), want e2a.error %s, not retryable", a.Final().ResponseKind, code, bridge.CodeProtocol)
	}
	n := len(a.Text(e2a.DeltaText))
	t.Logf("%d bytes of text stored under a bound of %d", n, max)
	if n < max*9/10 || n > max {
		t.Fatalf("%d bytes of text stored before the refusal, want about the bound (%d..%d)", n, max*9/10, max)
	}
}

// TestAnswerBytesBound: an upstream answer whose frames exceed the
// bridge's bound on one answer's bytes (WithMaxAnswerBytes) ends the
// request with upstream_protocol_error, not retryable: the frames before
// the one that would pass it stored, nothing after; the upstream's answer
// is no longer read (its connection closed: it stops long before its
// end), and the refusal is logged with the request id. An answer under
// the bound is unchanged.
func TestAnswerBytesBound(t *testing.T) {
	const size, max = 1000, 8 << 10
	p := pipetest.Start(t)
	var log testkit.Buffer

	sent := make(chan int, 1)
	servePool(t, p, "big", flood(t, 50_000, size, sent), max, &log)
	a := p.Ask(t, "big", `{"request_id":"big-1","params":{"text":"hi"}}`)
	code, retryable := a.ErrorCode()
	if code != bridge.CodeProtocol || retryable {
		t.Fatalf("final frame %s %s, want e2a.error %s, not retryable", a.Final().ResponseKind, a.Final().Body, bridge.CodeProtocol)
	}
	if b, _ := a.Final().Error(); !strings.Contains(b.Message, fmt.Sprint(max)) {
		t.Errorf("error message %q does not name the bound", b.Message)
	}
	chunks := a.Frames[:len(a.Frames)-1]
	for i, f := range chunks {
		if f.ResponseKind != e2a.KindChunk {
			t.Fatalf("frame %d before the error: %s", i, f.ResponseKind)
		}
	}
	text := a.Text(e2a.DeltaText)
	if len(chunks) == 0 || len(text) != len(chunks)*size || len(text) > max {
		t.Fatalf("%d chunks stored, %d bytes of text: want the chunks that fit in %d bytes", len(chunks), len(text), max)
	}
	if len(chunks) < max/size-2 {
		t.Errorf("%d chunks stored, want those that fit (about %d)", len(chunks), max/size)
	}
	select {
	case n := <-sent:
		t.Logf("%d chunks stored (%d bytes of text); the upstream wrote %d", len(chunks), len(text), n)
		// The agent writes into its connection's buffers before it
		// notices the bridge hung up: some thousand frames at most, not
		// its 50 MB.
		if n >= 25_000 {
			t.Errorf("the upstream wrote %d frames: its answer was read on past the bound", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream's answer is still being read 20 s after the request ended")
	}
	if s := log.String(); !strings.Contains(s, `"request_id":"big-1"`) || !strings.Contains(s, bridge.CodeProtocol) {
		t.Errorf("the refusal is not logged with the request id: %s", s)
	}

	small := make(chan int, 1)
	servePool(t, p, "small", flood(t, 5, size, small), max, &log)
	a = p.Ask(t, "small", `{"request_id":"small-1","params":{"text":"hi"}}`)
	if f := a.Final(); f == nil || f.ResponseKind != e2a.KindComplete || len(a.Frames) != 6 || len(a.Text(e2a.DeltaText)) != 5*size {
		t.Fatalf("an answer under the bound: %d frames, final %v", len(a.Frames), a.Final())
	}
	<-small
}

// TestMaxAnswerBytesOption: a bound under 1 KiB is refused with
// ErrInvalidOption.
func TestMaxAnswerBytesOption(t *testing.T) {
	for _, n := range []int64{-1, 0, 1023} {
		if err := bridge.CheckOptions(bridge.WithMaxAnswerBytes(n)); !errors.Is(err, bridge.ErrInvalidOption) {
			t.Errorf("%d: %v", n, err)
		}
	}
	if err := bridge.CheckOptions(bridge.WithMaxAnswerBytes(1 << 10)); err != nil {
		t.Errorf("1 KiB: %v", err)
	}
}

// TestAnswerOverHalfTheBoundCompletes: an OpenAI answer whose text is more
// than half the answer bound, which a frame (the server's max_payload)
// could hold whole, completes: its text deltas are stored, and its final
// frame, which cannot add the text again within the bound, leaves it out
// and says so (content_omitted), as it does for a text larger than a
// frame. The final frame's result was counted with the text, passed the
// bound, and the request ended upstream_protocol_error after the whole
// text was stored.
func TestAnswerOverHalfTheBoundCompletes(t *testing.T) {
	const size, max = 1024, 64 << 10
	p := pipetest.Start(t)
	serveModel(t, p, "half", modelStream(t, 40, size), max)
	a := p.Ask(t, "half", `{"request_id":"half-1","params":{"text":"hi"}}`)
	f := a.Final()
	if f == nil || f.ResponseKind != e2a.KindComplete {
		code, _ := a.ErrorCode()
		t.Fatalf("an answer of %d bytes of text under a bound of %d: final frame e2a.error %s, want e2a.complete", 40*size, max, code)
	}
	if n := len(a.Text(e2a.DeltaText)); n != 40*size {
		t.Fatalf("%d bytes of text stored, want %d", n, 40*size)
	}
	c, err := f.Complete()
	res, _ := c.Result.(map[string]any)
	if err != nil || res["content"] != nil || res["content_omitted"] == nil || res["finish_reason"] != "stop" {
		t.Fatalf("final result %v (%v), want content_omitted without the content", res, err)
	}
}

// jsonServer answers every call with body, typed application/json, and
// reports on wrote the bytes it wrote before its end or the bridge's.
func jsonServer(t *testing.T, body string, wrote chan<- int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n := 0
		defer func() { wrote <- n }()
		for n < len(body) {
			m, err := w.Write([]byte(body[n:min(n+4<<10, len(body))]))
			if n += m; err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestJSONAnswerBodyBound: an answer of one JSON document (typed
// application/json) that an HTTP agent or an OpenAI-compatible server
// answers to Client.Do is read up to the client's body bound
// (WithMaxBodyBytes, 16 KiB here, E2A_UPSTREAM_MAX_ANSWER_BYTES for e2a
// agent), as an SDK's answer is: past it the request ends
// upstream_protocol_error, not retryable, naming the bound. The bridges
// read it whole up to their own bound on a frame or event (1 MiB), the
// body bound applying only to the clients given an SDK: 256 KiB answers
// completed.
func TestJSONAnswerBodyBound(t *testing.T) {
	const bound, size = 16 << 10, 256 << 10
	p := pipetest.Start(t)
	text := strings.Repeat("a", size)
	for _, c := range []struct {
		pool, body string
		serve      func(pool, url string)
	}{
		{"http", `{"answer":"` + text + `"}`, func(pool, url string) {
			c, err := bridge.NewClient(url, bridge.WithMaxBodyBytes(bound))
			if err != nil {
				t.Fatal(err)
			}
			up, err := httpagent.New(c)
			if err != nil {
				t.Fatal(err)
			}
			serveUpstream(t, p, pool, up, slog.Default())
		}},
		{"openai", `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` +
			text + `"},"finish_reason":"stop"}]}`, func(pool, url string) {
			serveModel(t, p, pool, url, bridge.DefaultMaxAnswerBytes, bridge.WithMaxBodyBytes(bound))
		}},
	} {
		t.Run(c.pool, func(t *testing.T) {
			wrote := make(chan int, 1)
			c.serve(c.pool, jsonServer(t, c.body, wrote))
			a := p.Ask(t, c.pool, `{"params":{"text":"hi"}}`)
			code, retryable := a.ErrorCode()
			var msg string
			if b, err := a.Final().Error(); err == nil {
				msg = b.Message
			}
			if code != bridge.CodeProtocol || retryable || !strings.Contains(msg, fmt.Sprint(bound)) {
				t.Fatalf("a JSON answer of %d bytes past a body bound of %d: final frame %s (%s %q), want e2a.error %s naming the bound",
					len(c.body), bound, a.Final().ResponseKind, code, msg, bridge.CodeProtocol)
			}
			t.Logf("the upstream wrote %d of its %d bytes", <-wrote, len(c.body))
		})
	}
}
