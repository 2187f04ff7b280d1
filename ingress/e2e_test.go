package ingress_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// pipeline runs ingress + egress over HTTP and the demo agent on an
// embedded JetStream server.
type pipeline struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	in  *ingress.Server
}

func startPipeline(t *testing.T) *pipeline { return startPipelineWith(t) }

// startPipelineWith is startPipeline with more ingress options.
func startPipelineWith(t *testing.T, opts ...ingress.Option) *pipeline {
	t.Helper()
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	f := pipetest.ServeFront(t, nc, []egress.Option{egress.WithRegisterer(reg)},
		append([]ingress.Option{ingress.WithRegisterer(reg), ingress.WithMaxBodyBytes(64 << 10)}, opts...)...)
	in := f.Ingress
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(ctx, nc, "demo", demo.New(), agent.WithMetrics(reg))
	}()
	t.Cleanup(func() { cancel(); <-done })
	// The pool is known (its card served, the pipeline's card listing it)
	// once its worker has made its consumer: wait for that, not for the
	// first request to find it.
	testkit.Eventually(t, 10*time.Second, "the demo pool's consumer", func() bool {
		m, err := in.Pools(ctx)
		return err == nil && m["demo"] != ""
	})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &pipeline{url: f.URL, nc: nc, js: js, in: in}
}

func (p *pipeline) post(t *testing.T, path, accept, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", p.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (p *pipeline) get(t *testing.T, path string, hdr ...string) *http.Response {
	t.Helper()
	return testkit.Open(t, http.MethodGet, p.url+path, "", hdr...)
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	id, event string
	data      []byte
}

// readSSE reads the events (not comments) of an SSE answer with the shared
// parser.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, e := range testkit.Events(testkit.MustReadSSE(t, r)) {
		out = append(out, sseEvent{id: e.ID, event: e.Event, data: []byte(e.Data)})
	}
	return out
}

func framesOf(t *testing.T, events []sseEvent) []*e2a.Response {
	t.Helper()
	var frames []*e2a.Response
	for _, ev := range events {
		f, err := e2a.ResponseFromJSON(ev.data)
		if err != nil {
			t.Fatalf("event %q: %v", ev.data, err)
		}
		if ev.id != strconv.FormatInt(f.Sequence, 10) || ev.event != f.ResponseKind {
			t.Fatalf("event id/event %q/%q do not match frame %d %s", ev.id, ev.event, f.Sequence, f.ResponseKind)
		}
		frames = append(frames, f)
	}
	return frames
}

