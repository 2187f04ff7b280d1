package openai

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// benchServer answers every chat completions call with benchStream(7),
// each event flushed on its own, as `e2a bench --bridge openai`'s upstream
// does; it keeps the last request's body.
func benchServer(t testing.TB) (*Upstream, *[]byte) {
	stream := benchStream(7)
	events := bytes.SplitAfter(stream, []byte("\n\n"))
	var last []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		last = body
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != "text/event-stream" ||
			r.Header.Get("Traceparent") != benchEnvelope().Trace.Traceparent {
			t.Errorf("call's headers %v", r.Header)
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		fl := w.(http.Flusher)
		for _, ev := range events {
			if len(ev) > 0 {
				_, _ = w.Write(ev)
				fl.Flush()
			}
		}
	}))
	return upstreamAt(t, srv), &last
}

// upstreamAt is the upstream of model "m" at srv (closed with the test).
func upstreamAt(t testing.TB, srv *httptest.Server) *Upstream {
	t.Cleanup(srv.Close)
	client, err := bridge.NewClient(srv.URL + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	u, err := New(client, "m")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func benchEnvelope() *e2a.Envelope {
	return &e2a.Envelope{RequestID: "req-1", Params: map[string]any{"text": "bench request"},
		Trace: &e2a.TraceContext{Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
}

// TestCallAllocs: a whole call (the request encoded and sent, the answer
// of 7 content chunks read, the client's and the test server's work in
// this process counted alike) allocates a bounded number of times: 181
// before the request was encoded without its map of stream options and
// reflection (7 fewer), the common path without its mime.ParseMediaType
// and errors.As (3), the grace timer when [DONE] is at hand (2), the
// headers made per call (3), the call's own context (5), the body's
// wrapper marking its read failures (1).
func TestCallAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	u, body := benchServer(t)
	env := benchEnvelope()
	ctx := context.Background()
	call := func() {
		if err := u.Call(ctx, env, &nopWriter{}); err != nil {
			t.Fatal(err)
		}
	}
	call()
	if want, _ := (&request{Model: "m", Messages: []message{{Role: "user", Content: "bench request"}}, Stream: true,
		StreamOptions: includeUsage}).encode(); !bytes.Equal(*body, want) ||
		string(want) != `{"model":"m","messages":[{"role":"user","content":"bench request"}],"stream":true,"stream_options":{"include_usage":true}}` {
		t.Errorf("call's body %s, want %s", *body, want)
	}
	n := testing.AllocsPerRun(200, call)
	t.Logf("a call: %v allocations", n)
	if n > 164 {
		t.Errorf("a call: %v allocations, want at most 164", n)
	}
}

func BenchmarkCall(b *testing.B) {
	u, _ := benchServer(b)
	env := benchEnvelope()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := u.Call(ctx, env, &nopWriter{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCallPathAllocs: on a call's common path, telling an event stream by
// its type (mime.ParseMediaType: 2) and asking whether an answer refused
// the stream options (an *bridge.Error escaping to errors.As: 1) allocate
// nothing; a type with parameters or capitals is still parsed as before.
func TestCallPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	for _, ct := range []string{"text/event-stream", "text/event-stream; charset=utf-8", " text/event-stream ;charset=utf-8"} {
		resp := &http.Response{Header: http.Header{"Content-Type": {ct}}, Body: http.NoBody}
		if n := testing.AllocsPerRun(100, func() {
			if r, err := streamBody(context.Background(), resp, 4096, 1<<20, nil); err != nil || r != resp.Body {
				t.Fatalf("%q: %v, %v", ct, r, err)
			}
		}); n != 0 {
			t.Errorf("streamBody of %q: %v allocations, want 0", ct, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = usageRefused(nil) }); n != 0 {
		t.Errorf("usageRefused(nil): %v allocations, want 0", n)
	}
	for ct, want := range map[string]string{"text/event-stream": "text/event-stream", "Text/Event-Stream; a=b": "text/event-stream",
		"text/event-stream;;": "text/event-stream", "text/event-streamx": "text/event-streamx", "": "", "text/plain; x": "text/plain",
		"text/event-stream/x": ""} {
		if got := contentMediaType(ct); got != want {
			t.Errorf("contentMediaType(%q) = %q, want %q", ct, got, want)
		}
		if mt, _, _ := mime.ParseMediaType(ct); mt != want {
			t.Errorf("mime.ParseMediaType(%q) = %q, want %q", ct, mt, want)
		}
	}
}

// TestDoneAtHand: a [DONE] is at hand only as a whole event that starts
// at an event's start, not as the last line of another event's data.
func TestDoneAtHand(t *testing.T) {
	for in, want := range map[string]bool{"data: [DONE]\n\n": true, "data: {}\n\ndata: [DONE]\n\n": true, ": ping\n\ndata: [DONE]\n\n": true,
		"data: x\ndata: [DONE]\n\n": false, "data: [DONE]\n": false, ": ping\n\n": false, "data: [DONE]\r\n\r\n": false, "": false} {
		sr := newSSEReader(strings.NewReader(in), 1<<10)
		_, _ = sr.br.Peek(1) // fill the buffer
		if got := sr.doneAtHand(); got != want {
			t.Errorf("doneAtHand(%q) = %v, want %v", in, got, want)
		}
	}
}
