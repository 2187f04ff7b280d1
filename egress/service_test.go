package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

type sseEvent = testkit.SSEEvent

// readSSE parses an SSE body into events and comments (the shared parser).
func readSSE(t testing.TB, r io.Reader) []sseEvent { return testkit.MustReadSSE(t, r) }

type httpEnv struct {
	*testEnv
	svc *Service
	srv *httptest.Server
	reg *prometheus.Registry
}

func startHTTP(t testing.TB, opts ...Option) *httpEnv {
	e := startEnv(t)
	return e.serveHTTP(t, e.nc, opts...)
}

// serveHTTP serves over HTTP a Service on nc: e's connection, or another
// one to its server.
func (e *testEnv) serveHTTP(t testing.TB, nc *nats.Conn, opts ...Option) *httpEnv {
	reg := prometheus.NewRegistry()
	svc, err := New(nc, append([]Option{WithRegisterer(reg), WithProjections(testProjections)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	svc.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); svc.Close() })
	return &httpEnv{testEnv: e, svc: svc, srv: srv, reg: reg}
}

func (h *httpEnv) get(t testing.TB, path string, hdr ...string) *http.Response {
	t.Helper()
	return testkit.Open(t, http.MethodGet, h.srv.URL+path, "", hdr...)
}

func TestHTTPStreamSSE(t *testing.T) {
	h := startHTTP(t)
	h.finished(t, "req_1", 2)
	resp := h.get(t, "/v1/requests/req_1/stream")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	evs := readSSE(t, resp.Body)
	if len(evs) != 4 || !evs[0].Comment {
		t.Fatalf("events %+v", evs)
	}
	for i, ev := range evs[1:] {
		r, err := e2a.ResponseFromJSON([]byte(ev.Data))
		if err != nil {
			t.Fatal(err)
		}
		if ev.ID != strconv.Itoa(i) || ev.Event != r.ResponseKind || r.Sequence != int64(i) {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	// Resume: Last-Event-ID wins over ?from.
	resp = h.get(t, "/v1/requests/req_1/stream?from=0", "Last-Event-ID", "0")
	evs = readSSE(t, resp.Body)
	if len(evs) != 3 || evs[1].ID != "1" || evs[2].ID != "2" || evs[2].Event != e2a.KindComplete {
		t.Fatalf("resume: %+v", evs)
	}
	resp = h.get(t, "/v1/requests/req_1/stream?from=2")
	if evs = readSSE(t, resp.Body); len(evs) != 2 || evs[1].ID != "2" {
		t.Fatalf("from=2: %+v", evs)
	}
	// Projections are filled on request.
	resp = h.get(t, "/v1/requests/req_1/stream?projections=true", "Accept", "application/x-ndjson")
	body, _ := io.ReadAll(resp.Body)
	if strings.Count(string(body), `"projections":{"acp":`) != 3 {
		t.Fatalf("projections: %s", body)
	}
	// Errors are JSON.
	for path, want := range map[string]int{
		"/v1/requests/nope/stream":          404,
		"/v1/requests/req_1/stream?from=x":  400,
		"/v1/requests/req_1/stream?from=-1": 400,
	} {
		resp := h.get(t, path)
		var body APIError
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != want || body.Error.Code == "" || body.Error.Message == "" {
			t.Errorf("%s: status %d body %+v err %v", path, resp.StatusCode, body, err)
		}
	}
	if got := testutil.ToFloat64(h.svc.m.frames.WithLabelValues(FormatE2ASSE)); got != 6 {
		t.Errorf("frames written %v", got)
	}
}

func TestHTTPStreamNDJSONLive(t *testing.T) {
	h := startHTTP(t, WithHeartbeatInterval(20*time.Millisecond))
	w := h.running(t, "req_live")
	resp := h.get(t, "/v1/requests/req_live/stream", "Accept", "application/x-ndjson")
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var c e2a.SequenceChecker
	blank := 0
	for sc.Scan() {
		if sc.Text() == "" {
			blank++
			if blank == 2 { // the stream is live and idle: now the frames
				h.async(func() {
					w.text("a")
					w.text("b")
					w.complete("ab")
				})
			}
			continue
		}
		r, err := e2a.ResponseFromJSON(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Done() || c.Next() != 3 {
		t.Fatalf("frames %d done %v", c.Next(), c.Done())
	}
	if blank < 2 {
		t.Fatalf("%d heartbeats", blank)
	}
}

func TestHTTPHeartbeatBeforeFirstFrame(t *testing.T) {
	h := startHTTP(t, WithHeartbeatInterval(20*time.Millisecond), WithWaitLimits(150*time.Millisecond, 0))
	h.submit(t, newEnvelope("req_hb"))
	resp := h.get(t, "/v1/requests/req_hb/stream")
	evs := readSSE(t, resp.Body)
	comments := 0
	for _, ev := range evs {
		if ev.Comment {
			comments++
		}
	}
	last := evs[len(evs)-1]
	if comments < 3 || last.Event != "error" || !strings.Contains(last.Data, CodeTimeout) {
		t.Fatalf("events %+v", evs)
	}
}

// TestHTTPHeartbeatLongerThanPoll: an E2A SSE stream of a request with no
// frame yet writes its keep-alive comment every heartbeat interval also
// when the interval is longer than the reader's poll of the stream (as
// with the defaults, 15 s and 2 s), each poll ending one wait of the
// reader and starting another.
func TestHTTPHeartbeatLongerThanPoll(t *testing.T) {
	h := startHTTP(t, WithHeartbeatInterval(200*time.Millisecond), WithReplayOptions(WithPollInterval(40*time.Millisecond)))
	h.submit(t, newEnvelope("req_hb_poll"))
	// Bounds the test should no keep-alive come.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", h.srv.URL+"/v1/requests/req_hb_poll/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for beats := 0; beats < 2; {
		if !sc.Scan() {
			t.Fatalf("the stream ended (%v) after %d keep-alives: %q", sc.Err(), beats, lines)
		}
		lines = append(lines, sc.Text())
		if sc.Text() == ": keep-alive" {
			beats++
		}
	}
}

func TestHTTPAggregateJSON(t *testing.T) {
	h := startHTTP(t)
	w := h.running(t, "req_agg")
	decode := func(resp *http.Response) RequestView {
		t.Helper()
		var v RequestView
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	resp := h.get(t, "/v1/requests/req_agg")
	v := decode(resp)
	if resp.StatusCode != 202 || v.State != StatePending || len(v.Frames) != 0 || len(v.Envelope) == 0 {
		t.Fatalf("pending: %d %+v", resp.StatusCode, v)
	}
	w.text("a")
	resp = h.get(t, "/v1/requests/req_agg")
	v = decode(resp)
	if resp.StatusCode != 202 || v.State != StateRunning || len(v.Frames) != 1 || v.NextSequence != 1 {
		t.Fatalf("running: %d %+v", resp.StatusCode, v)
	}
	h.whenLive("req_agg", func() { // the waiting GET below has subscribed
		w.text("b")
		w.complete("ab")
	})
	resp = h.get(t, "/v1/requests/req_agg?wait=true")
	v = decode(resp)
	if resp.StatusCode != 200 || v.State != StateSucceeded || len(v.Frames) != 3 || v.NextSequence != 3 {
		t.Fatalf("final: %d %+v", resp.StatusCode, v)
	}
	var frames []*e2a.Response
	for _, raw := range v.Frames {
		r, err := e2a.ResponseFromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, r)
	}
	if err := e2a.CheckFrames(frames); err != nil {
		t.Fatal(err)
	}
	resp = h.get(t, "/v1/requests/nope")
	if resp.StatusCode != 404 {
		t.Fatalf("unknown: %d", resp.StatusCode)
	}
	// A failed request.
	env2 := newEnvelope("req_fail")
	h.submit(t, env2)
	h.writer(t, env2).fail("handler_error", "boom", false)
	resp = h.get(t, "/v1/requests/req_fail")
	if v = decode(resp); resp.StatusCode != 200 || v.State != StateFailed {
		t.Fatalf("failed: %d %+v", resp.StatusCode, v)
	}
}

// TestHTTPAggregateJSONFromPastFrames: GET /v1/requests/{id}?from=N with N
// past every frame stored answers no frame and the request's state: its
// final frame's when it has ended (200), running while it runs (202), and
// pending only when it has no frame at all. next_sequence is the sequence
// to ask for next: the resume point while the request runs (no frame
// stored is skipped), one past the final frame once it has ended, however
// far past it the resume point was (it answered the resume point: 99).
func TestHTTPAggregateJSONFromPastFrames(t *testing.T) {
	h := startHTTP(t)
	h.finished(t, "past-done", 2) // frames 0, 1, 2 (final, succeeded)
	env := newEnvelope("past-failed")
	h.submit(t, env)
	w := h.writer(t, env)
	w.text("a")
	w.fail("handler_error", "boom", false) // frame 1 (final, failed)
	h.running(t, "past-running").text("a") // frame 0
	h.running(t, "past-pending")
	for _, c := range []struct {
		path         string
		status       int
		state        string
		frames       int
		nextSequence int64
	}{
		{"/v1/requests/past-done?from=3", 200, StateSucceeded, 0, 3},
		{"/v1/requests/past-done?from=99", 200, StateSucceeded, 0, 3},
		{"/v1/requests/past-done?from=99&wait=true", 200, StateSucceeded, 0, 3},
		{"/v1/requests/past-failed?from=5", 200, StateFailed, 0, 2},
		{"/v1/requests/past-running?from=5", 202, StateRunning, 0, 5},
		{"/v1/requests/past-done?from=3&wait=true", 200, StateSucceeded, 0, 3},
		{"/v1/requests/past-failed?from=2", 200, StateFailed, 0, 2},
		{"/v1/requests/past-failed?from=2&wait=true", 200, StateFailed, 0, 2},
		{"/v1/requests/past-running?from=1", 202, StateRunning, 0, 1},
		{"/v1/requests/past-pending?from=1", 202, StatePending, 0, 1},
		// The last frame in the range: its state, as always.
		{"/v1/requests/past-done?from=2", 200, StateSucceeded, 1, 3},
		{"/v1/requests/past-running?from=0", 202, StateRunning, 1, 1},
	} {
		resp := h.get(t, c.path)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var v RequestView
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v: %s", c.path, err, b)
		}
		if resp.StatusCode != c.status || v.State != c.state || len(v.Frames) != c.frames || v.NextSequence != c.nextSequence {
			t.Errorf("%s: %d, state %q, %d frames, next %d; want %d, state %q, %d frames, next %d: %s",
				c.path, resp.StatusCode, v.State, len(v.Frames), v.NextSequence, c.status, c.state, c.frames, c.nextSequence, b)
		}
	}
}

// TestServeE2ANegotiation: ingress calls ServeE2A after its publish.
func TestServeE2ANegotiation(t *testing.T) {
	e := startEnv(t)
	svc, err := New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	e.finished(t, "req_n", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc.ServeE2A(w, r, "req_n")
	}))
	defer srv.Close()
	for accept, want := range map[string]string{
		"text/event-stream":                     "text/event-stream",
		"application/x-ndjson":                  "application/x-ndjson",
		"application/json":                      "application/json",
		"text/html, application/x-ndjson;q=0.9": "application/x-ndjson",
	} {
		req, _ := http.NewRequest("POST", srv.URL+"?wait=true", nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Content-Type") != want || resp.StatusCode != 200 || !strings.Contains(string(body), `"e2a.complete"`) {
			t.Errorf("Accept %s: %d %s %s", accept, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}

// TestHTTPClientDisconnectStopsReader: when the client goes away the reader
// unsubscribes and the open-streams gauge returns to zero.
func TestHTTPClientDisconnectStopsReader(t *testing.T) {
	h := startHTTP(t)
	h.submit(t, newEnvelope("req_gone"))
	base := h.nc.NumSubscriptions()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.srv.URL+"/v1/requests/req_gone/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the head is out
		t.Fatal(err)
	}
	if n := h.nc.NumSubscriptions(); n != base+1 {
		t.Fatalf("subscriptions %d, want %d", n, base+1)
	}
	if v := testutil.ToFloat64(h.svc.m.open.WithLabelValues(FormatE2ASSE)); v != 1 {
		t.Fatalf("streams open %v", v)
	}
	cancel()
	resp.Body.Close()
	testkit.Eventually(t, 5*time.Second, "the reader to close", func() bool {
		return h.nc.NumSubscriptions() == base && testutil.ToFloat64(h.svc.m.open.WithLabelValues(FormatE2ASSE)) == 0
	})
}

// writeLog records what a server's connections write, one entry per
// Write on the connection: the segments a client receives.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}

type loggedListener struct {
	net.Listener
	log *writeLog
}

func (l loggedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return loggedConn{Conn: c, log: l.log}, nil
}

type loggedConn struct {
	net.Conn
	log *writeLog
}

func (c loggedConn) Write(p []byte) (int, error) {
	c.log.mu.Lock()
	c.log.writes = append(c.log.writes, string(p))
	c.log.mu.Unlock()
	return c.Conn.Write(p)
}

// serveLogged serves h's endpoints on a second loopback server whose
// connections record their writes.
func (h *httpEnv) serveLogged(t testing.TB) (url string, log *writeLog) {
	mux := http.NewServeMux()
	h.svc.Register(mux)
	srv := httptest.NewUnstartedServer(mux)
	log = &writeLog{}
	srv.Listener = loggedListener{Listener: srv.Listener, log: log}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, log
}

func getNDJSON(url string) (*http.Response, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	return http.DefaultClient.Do(req)
}

// getLater starts a GET of the NDJSON stream at url: its response comes on
// the channel once its head arrives (the channel is closed on an error).
func getLater(t *testing.T, url string) <-chan *http.Response {
	got := make(chan *http.Response, 1)
	go func() {
		resp, err := getNDJSON(url)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- resp
	}()
	return got
}

// finishAfterHead checks that the head went out alone (the only write so
// far), completes the request with w and returns the rest of the body.
func finishAfterHead(t *testing.T, log *writeLog, resp *http.Response, w *writer) string {
	t.Helper()
	if writes := log.all(); len(writes) != 1 || !strings.HasPrefix(writes[0], "HTTP/1.1 200") {
		t.Fatalf("writes %q: want the head alone", writes)
	}
	w.complete("done")
	b, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(b), "done") {
		t.Fatalf("body %q: %v", b, err)
	}
	return string(b)
}

// A finished request's stream is one write: the head, every frame and the
// end of the chunked body (net/http writes the last chunk when the handler
// returns; egress leaves the final frame buffered for it).
func TestHTTPStreamCoalescesWrites(t *testing.T) {
	h := startHTTP(t)
	h.finished(t, "req_co", 5)
	url, log := h.serveLogged(t)
	resp, err := http.Get(url + "/v1/requests/req_co/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if evs := readSSE(t, resp.Body); len(evs) != 7 {
		t.Fatalf("events %+v", evs)
	}
	w := log.all()
	if len(w) != 1 || !strings.HasPrefix(w[0], "HTTP/1.1 200") || !strings.HasSuffix(w[0], "0\r\n\r\n") {
		t.Fatalf("%d writes for a finished request, want 1 with the head and the last chunk: %q", len(w), w)
	}
}

// The head of a stream waits for the request's first frame and goes out
// with it; the final frame goes out with the end of the response.
func TestHTTPStreamHeadWaitsForFirstFrame(t *testing.T) {
	h := startHTTP(t, WithHeartbeatInterval(time.Hour), func(c *config) error { c.headHold = time.Hour; return nil })
	env := newEnvelope("req_hold")
	h.submit(t, env)
	url, log := h.serveLogged(t)
	got := getLater(t, url+"/v1/requests/req_hold/stream")
	// Frame 0 is written once the reader waits for it live (without the
	// hold, the head would have gone out alone before that wait).
	testkit.Eventually(t, 10*time.Second, "the reader to wait", func() bool {
		buf := make([]byte, 1<<20)
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "egress.(*Reader).wait(")
	})
	w := h.writer(t, env)
	w.text("first")
	resp, ok := <-got
	if !ok {
		return
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.Contains(line, "first") {
		t.Fatalf("first line %q: %v", line, err)
	}
	if w := log.all(); len(w) != 1 || !strings.HasPrefix(w[0], "HTTP/1.1 200") || !strings.Contains(w[0], "first") {
		t.Fatalf("writes %q: want the head and frame 0 in one", w)
	}
	w.complete("done")
	if _, err := io.ReadAll(rd); err != nil {
		t.Fatal(err)
	}
	if w := log.all(); len(w) != 2 || !strings.Contains(w[1], "done") || !strings.HasSuffix(w[1], "0\r\n\r\n") {
		t.Fatalf("writes %q: want the final frame and the last chunk in the second", w)
	}
}

// A first frame later than the hold finds the head sent: a client sees
// the response start while the agent has not answered yet.
func TestHTTPStreamHeadSentWhenFirstFrameIsLate(t *testing.T) {
	h := startHTTP(t, WithHeartbeatInterval(time.Hour))
	env := newEnvelope("req_late")
	h.submit(t, env)
	url, log := h.serveLogged(t)
	resp, err := getNDJSON(url + "/v1/requests/req_late/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	finishAfterHead(t, log, resp, h.writer(t, env))
}

// A resumed stream of a running request holds its head for the next frame
// no longer than a new one: the frames before the resume point, read and
// dropped, are not a first frame.
func TestHTTPStreamResumedHeadSentWhenNextFrameIsLate(t *testing.T) {
	h := startHTTP(t, WithHeartbeatInterval(time.Hour))
	w := h.running(t, "req_resume_late")
	w.text("a")
	w.text("b")
	url, log := h.serveLogged(t)
	got := getLater(t, url+"/v1/requests/req_resume_late/stream?from=2")
	var resp *http.Response
	select {
	case r, ok := <-got:
		if !ok {
			return
		}
		resp = r
	case <-time.After(10 * time.Second):
		w.complete("done") // lets the request end for the cleanup
		t.Fatal("no response head while the next frame is late")
	}
	defer resp.Body.Close()
	if b := finishAfterHead(t, log, resp, w); strings.Contains(b, `"delta":"a"`) {
		t.Fatalf("a frame before the resume point was sent: %q", b)
	}
}

// What is written goes out before the reader waits for the next frame: a
// client gets frame 0 while frame 1 is not written yet (no heartbeat to
// flush for it).
func TestHTTPStreamFlushesBeforeWaiting(t *testing.T) {
	h := startHTTP(t, WithHeartbeatInterval(time.Hour))
	w := h.running(t, "req_wait")
	w.text("a")
	resp := h.get(t, "/v1/requests/req_wait/stream", "Accept", "application/x-ndjson")
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	l := testkit.Receive(t, lines, 10*time.Second, "frame 0 was not sent while the reader waited for frame 1")
	if r, err := e2a.ResponseFromJSON([]byte(l)); err != nil || r.Sequence != 0 {
		t.Fatalf("first line %q: %v", l, err)
	}
	w.complete("a")
	n := 0
	for range lines {
		n++
	}
	if n != 1 {
		t.Fatalf("%d more lines, want the final frame", n)
	}
}

// testProjections stands for the projector of the pipeline
// (protocols.FillProjections, tested in package protocols): it fills
// projections.acp, as that one does for every frame of the stream tested.
func testProjections(r *e2a.Response) *e2a.Response {
	c := *r
	c.Projections = map[string]any{"acp": map[string]any{"seq": r.Sequence}}
	return &c
}