func TestE2ESSE(t *testing.T) {
	p := startPipeline(t)
	resp := p.post(t, "/v1/requests", "text/event-stream", `{"request_id":"sse-1","method":"chat.send","params":{"text":"hi","frames":3}}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatal("missing X-Accel-Buffering: no")
	}
	frames := framesOf(t, readSSE(t, resp.Body))
	if err := e2a.CheckFrames(frames); err != nil {
		t.Fatal(err)
	}
	// reasoning, tool call, tool response, 3 text chunks (possibly coalesced), complete
	last := frames[len(frames)-1]
	if last.ResponseKind != e2a.KindComplete || last.RequestID != "sse-1" || last.Method != "chat.send" {
		t.Fatalf("last frame %+v", last)
	}
	kinds := map[string]bool{}
	for _, f := range frames[:len(frames)-1] {
		c, err := f.Chunk()
		if err != nil {
			t.Fatal(err)
		}
		kinds[c.DeltaKind] = true
	}
	for _, k := range []string{e2a.DeltaReasoning, e2a.DeltaTool, e2a.DeltaText} {
		if !kinds[k] {
			t.Fatalf("no %s chunk in %d frames", k, len(frames))
		}
	}
}

func TestE2ENDJSONAndResume(t *testing.T) {
	p := startPipeline(t)
	resp := p.post(t, "/v1/requests", "application/x-ndjson", `{"request_id":"nd-1","params":{"text":"hi","frames":4}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var frames []*e2a.Response
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		f, err := e2a.ResponseFromJSON(sc.Bytes())
		if err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		frames = append(frames, f)
	}
	if err := e2a.CheckFrames(frames); err != nil {
		t.Fatal(err)
	}
	mid := frames[len(frames)/2].Sequence
	// Resume with Last-Event-ID: frames after mid, no gap, no duplicate.
	for _, tc := range []struct {
		name string
		resp *http.Response
	}{
		{"last-event-id", p.get(t, "/v1/requests/nd-1/stream", "Accept", "text/event-stream", "Last-Event-ID", strconv.FormatInt(mid, 10))},
		{"from", p.get(t, "/v1/requests/nd-1/stream?from="+strconv.FormatInt(mid+1, 10), "Accept", "text/event-stream")},
	} {
		got := framesOf(t, readSSE(t, tc.resp.Body))
		if len(got) != len(frames)-int(mid)-1 {
			t.Fatalf("%s: resumed %d frames, want %d", tc.name, len(got), len(frames)-int(mid)-1)
		}
		for i, f := range got {
			if f.Sequence != mid+1+int64(i) || f.ResponseID != frames[mid+1+int64(i)].ResponseID {
				t.Fatalf("%s: frame %d is seq %d", tc.name, i, f.Sequence)
			}
		}
	}
}

func TestE2EAcceptThenJSON(t *testing.T) {
	p := startPipeline(t)
	resp := p.post(t, "/v1/requests", "", `{"params":{"text":"hi","frames":2}}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var acc ingress.AcceptedBody
	if err := json.NewDecoder(resp.Body).Decode(&acc); err != nil {
		t.Fatal(err)
	}
	if len(acc.RequestID) != 36 || acc.Links["stream"] != "/v1/requests/"+acc.RequestID+"/stream" {
		t.Fatalf("accepted %+v", acc)
	}
	// ?wait=true on GET returns the aggregated JSON once final.
	res := p.get(t, "/v1/requests/"+acc.RequestID+"?wait=true")
	if res.StatusCode != 200 {
		t.Fatalf("GET status %d", res.StatusCode)
	}
	var agg struct {
		Envelope *e2a.Envelope   `json:"envelope"`
		Frames   []*e2a.Response `json:"frames"`
	}
	if err := json.NewDecoder(res.Body).Decode(&agg); err != nil {
		t.Fatal(err)
	}
	if agg.Envelope == nil || agg.Envelope.RequestID != acc.RequestID {
		t.Fatalf("envelope %+v", agg.Envelope)
	}
	if err := e2a.CheckFrames(agg.Frames); err != nil {
		t.Fatal(err)
	}
	// POST ?wait=true answers the aggregated JSON directly.
	res2 := p.post(t, "/v1/requests?wait=true", "", `{"request_id":"w-1","params":{"text":"x","frames":1}}`)
	if res2.StatusCode != 200 {
		t.Fatalf("POST wait status %d", res2.StatusCode)
	}
}

func TestE2EDuplicateRequestIsOneRequest(t *testing.T) {
	p := startPipeline(t)
	body := `{"request_id":"dup-1","params":{"text":"hi","frames":1}}`
	var accs []ingress.AcceptedBody
	for i := 0; i < 2; i++ {
		resp := p.post(t, "/v1/requests", "", body)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("status %d", resp.StatusCode)
		}
		var acc ingress.AcceptedBody
		if err := json.NewDecoder(resp.Body).Decode(&acc); err != nil {
			t.Fatal(err)
		}
		accs = append(accs, acc)
	}
	if accs[0].Duplicate || !accs[1].Duplicate {
		t.Fatalf("duplicate flags %+v", accs)
	}
	info, err := p.js.Stream(context.Background(), streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	st, err := info.Info(context.Background(), jetstream.WithSubjectFilter("e2a.req.>"))
	if err != nil {
		t.Fatal(err)
	}
	if st.State.Msgs != 1 {
		t.Fatalf("E2A_REQUESTS holds %d messages, want 1", st.State.Msgs)
	}
	// And one set of frames: exactly one final frame.
	res := p.get(t, "/v1/requests/dup-1?wait=true")
	var agg struct {
		Frames []*e2a.Response `json:"frames"`
	}
	if err := json.NewDecoder(res.Body).Decode(&agg); err != nil {
		t.Fatal(err)
	}
	if err := e2a.CheckFrames(agg.Frames); err != nil {
		t.Fatal(err)
	}
}

// pastDedupePipeline is the pipeline with alice and bob, egress's reads
// scoped as `e2a serve` scopes them (cmd/e2a egressAuthorizer), and the
// dedupe window of E2A_REQUESTS shortened to 200 ms: past it, as past the
// 10 minutes of E2A_DEDUPE_WINDOW, the stream (24 h) still holds every
// request but JetStream no longer deduplicates its id.
func pastDedupePipeline(t *testing.T) *pipeline {
	t.Helper()
	_, nc := natstest.RunServer(t)
	auth := aliceAndBob(t)
	reg := prometheus.NewRegistry()
	f := pipetest.ServeFront(t, nc, []egress.Option{egress.WithRegisterer(reg), egress.WithAuthorizer(func(r *http.Request) (tenant.Principal, error) {
		p, err := auth.Tenant(r)
		ingress.StripCredentialHeaders(r.Header)
		return p, err
	})}, ingress.WithRegisterer(reg), ingress.WithAuth(auth))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = agent.Run(ctx, nc, "demo", demo.New()) }()
	t.Cleanup(func() { cancel(); <-done })
	testkit.Eventually(t, 10*time.Second, "the demo pool's consumer", func() bool {
		m, err := f.Ingress.Pools(ctx)
		return err == nil && m["demo"] != ""
	})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Duplicates = 200 * time.Millisecond
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return &pipeline{url: f.URL, nc: nc, js: js, in: f.Ingress}
}

// awaitDedupeWindowPassed returns once every id stored in E2A_REQUESTS
// before the call is out of the dedupe window: a probe message published
// now under a message id of its own is stored again (not a duplicate).
func awaitDedupeWindowPassed(t *testing.T, p *pipeline) {
	t.Helper()
	ctx := context.Background()
	probe := &nats.Msg{Subject: "e2a.req.dedupe-probe.p-" + strconv.FormatInt(time.Now().UnixNano(), 36), Header: nats.Header{}, Data: []byte(`{}`)}
	probe.Header.Set(jetstream.MsgIDHeader, probe.Subject)
	if ack, err := p.js.PublishMsg(ctx, probe); err != nil || ack.Duplicate {
		t.Fatalf("probe: %+v %v", ack, err)
	}
	testkit.Eventually(t, 10*time.Second, "the dedupe window past", func() bool {
		ack, err := p.js.PublishMsg(ctx, probe)
		return err == nil && !ack.Duplicate
	})
}

// requestMessages counts the messages E2A_REQUESTS holds for a request id,
// in every pool.
func requestMessages(t *testing.T, p *pipeline, id string) uint64 {
	t.Helper()
	st, err := p.js.Stream(context.Background(), streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter("e2a.req.*."+id))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// TestRequestIDReusedAfterDedupeWindow: a request id is one request as
// long as E2A_REQUESTS keeps it, not only within the dedupe window. Past
// the window another principal's POST with alice's request_id is the
// conflict that reveals nothing (409), and stores nothing: the id stays
// alice's (bob's GET 404, alice's 200 with her frames). Alice's own POST
// with it again is a duplicate answered with her first request's frames,
// not a second run.
func TestRequestIDReusedAfterDedupeWindow(t *testing.T) {
	p := pastDedupePipeline(t)
	alice := []string{"X-Api-Key", testKey}
	bob := []string{"X-Api-Key", bobKey}
	resp, body := testkit.Do(t, http.MethodPost, p.url+"/v1/requests?wait=true",
		`{"request_id":"shared-id-1","params":{"text":"alice-secret-text","frames":1}}`, alice...)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "alice-secret-text") {
		t.Fatalf("alice: %d %s", resp.StatusCode, body)
	}
	awaitDedupeWindowPassed(t, p)
	resp, body = testkit.Do(t, http.MethodPost, p.url+"/v1/requests", `{"request_id":"shared-id-1","params":{"text":"bob","frames":1}}`, bob...)
	if resp.StatusCode != http.StatusConflict || strings.Contains(string(body), "alice") {
		t.Errorf("bob's POST with alice's request id: %d %s, want 409 revealing nothing", resp.StatusCode, body)
	}
	// In another pool too: the id is one request in every pool.
	resp, body = testkit.Do(t, http.MethodPost, p.url+"/v1/requests?agent=other", `{"request_id":"shared-id-1","params":{"text":"bob","frames":1}}`, bob...)
	if resp.StatusCode != http.StatusConflict || strings.Contains(string(body), "alice") {
		t.Errorf("bob's POST with alice's request id to another pool: %d %s, want 409 revealing nothing", resp.StatusCode, body)
	}
	if n := requestMessages(t, p, "shared-id-1"); n != 1 {
		t.Errorf("E2A_REQUESTS holds %d messages of the id after bob's POSTs, want 1", n)
	}
	resp, body = testkit.Do(t, http.MethodGet, p.url+"/v1/requests/shared-id-1", "", bob...)
	if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "alice-secret-text") {
		t.Errorf("bob's GET: %d %.400s, want 404", resp.StatusCode, body)
	}
	resp, body = testkit.Do(t, http.MethodGet, p.url+"/v1/requests/shared-id-1?wait=true", "", alice...)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "alice-secret-text") {
		t.Errorf("alice's GET: %d %.300s, want her request", resp.StatusCode, body)
	}
	resp, body = testkit.Do(t, http.MethodPost, p.url+"/v1/requests", `{"request_id":"shared-id-1","params":{"text":"alice-again","frames":1}}`, alice...)
	var acc ingress.AcceptedBody
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &acc) != nil || !acc.Duplicate {
		t.Errorf("alice's POST with her request id again: %d %s, want 202 duplicate", resp.StatusCode, body)
	}
	if n := requestMessages(t, p, "shared-id-1"); n != 1 {
		t.Errorf("E2A_REQUESTS holds %d messages of the id after alice's second POST, want 1", n)
	}
}

// TestRequestIDReusedWhileFramesAreStored: alice's envelope left
// E2A_REQUESTS (its max age or byte limit) while her frames are still in
// E2A_RESPONSES, stored after it. The id is not free then: bob's POST with
// it is the conflict revealing nothing and stores nothing (his GET is the
// unknown id's 404, not her frames); alice's own POST is refused too, as
// nothing names her the owner any more.
func TestRequestIDReusedWhileFramesAreStored(t *testing.T) {
	p := pastDedupePipeline(t)
	alice := []string{"X-Api-Key", testKey}
	bob := []string{"X-Api-Key", bobKey}
	resp, body := testkit.Do(t, http.MethodPost, p.url+"/v1/requests?wait=true",
		`{"request_id":"shared-id-hot","params":{"text":"alice-secret-text","frames":1}}`, alice...)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "alice-secret-text") {
		t.Fatalf("alice: %d %s", resp.StatusCode, body)
	}
	awaitDedupeWindowPassed(t, p)
	natstest.Purge(t, p.js, streams.RequestsStream) // her envelope aged out, her frames did not
	resp, body = testkit.Do(t, http.MethodPost, p.url+"/v1/requests", `{"request_id":"shared-id-hot","params":{"text":"bob","frames":1}}`, bob...)
	if resp.StatusCode != http.StatusConflict || strings.Contains(string(body), "alice") {
		t.Errorf("bob's POST with alice's request id: %d %s, want 409 revealing nothing", resp.StatusCode, body)
	}
	resp, body = testkit.Do(t, http.MethodGet, p.url+"/v1/requests/shared-id-hot", "", bob...)
	if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "alice-secret-text") {
		t.Errorf("bob's GET: %d %.400s, want 404", resp.StatusCode, body)
	}
	resp, body = testkit.Do(t, http.MethodPost, p.url+"/v1/requests", `{"request_id":"shared-id-hot","params":{"text":"alice-again","frames":1}}`, alice...)
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("alice's POST with her aged-out request id: %d %s, want 409", resp.StatusCode, body)
	}
	if n := requestMessages(t, p, "shared-id-hot"); n != 0 {
		t.Errorf("E2A_REQUESTS holds %d messages of the id after the POSTs, want 0", n)
	}
}

// TestA2ATaskIDReusedAfterDedupeWindow: the same through A2A, where an
// Idempotency-Key names a new task (its first request): past the dedupe
// window bob's message/send with alice's key is the JSON-RPC conflict
// (-32602, data.conflict) without her reply, his tasks/get of that id does
// not find her task, and hers still does.
func TestA2ATaskIDReusedAfterDedupeWindow(t *testing.T) {
	p := pastDedupePipeline(t)
	send := func(key, idem, text string) (int, string) {
		resp, body := testkit.Do(t, http.MethodPost, p.url+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{
			"kind":"message","role":"user","messageId":"m-`+text+`","parts":[{"kind":"text","text":"`+text+`"}],"metadata":{"frames":1}}}}`,
			"X-Api-Key", key, "Idempotency-Key", idem)
		return resp.StatusCode, string(body)
	}
	get := func(key string) string {
		_, body := testkit.Do(t, http.MethodPost, p.url+"/a2a", `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"task-key-1"}}`, "X-Api-Key", key)
		return string(body)
	}
	if code, body := send(testKey, "task-key-1", "alice-secret-text"); code != 200 || !strings.Contains(body, "alice-secret-text") {
		t.Fatalf("alice: %d %s", code, body)
	}
	awaitDedupeWindowPassed(t, p)
	code, body := send(bobKey, "task-key-1", "bobtext")
	if !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, `"conflict":true`) || strings.Contains(body, "alice") {
		t.Errorf("bob's send with alice's key: %d %.600s, want the conflict revealing nothing", code, body)
	}
	if n := requestMessages(t, p, "task-key-1"); n != 1 {
		t.Errorf("E2A_REQUESTS holds %d messages of the id after bob's send, want 1", n)
	}
	if b := get(bobKey); strings.Contains(b, "alice-secret-text") || !strings.Contains(b, `"code":-32001`) {
		t.Errorf("bob's tasks/get of alice's task: %.600s, want task not found", b)
	}
	if b := get(testKey); !strings.Contains(b, "alice-secret-text") {
		t.Errorf("alice's tasks/get lost her task: %.300s", b)
	}
}

