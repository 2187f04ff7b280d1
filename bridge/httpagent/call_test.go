package httpagent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// rig is the pipeline with one bridge pool ("up", the default pool) in
// front of an HTTP agent, every component logging into log.
type rig struct {
	p    *pipetest.Pipeline
	log  *testkit.Buffer
	stop func()
	h    *bridge.Handler
}

type rigConfig struct {
	client []bridge.ClientOption
	up     []httpagent.Option
	agent  []agent.Option
}

func newRig(t *testing.T, url string, cfg rigConfig) *rig {
	t.Helper()
	r := &rig{log: &testkit.Buffer{}}
	r.p = pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("up")))
	r.h, r.stop = r.serve(t, "up", url, cfg)
	return r
}

// serve serves pool with the HTTP agent at url.
func (r *rig) serve(t *testing.T, pool, url string, cfg rigConfig) (*bridge.Handler, func()) {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := bridge.NewClient(url, cfg.client...)
	if err != nil {
		t.Fatal(err)
	}
	// As `e2a agent --http` serves it: with the conversation's history.
	convs, err := bridge.OpenConversations(context.Background(), r.p.JS, natstest.Config())
	if err != nil {
		t.Fatal(err)
	}
	up, err := httpagent.New(c, append([]httpagent.Option{httpagent.WithLogger(logger), httpagent.WithHistory(pool, convs)}, cfg.up...)...)
	if err != nil {
		t.Fatal(err)
	}
	h, err := bridge.New(pool, up, bridge.WithLogger(logger), bridge.WithMetrics(r.p.Registry),
		bridge.WithRetry(2, time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return h, r.p.Pool(pool, h, append([]agent.Option{agent.WithLogger(logger)}, cfg.agent...)...)
}

// post sends an E2A request (its JSON) with headers (name, value pairs),
// to be answered as SSE.
func (r *rig) post(body string, hdr ...string) (*http.Response, error) {
	return r.postTo("/v1/requests", body, hdr...)
}

// postTo is post to path.
func (r *rig) postTo(path, body string, hdr ...string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, r.p.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return http.DefaultClient.Do(req)
}

// ask posts an E2A request and returns its frames, checked (ordered from
// 0, one final frame last).
func (r *rig) ask(t *testing.T, body string, hdr ...string) []*e2a.Response {
	t.Helper()
	resp, err := r.post(body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return readFrames(t, resp)
}

func readFrames(t *testing.T, resp *http.Response) []*e2a.Response {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /v1/requests: %d %s", resp.StatusCode, b)
	}
	var frames []*e2a.Response
	for _, ev := range testkit.Events(testkit.MustReadSSE(t, resp.Body)) {
		f, err := e2a.ResponseFromJSON([]byte(ev.Data))
		if err != nil {
			t.Fatalf("event %q: %v", ev.Data, err)
		}
		frames = append(frames, f)
	}
	if err := e2a.CheckFrames(frames); err != nil {
		t.Fatalf("frames: %v", err)
	}
	return frames
}

// upstream answers every POST with contentType and body.
func upstream(t *testing.T, contentType, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func finalError(t *testing.T, frames []*e2a.Response) e2a.ErrorBody {
	t.Helper()
	b, err := frames[len(frames)-1].Error()
	if err != nil {
		t.Fatalf("final frame %s %s: not an error", frames[len(frames)-1].ResponseKind, frames[len(frames)-1].Body)
	}
	return b
}

// TestWriteThrough: the upstream's frames become the request's frames one
// for one, in order, kinds, bodies and metadata as written (two text
// chunks stay two frames), with the pipeline's own sequence, ids and
// provenance instead of the upstream's.
func TestWriteThrough(t *testing.T) {
	t.Parallel()
	script := strings.Join([]string{
		`{"response_kind":"e2a.chunk","request_id":"not-this","sequence":41,"response_id":"x","body":{"delta_kind":"reasoning","delta":"Thinking"}}`,
		`{"response_kind":"e2a.chunk","metadata":{"llm_response_id":"r-1"},"body":{"delta_kind":"tool","delta":{"type":"function_call","id":"c1","name":"lookup","args":{"q":"x"}}}}`,
		`{"response_kind":"e2a.chunk","metadata":{"llm_response_id":"r-1"},"body":{"delta_kind":"text","delta":"Hel"}}`,
		`{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"lo"}}`,
		`{"response_kind":"a2a.stream_event","body":{"branch":"artifact_update","payload":{"kind":"artifact-update","artifact":{"artifactId":"a1","parts":[{"kind":"text","text":"doc"}]}}}}`,
		`{"response_kind":"e2a.complete","status":"succeeded","is_final":true,"body":{"result":{"content":"Hello"}}}`,
	}, "\n") + "\n"
	r := newRig(t, upstream(t, "application/x-ndjson; charset=utf-8", script), rigConfig{})
	frames := r.ask(t, `{"request_id":"wt-1","params":{"text":"hi"}}`)
	kinds := make([]string, len(frames))
	for i, f := range frames {
		kinds[i] = f.ResponseKind
		if f.RequestID != "wt-1" || f.Sequence != int64(i) || f.ResponseID == "x" || f.Provenance.SourceProtocol == "" {
			t.Fatalf("frame %d: ids %s %d %s %+v", i, f.RequestID, f.Sequence, f.ResponseID, f.Provenance)
		}
	}
	if got := strings.Join(kinds, " "); got != "e2a.chunk e2a.chunk e2a.chunk e2a.chunk a2a.stream_event e2a.complete" {
		t.Fatalf("kinds %s", got)
	}
	if c, _ := frames[3].Chunk(); c.Delta != "lo" {
		t.Fatalf("text chunks coalesced or changed: %s", frames[3].Body)
	}
	if frames[2].Metadata["llm_response_id"] != "r-1" || frames[3].Metadata != nil {
		t.Fatalf("metadata %v, %v", frames[2].Metadata, frames[3].Metadata)
	}
	if c, _ := frames[5].Complete(); !strings.Contains(fmt.Sprint(c.Result), "Hello") {
		t.Fatalf("result %s", frames[5].Body)
	}
}

// TestAnswerForms: SSE and JSON answers, and every way an answer can be
// wrong, each ending the request with its code and retryable.
func TestAnswerForms(t *testing.T) {
	t.Parallel()
	const ok = `{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"a"}}`
	const done = `{"response_kind":"e2a.complete","body":{"result":1}}`
	cases := []struct {
		name, ct, body string
		opts           []httpagent.Option
		code           string // "" = succeeded
		retryable      bool
		frames         int // frames of the request, final included
	}{
		{"sse", "text/event-stream", ": hi\n\nevent: e\ndata: " + ok + "\n\ndata: " + done + "\n\n", nil, "", false, 2},
		{"json frame", "application/json", done, nil, "", false, 1},
		{"json result", "application/problem+json", `["a","b"]`, nil, "", false, 1},
		{"json string result", "application/json", `"hello"`, nil, "", false, 1},
		{"text result", "text/plain; charset=utf-8", "hello\n", nil, "", false, 1},
		{"empty text", "text/plain", "\r\n", nil, bridge.CodeProtocol, false, 1},
		{"text in latin 1", "text/plain; charset=ISO-8859-1", "caf\xe9", nil, "", false, 1},
		{"text in another charset", "text/plain; charset=shift_jis", "caf\x82\xa0", nil, bridge.CodeProtocol, false, 1},
		{"frames sniffed as text", "text/plain; charset=utf-8", ok + "\n" + done + "\n", nil, bridge.CodeProtocol, false, 1},
		{"sse sniffed as text", "text/plain; charset=utf-8", "data: " + done + "\n\n", nil, bridge.CodeProtocol, false, 1},
		{"stream+json", "application/stream+json", ok + "\n" + done + "\n", nil, "", false, 2},
		{"jsonlines", "application/x-jsonlines", ok + "\n" + done + "\n", nil, "", false, 2},
		{"text not utf-8", "text/plain", "caf\xe9", nil, bridge.CodeProtocol, false, 1},
		{"text too large", "text/plain", strings.Repeat("x", 2000), []httpagent.Option{httpagent.WithMaxFrameBytes(1024)}, bridge.CodeProtocol, false, 1},
		{"not text or frames", "text/html", "<p>hi</p>", nil, bridge.CodeProtocol, false, 1},
		{"json non-final frame", "application/json", ok, nil, bridge.CodeProtocol, false, 1},
		{"json garbage", "application/json", `{"a":`, nil, bridge.CodeProtocol, false, 1},
		{"empty json", "application/json", ``, nil, bridge.CodeProtocol, false, 1},
		{"no content type", "", ok + "\n" + done, nil, bridge.CodeProtocol, false, 1},
		{"chunk without delta_kind", "application/x-ndjson", `{"response_kind":"e2a.chunk","body":{"delta":"a"}}`, nil, bridge.CodeProtocol, false, 1},
		{"complete failed", "application/x-ndjson", `{"response_kind":"e2a.complete","status":"failed","body":{}}`, nil, bridge.CodeProtocol, false, 1},
		{"final in progress", "application/x-ndjson", `{"response_kind":"e2a.chunk","is_final":true,"status":"in_progress","body":{"delta_kind":"text","delta":"a"}}`, nil, bridge.CodeProtocol, false, 1},
		{"unknown kind", "application/x-ndjson", ok + "\n" + `{"response_kind":"e2a.done","body":{}}`, nil, bridge.CodeProtocol, false, 2},
		{"not a frame line", "application/x-ndjson", `{"reply":"hi"}`, nil, bridge.CodeProtocol, false, 1},
		// Ended by the agent (the body's Content-Length reached): its own
		// answer, not a cut (TestAnswerEndedWithoutFinalFrame).
		{"ends without final", "application/x-ndjson", ok + "\n" + ok + "\n", nil, bridge.CodeProtocol, false, 3},
		{"sse ends without final", "text/event-stream", "data: " + ok + "\n\n", nil, bridge.CodeProtocol, false, 2},
		{"sse ends mid-event", "text/event-stream", "data: " + ok + "\n\ndata: {\"resp", nil, bridge.CodeProtocol, false, 2},
		{"too many frames", "application/x-ndjson", strings.Repeat(ok+"\n", 5) + done, []httpagent.Option{httpagent.WithMaxFrames(3)}, bridge.CodeProtocol, false, 4},
		{"frame too large", "application/x-ndjson", ok + "\n" + `{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"` + strings.Repeat("x", 2000) + `"}}`,
			[]httpagent.Option{httpagent.WithMaxFrameBytes(1024)}, bridge.CodeProtocol, false, 2},
		{"upstream's own error", "application/x-ndjson", ok + "\n" + `{"response_kind":"e2a.error","body":{"code":"no_weather","message":"none","retryable":true}}`, nil, "no_weather", true, 2},
	}
	// One upstream answers every case (params.case); the cases with
	// options have a pool of their own.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		env, err := e2a.FromJSON(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c := cases[env.ParamInt("case", -1)]
		w.Header().Set("Content-Type", c.ct)
		_, _ = io.WriteString(w, c.body)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{})
	for i, c := range cases {
		if c.opts != nil {
			r.serve(t, fmt.Sprintf("af%d", i), srv.URL, rigConfig{up: c.opts})
		}
	}
	for i, c := range cases {
		path := "/v1/requests"
		if c.opts != nil {
			path = fmt.Sprintf("/pools/af%d/v1/requests", i)
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			resp, err := r.postTo(path, fmt.Sprintf(`{"request_id":"af-%d","params":{"case":%d}}`, i, i))
			if err != nil {
				t.Fatal(err)
			}
			frames := readFrames(t, resp)
			if len(frames) != c.frames {
				t.Errorf("%d frames, want %d", len(frames), c.frames)
			}
			last := frames[len(frames)-1]
			if c.code == "" {
				if last.Status != e2a.StatusSucceeded {
					t.Fatalf("final %s %s", last.ResponseKind, last.Body)
				}
				return
			}
			if eb := finalError(t, frames); eb.Code != c.code || eb.Retryable != c.retryable {
				t.Fatalf("final error %+v, want %s retryable=%v", eb, c.code, c.retryable)
			}
		})
	}
}

// TestFramesAfterFinal: what the upstream sends after its final frame is
// not written, and is logged.
func TestFramesAfterFinal(t *testing.T) {
	t.Parallel()
	r := newRig(t, upstream(t, "application/x-ndjson",
		`{"response_kind":"e2a.complete","body":{"result":1}}`+"\n"+`{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"late"}}`+"\n"), rigConfig{})
	frames := r.ask(t, `{"request_id":"late-1","params":{"text":"hi"}}`)
	if len(frames) != 1 || frames[0].ResponseKind != e2a.KindComplete {
		t.Fatalf("frames %d, last %s", len(frames), frames[len(frames)-1].ResponseKind)
	}
	testkit.Eventually(t, 5*time.Second, "the late frame logged", func() bool {
		return strings.Contains(r.log.String(), "after its final frame")
	})
}

// TestSecretsStayOut: the bridge's credentials and the request's trace
// context reach the upstream; the credentials are in no stored envelope or
// frame and in no log line, even when the upstream echoes them in an
// error page.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	const key, hdr = "sk-httpagent-5f0c2a", "hdr-httpagent-77d1"
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	var calls atomic.Int32
	got := make(chan http.Header, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Clone()
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "credentials refused: %s %s", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"response_kind":"e2a.complete","body":{"result":"ok"}}`+"\n")
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{client: []bridge.ClientOption{
		bridge.WithCredentials(bridge.Credentials{APIKey: key, Headers: map[string]string{"X-Api-Key": hdr}})}})
	tp := "00-" + traceID + "-00f067aa0ba902b7-01"
	frames := r.ask(t, `{"request_id":"sec-1","params":{"text":"hi"}}`, "traceparent", tp)
	if eb := finalError(t, frames); eb.Code != bridge.CodeAuth || eb.Retryable || !strings.Contains(eb.Message, "[redacted]") {
		t.Fatalf("401 echoing the key: %+v", eb)
	}
	frames = r.ask(t, `{"request_id":"sec-2","params":{"text":"hi"}}`, "traceparent", tp)
	if frames[len(frames)-1].ResponseKind != e2a.KindComplete {
		t.Fatalf("second request: %s", frames[len(frames)-1].Body)
	}
	for range 2 {
		h := <-got
		if h.Get("Authorization") != "Bearer "+key || h.Get("X-Api-Key") != hdr || !strings.Contains(h.Get("Traceparent"), traceID) ||
			h.Get("Content-Type") != "application/json" || h.Get("Accept") != httpagent.Accept {
			t.Fatalf("upstream headers %v", h)
		}
	}
	for _, secret := range []string{key, hdr} {
		if strings.Contains(r.log.String(), secret) {
			t.Errorf("a credential is in the log:\n%s", r.log.String())
		}
		if n := natstest.StoredWith(t, r.p.JS, secret, streams.RequestsStream, streams.ResponsesStream); n > 0 {
			t.Errorf("a credential is stored in %d messages", n)
		}
	}
}

// TestUpstreamPathNotShown: the HTTP agent's URL may hold a secret in
// its path (a webhook URL: https://n8n.example.com/webhook/<token>). The
// bridge names its upstream by scheme and host only ("never its path, query
// or credentials", Upstream.Name), and Classify takes the query out of a
// transport error; but when the agent is unreachable, the e2a.error every
// client of the pool receives, and the bridge's log, quote the whole URL
// with its path. The client must not see the path's token.
func TestUpstreamPathNotShown(t *testing.T) {
	t.Parallel()
	const token = "wh-5e8f0a77c1d94b2e"
	dead := natstest.FreePorts(t, 1)[0]
	r := newRig(t, "http://127.0.0.1:"+itoa(dead)+"/webhook/"+token, rigConfig{client: []bridge.ClientOption{bridge.WithConnectTimeout(time.Second)}})
	frames := r.ask(t, `{"request_id":"path-1","params":{"text":"hi"}}`)
	last := frames[len(frames)-1]
	if last.ResponseKind != e2a.KindError || !strings.Contains(string(last.Body), bridge.CodeUnreachable) {
		t.Fatalf("final %s %s; want e2a.error %s", last.ResponseKind, last.Body, bridge.CodeUnreachable)
	}
	if strings.Contains(string(last.Body), token) {
		t.Errorf("the client's e2a.error quotes the upstream URL's path: %s; want the upstream named by scheme and host only", last.Body)
	}
	if n := natstest.StoredWith(t, r.p.JS, token, streams.ResponsesStream); n > 0 {
		t.Errorf("the upstream URL's path is stored in %d messages of E2A_RESPONSES; want none", n)
	}
	if strings.Contains(r.log.String(), token) {
		t.Errorf("the upstream URL's path is in the log:\n%s", r.log.String())
	}
}

// TestNotResumable: a request whose worker stops after the upstream's
// first frame is not called again by the next worker: it ends with the
// runtime's agent_interrupted, retryable (an HTTP agent cannot be
// resumed), and the upstream saw one call.
func TestNotResumable(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	first := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"a"}}`+"\n")
		w.(http.Flusher).Flush()
		first <- struct{}{}
		<-r.Context().Done() // until the worker lets go
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{agent: []agent.Option{agent.WithDrainTimeout(10 * time.Millisecond)}})
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := r.post(`{"request_id":"nr-1","params":{"text":"hi"}}`)
		done <- result{resp, err}
	}()
	<-first
	r.stop() // the worker hands the request back after the drain timeout
	r.p.Pool("up", r.h)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	frames := readFrames(t, res.resp)
	if eb := finalError(t, frames); eb.Code != e2a.ErrCodeAgentInterrupted || !eb.Retryable {
		t.Fatalf("final error %+v", eb)
	}
	if len(frames) != 2 || calls.Load() != 1 {
		t.Fatalf("%d frames, %d upstream calls", len(frames), calls.Load())
	}
}
