package bridge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestSetHeadersAllocs: the trace context is set under its canonical
// name directly (Header.Set canonicalized "traceparent" into a new
// string every call: 2 allocations where 1, its value, is needed), the
// header sent as Set sent it.
func TestSetHeadersAllocs(t *testing.T) {
	c, err := NewClient("http://127.0.0.1:8000/v1")
	if err != nil {
		t.Fatal(err)
	}
	env := &e2a.Envelope{Trace: &e2a.TraceContext{Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Tracestate: "a=b"}}
	h := http.Header{}
	c.SetHeaders(context.Background(), h, env)
	if got := h.Values("traceparent"); len(got) != 1 || got[0] != env.Trace.Traceparent || h.Get("Tracestate") != "a=b" || len(h) != 2 {
		t.Fatalf("headers %v", h)
	}
	env.Trace.Tracestate = ""
	n := testing.AllocsPerRun(100, func() {
		h := make(http.Header, 4)
		c.SetHeaders(context.Background(), h, env)
	})
	if n > 1 && !raceEnabled {
		t.Errorf("setting the trace context: %v allocations, want at most 1 (its value)", n)
	}
}

// TestBodyCancel: the function BodyCancel returns for a body Do returned
// ends the call: a read waiting for the upstream fails at once (the
// OpenAI bridge ends a call so at the grace after its finish reason,
// without a context of its own around Do's: 2 allocations a call).
func TestBodyCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("data: 1\n\n"))
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := c.Do(req, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	end := BodyCancel(resp.Body)
	if end == nil || BodyCancel(io.NopCloser(nil)) != nil {
		t.Fatal("BodyCancel: nil for Do's body, or not nil for another")
	}
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || n == 0 {
		t.Fatal(n, err)
	}
	time.AfterFunc(50*time.Millisecond, func() { end(errors.New("enough")) })
	start := time.Now()
	if _, err := resp.Body.Read(buf); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("a read after the call was ended: %v after %v", err, time.Since(start))
	}
}

// endless reads as many bytes as asked, at once.
type endless struct{}

func (endless) Read(p []byte) (int, error) { return len(p), nil }
func (endless) Close() error               { return nil }

// BenchmarkIdleBodyRead: a read of an answer's body under the idle
// timeout, as the bridges read a streamed answer (a read per event).
func BenchmarkIdleBodyRead(b *testing.B) {
	_, cancel := context.WithCancelCause(context.Background())
	body := newIdleBody(bodyReader{endless{}}, time.Minute, cancel)
	defer body.Close()
	buf := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = body.Read(buf)
	}
}