// TestGeneratedRequestIDNotLookedUp: a new request costs no read of
// E2A_REQUESTS, whether the pipeline made its id or the client chose one
// no pool holds: the publish itself expects no message on e2a.req.*.<id>.
func TestGeneratedRequestIDNotLookedUp(t *testing.T) {
	p := pastDedupePipeline(t)
	gets := make(chan *nats.Msg, 64)
	sub, err := p.nc.ChanSubscribe("$JS.API.DIRECT.GET."+streams.RequestsStream+".>", gets)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	sub2, err := p.nc.ChanSubscribe("$JS.API.DIRECT.GET."+streams.RequestsStream, gets)
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Unsubscribe()
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// count posts body and counts the direct gets of E2A_REQUESTS naming
	// the request's id until its answer.
	count := func(body string, hdr ...string) int {
		t.Helper()
		resp, b := testkit.Do(t, http.MethodPost, p.url+"/v1/requests", body, append([]string{"X-Api-Key", testKey}, hdr...)...)
		var acc ingress.AcceptedBody
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal(b, &acc) != nil || acc.RequestID == "" {
			t.Fatalf("POST %s: %d %s", body, resp.StatusCode, b)
		}
		if err := p.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			select {
			case m := <-gets:
				if strings.Contains(string(m.Data), acc.RequestID) {
					n++
				}
			default:
				return n
			}
		}
	}
	if n := count(`{"params":{"text":"x","frames":1}}`); n != 0 {
		t.Errorf("a generated request id: %d direct gets of %s, want none", n, streams.RequestsStream)
	}
	// A chosen id unused anywhere costs no read either: the server checks
	// that no pool holds it as it stores the request.
	if n := count(`{"request_id":"chosen-1","params":{"text":"x","frames":1}}`); n != 0 {
		t.Errorf("a request_id the client chose: %d direct gets, want none", n)
	}
	if n := count(`{"params":{"text":"x","frames":1}}`, "Idempotency-Key", "chosen-2"); n != 0 {
		t.Errorf("an Idempotency-Key: %d direct gets, want none", n)
	}
}

