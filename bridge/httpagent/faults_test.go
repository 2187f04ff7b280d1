package httpagent_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/streams"
)

const (
	chunk    = `{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"one "}}` + "\n"
	complete = `{"response_kind":"e2a.complete","body":{"result":{"ok":true}}}` + "\n"
)

// TestFaults: every way an HTTP agent can misbehave ends the request with
// its bridge code and a truthful retryable, and a call is retried only
// before its first frame.
func TestFaults(t *testing.T) {
	t.Parallel()
	const key = "sk-http-agent-3c1d9e"
	var calls atomic.Int64
	var auth atomic.Value
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		auth.Store(r.Header.Get("Authorization"))
		env, err := e2a.FromJSON(mustRead(r))
		if err != nil {
			http.Error(w, "bad envelope", http.StatusBadRequest)
			return
		}
		ndjson := func(s ...string) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			for _, l := range s {
				_, _ = w.Write([]byte(l))
				w.(http.Flusher).Flush()
			}
		}
		switch env.ParamString("case") {
		case "503-then-ok":
			if n%2 == 1 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			ndjson(chunk, complete)
		case "429":
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case "404":
			http.Error(w, "no such agent", http.StatusNotFound)
		case "cut-after-frame":
			ndjson(chunk, `{"response_kind":"e2a.ch`)
			panic(http.ErrAbortHandler) // the connection cut: no last chunk
		case "garbage":
			ndjson(chunk, "this is not json\n")
		case "hang":
			ndjson(chunk)
			select { // until the bridge gives up (its idle timeout closes the call)
			case <-release:
			case <-r.Context().Done():
			}
		case "json-result":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"reply":"plain object"}`))
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: frame\ndata: " + strings.TrimSpace(chunk) + "\n\n: comment\ndata: " + strings.TrimSpace(complete) + "\n\n"))
		case "interrupt":
			ndjson(chunk, `{"response_kind":"a2a.stream_event","status":"succeeded","is_final":true,"body":`+
				string(e2a.MarshalBody(e2a.InterruptBody(e2a.StateInputRequired, "Which city?")))+"}\n")
		case "html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html></html>"))
		case "error-frame":
			ndjson(`{"response_kind":"e2a.error","body":{"code":"no_weather","message":"no weather today","retryable":true}}` + "\n")
		default:
			ndjson(chunk, complete)
		}
	}))
	defer srv.Close()
	p := pipetest.Start(t)
	bridgePool(t, p, "faulty", srv.URL, bridge.WithIdleTimeout(300*time.Millisecond), bridge.WithCredentials(bridge.Credentials{APIKey: key}))
	dead := natstest.FreePorts(t, 1)[0]
	bridgePool(t, p, "dead", "http://127.0.0.1:"+itoa(dead)+"/", bridge.WithConnectTimeout(time.Second))

	for _, c := range []struct {
		name, pool string
		calls      int64 // upstream calls the request made (0: not counted)
		code       string
		retryable  bool
		check      func(pipetest.Answer) bool
	}{
		{"503-then-ok", "faulty", 2, "", false, func(a pipetest.Answer) bool { return a.Text(e2a.DeltaText) == "one " }},
		{"429", "faulty", 4, bridge.CodeRateLimited, true, nil},
		{"404", "faulty", 1, bridge.CodeRejected, false, nil},
		{"cut-after-frame", "faulty", 1, bridge.CodeUnavailable, true, nil},
		{"garbage", "faulty", 1, bridge.CodeProtocol, false, nil},
		{"hang", "faulty", 1, bridge.CodeTimeout, true, nil},
		{"html", "faulty", 1, bridge.CodeProtocol, false, nil},
		{"error-frame", "faulty", 1, "no_weather", true, nil},
		{"json-result", "faulty", 1, "", false, func(a pipetest.Answer) bool {
			return strings.Contains(string(a.Final().Body), `"reply":"plain object"`)
		}},
		{"sse", "faulty", 1, "", false, func(a pipetest.Answer) bool { return a.Text(e2a.DeltaText) == "one " }},
		{"interrupt", "faulty", 1, "", false, func(a pipetest.Answer) bool {
			st, text, ok := a.Final().Interrupt()
			return ok && st == e2a.StateInputRequired && text == "Which city?" && a.State == e2a.StateInputRequired
		}},
		{"unreachable", "dead", 0, bridge.CodeUnreachable, true, nil},
	} {
		before := calls.Load()
		a := p.Ask(t, c.pool, `{"request_id":"fault-`+c.name+`","params":{"text":"x","case":"`+c.name+`"}}`)
		code, retryable := a.ErrorCode()
		if code != c.code || (code != "" && retryable != c.retryable) {
			t.Errorf("%s: final %+v, want code %q retryable %v", c.name, a.Final(), c.code, c.retryable)
		}
		if got := calls.Load() - before; c.calls > 0 && got != c.calls {
			t.Errorf("%s: %d upstream calls, want %d", c.name, got, c.calls)
		}
		if c.check != nil && !c.check(a) {
			t.Errorf("%s: answer %+v (state %q)", c.name, a.Frames, a.State)
		}
	}
	if got, _ := auth.Load().(string); got != "Bearer "+key {
		t.Errorf("upstream Authorization %q", got)
	}
	// The key is in no stored message.
	js := p.JS
	for _, name := range []string{streams.RequestsStream, streams.ResponsesStream} {
		assertNotStored(t, js, name, key)
	}
}

func assertNotStored(t *testing.T, js jetstream.JetStream, stream, secret string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := info.NumPending
	for n > 0 {
		batch, err := c.Fetch(int(min(n, 256)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			if strings.Contains(string(m.Data()), secret) {
				t.Errorf("%s: a stored message holds the upstream key", stream)
			}
			for _, v := range m.Headers() {
				if strings.Contains(strings.Join(v, ","), secret) {
					t.Errorf("%s: a stored header holds the upstream key", stream)
				}
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatal(err)
		}
		if got == 0 {
			t.Fatalf("%s: %d messages left unread", stream, n)
		}
		n -= uint64(got)
	}
}

// TestHTTP2ResetBeforeAnyFrameRetried: an HTTP agent reached over
// HTTP/2 (an https URL behind a proxy or load balancer) whose stream is
// reset before any header (RST_STREAM INTERNAL_ERROR) wrote nothing: the
// call is retried, as a reset HTTP/1.1 connection or a 503 is, and the
// second POST answers. The request fails instead with
// upstream_protocol_error, not retryable, after one call.
func TestHTTP2ResetBeforeAnyFrameRetried(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = mustRead(r)
		if calls.Add(1) == 1 {
			panic(http.ErrAbortHandler) // HTTP/2: the stream reset, no headers
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write([]byte(chunk + complete))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p := pipetest.Start(t)
	bridgePool(t, p, "h2", srv.URL, bridge.WithTransport(srv.Client().Transport))

	a := p.Ask(t, "h2", `{"request_id":"h2-reset","params":{"text":"x"}}`)
	if code, retryable := a.ErrorCode(); code != "" || a.Text(e2a.DeltaText) != "one " {
		t.Errorf("final %s %s (code %q retryable %v), want the second POST's answer", a.Final().ResponseKind, a.Final().Body, code, retryable)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("%d upstream calls, want 2 (the reset one retried)", got)
	}
}