func TestE2EBadInputPublishesNothing(t *testing.T) {
	p := startPipeline(t)
	cases := []struct {
		name, path, body string
		code             int
	}{
		{"malformed", "/v1/requests", `{"params":`, 400},
		{"not an object", "/v1/requests", `[1,2]`, 400},
		{"params not object", "/v1/requests", `{"params":"x"}`, 400},
		{"bad agent", "/v1/requests?agent=a.b", `{"params":{}}`, 400},
		{"too large", "/v1/requests", `{"params":{"text":"` + strings.Repeat("x", 70<<10) + `"}}`, 413},
	}
	for _, tc := range cases {
		resp := p.post(t, tc.path, "", tc.body)
		if resp.StatusCode != tc.code {
			t.Fatalf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.code)
		}
		var eb ingress.ErrorBody
		if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
			t.Fatalf("%s: error body %+v (%v)", tc.name, eb, err)
		}
	}
	s, err := p.js.Stream(context.Background(), streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.State.Msgs != 0 {
		t.Fatalf("bad input published %d messages", st.State.Msgs)
	}
	if r := p.get(t, "/v1/requests/nope"); r.StatusCode != 404 {
		t.Fatalf("unknown request: %d", r.StatusCode)
	}
}

func jsonDecode(r *http.Response, v any) error { return json.NewDecoder(r.Body).Decode(v) }

// A call that publishes and streams subscribes to the frames before the
// publish: the stream of a new request opens without reading
// E2A_RESPONSES (E2A SSE, A2A message/stream, a blocking message/send, A2A
// v1.0 SendStreamingMessage, ACP session/prompt in NDJSON and SSE), and a
// duplicate of a finished request still reads every frame from it. An id
// the client chose costs one direct get before the publish, the check
// that no frames of it are stored (TestRequestIDReusedWhileFramesAreStored);
// the pipeline's own ids none.
func TestE2EStreamOfNewRequestReadsNoStoredFrame(t *testing.T) {
	p := startPipeline(t)
	gets := natstest.DirectGets(t, p.nc, streams.ResponsesStream)
	frames := framesOf(t, readSSE(t, p.post(t, "/v1/requests", "text/event-stream", `{"request_id":"pre-1","params":{"text":"hi","frames":3}}`).Body))
	if err := e2a.CheckFrames(frames); err != nil || !frames[len(frames)-1].IsFinal {
		t.Fatalf("E2A SSE: %d frames, %v", len(frames), err)
	}
	if got := gets.Subjects(t); len(got) != 1 {
		t.Fatalf("a new request of a chosen id: %d direct gets on %s, want 1 (its frames check): %v", len(got), streams.ResponsesStream, got)
	}
	if fresh := framesOf(t, readSSE(t, p.post(t, "/v1/requests", "text/event-stream", `{"params":{"text":"hi","frames":3}}`).Body)); len(fresh) != len(frames) {
		t.Fatalf("E2A SSE without a request_id: %d frames", len(fresh))
	}
	a2a := func(method, id string) []sseEvent {
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"message":{"role":"user","messageId":"` + id +
			`","parts":[{"kind":"text","text":"hi"}]}}}`
		return readSSE(t, p.post(t, "/a2a", "text/event-stream", body).Body)
	}
	if evs := a2a("message/stream", "m-1"); len(evs) < 2 || !bytes.Contains(evs[len(evs)-1].data, []byte(`"final":true`)) {
		t.Fatalf("message/stream: %d events, last %s", len(evs), evs[len(evs)-1].data)
	}
	send := p.post(t, "/a2a", "", `{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"role":"user","messageId":"m-2","parts":[{"kind":"text","text":"hi"}]}}}`)
	var res struct {
		Result struct {
			Status struct{ State string } `json:"status"`
		} `json:"result"`
	}
	if err := jsonDecode(send, &res); err != nil || res.Result.Status.State != "completed" {
		t.Fatalf("message/send: %+v %v", res, err)
	}
	v1, err := http.NewRequest("POST", p.url+"/a2a/v1", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"SendStreamingMessage",`+
		`"params":{"message":{"role":"ROLE_USER","parts":[{"text":"hi"}],"messageId":"m-3"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	v1.Header.Set("A2A-Version", "1.0")
	v1.Header.Set("Accept", "text/event-stream")
	v1resp, err := http.DefaultClient.Do(v1)
	if err != nil {
		t.Fatal(err)
	}
	defer v1resp.Body.Close()
	if evs := readSSE(t, v1resp.Body); len(evs) < 2 || !bytes.Contains(evs[len(evs)-1].data, []byte("TASK_STATE_COMPLETED")) {
		t.Fatalf("SendStreamingMessage: %d events", len(evs))
	}
	for _, accept := range []string{"", "text/event-stream"} {
		// A session each: a session's second prompt runs after its first,
		// which the agent runtime reads (agent/turns.go).
		sid := p.acpSession(t)
		prompt := p.post(t, "/acp", accept, `{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"hi"}]}}`)
		var msgs []rpcMsg
		if accept == "" {
			msgs = ndjsonMsgs(t, prompt.Body)
		} else {
			for _, ev := range readSSE(t, prompt.Body) {
				msgs = append(msgs, decodeMsg(t, ev.data))
			}
		}
		checkTurn(t, msgs, sid, `"p"`, "hi", "end_turn")
	}
	if n := gets.Count(t); n != 0 {
		t.Fatalf("%d direct gets on %s for new requests: %v", n, streams.ResponsesStream, gets.Subjects(t))
	}
	again := framesOf(t, readSSE(t, p.post(t, "/v1/requests", "text/event-stream", `{"request_id":"pre-1","params":{"text":"hi","frames":3}}`).Body))
	if len(again) != len(frames) {
		t.Fatalf("duplicate: %d frames, the original %d", len(again), len(frames))
	}
	if n := gets.Count(t); n == 0 {
		t.Fatal("a duplicate's stream did not read the stored frames")
	}
}
