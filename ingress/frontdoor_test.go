package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

const testKey = "ak_alice_0123456789abcdef"

// frontDoor is an ingress+egress HTTP server (no agent) on nc with opts.
func frontDoor(t *testing.T, nc *nats.Conn, opts ...ingress.Option) string {
	t.Helper()
	return pipetest.ServeFront(t, nc, []egress.Option{egress.WithRegisterer(prometheus.NewRegistry())},
		append([]ingress.Option{ingress.WithRegisterer(prometheus.NewRegistry())}, opts...)...).URL
}

func withAPIKey(t *testing.T) ingress.Option {
	t.Helper()
	a, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{{Principal: "alice", Secret: testKey}}})
	if err != nil {
		t.Fatal(err)
	}
	return ingress.WithAuth(a)
}

func do(t *testing.T, method, url, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return testkit.Do(t, method, url, body, hdr...)
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// Every endpoint refuses a missing or wrong credential in its own shape,
// and nothing is published.
func TestAuthEveryEndpoint(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js, _ := jetstream.New(nc)
	url := frontDoor(t, nc, withAPIKey(t))
	cases := []struct {
		name, path, body string
		check            func(t *testing.T, b []byte)
	}{
		{"e2a", "/v1/requests", `{"params":{"text":"x"}}`, func(t *testing.T, b []byte) {
			var eb ingress.ErrorBody
			if json.Unmarshal(b, &eb) != nil || eb.Error.Code != "unauthenticated" {
				t.Fatalf("body %s", b)
			}
		}},
		{"a2a", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m","parts":[{"kind":"text","text":"x"}]}}}`, func(t *testing.T, b []byte) {
			var r struct{ Error *ingress.Error }
			if json.Unmarshal(b, &r) != nil || r.Error == nil {
				t.Fatalf("body %s", b)
			}
		}},
		{"acp", "/acp", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`, func(t *testing.T, b []byte) {
			var r struct{ Error *ingress.Error }
			if json.Unmarshal(b, &r) != nil || r.Error == nil {
				t.Fatalf("body %s", b)
			}
		}},
		{"a2e", "/a2e", `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r"}`, func(t *testing.T, b []byte) {
			var m a2e.Message
			if json.Unmarshal(b, &m) != nil || m.Type != "error" || m.Code != "unauthenticated" {
				t.Fatalf("body %s", b)
			}
		}},
	}
	for _, tc := range cases {
		for _, hdr := range [][]string{nil, {"X-Api-Key", "wrong-key-0123456789"}, {"Authorization", "Bearer " + testKey}} {
			resp, b := do(t, "POST", url+tc.path, tc.body, hdr...)
			if resp.StatusCode != 401 {
				t.Fatalf("%s %v: status %d %s", tc.name, hdr, resp.StatusCode, b)
			}
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatalf("%s: no WWW-Authenticate", tc.name)
			}
			if strings.Contains(string(b), testKey) || strings.Contains(string(b), "wrong-key") {
				t.Fatalf("%s: credential echoed: %s", tc.name, b)
			}
			tc.check(t, b)
		}
	}
	if n := streamMsgs(t, js, streams.RequestsStream); n != 0 {
		t.Fatalf("unauthenticated requests published %d messages", n)
	}
	// The right key passes; the principal goes into the envelope, the key
	// nowhere.
	resp, b := do(t, "POST", url+"/v1/requests", `{"request_id":"auth-1","user_id":"mallory","params":{"text":"x"}}`, "X-Api-Key", testKey)
	if resp.StatusCode != 202 {
		t.Fatalf("authenticated: %d %s", resp.StatusCode, b)
	}
	subj, _ := subjects.Request("demo", "auth-1")
	msg, err := streams.LastBySubject(context.Background(), nc, streams.RequestsStream, subj)
	if err != nil {
		t.Fatal(err)
	}
	env, err := e2a.FromJSON(msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if env.UserID != "alice" {
		t.Fatalf("user_id %q: the authenticated principal must win", env.UserID)
	}
	if strings.Contains(string(msg.Data), testKey) || strings.Contains(strings.Join(msg.Header.Values("X-Api-Key"), ""), testKey) {
		t.Fatal("the credential was published")
	}
}

// JSON-RPC 2.0 exactly on /a2a.
func TestA2AJSONRPCErrors(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js, _ := jetstream.New(nc)
	url := frontDoor(t, nc)
	type rpcResp struct {
		ID    json.RawMessage `json:"id"`
		Error *ingress.Error  `json:"error"`
	}
	for _, tc := range []struct {
		body string
		code int
		id   string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":`, -32700, "null"},
		{`{"jsonrpc":"1.0","id":1,"method":"message/send"}`, -32600, "1"},
		{`{"jsonrpc":"2.0","id":"x","method":"no/such"}`, -32601, `"x"`},
		{`{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"parts":[]}}}`, -32602, "2"},
		{`[]`, -32600, "null"},
	} {
		resp, b := do(t, "POST", url+"/a2a", tc.body)
		var r rpcResp
		if err := json.Unmarshal(b, &r); err != nil || r.Error == nil {
			t.Fatalf("%s: %d %s", tc.body, resp.StatusCode, b)
		}
		if r.Error.Code != tc.code || string(r.ID) != tc.id {
			t.Fatalf("%s: code %d id %s, want %d %s", tc.body, r.Error.Code, r.ID, tc.code, tc.id)
		}
	}
	// An id-less call that succeeds gets no reply (but is acted on); one
	// that fails gets its JSON-RPC error with id null (A2A defines no
	// notifications, and the A2A TCK expects the error).
	resp, b := do(t, "POST", url+"/a2a", `{"jsonrpc":"2.0","method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"n"}]}}}`)
	if resp.StatusCode != 204 || len(b) != 0 {
		t.Fatalf("id-less call: %d %q", resp.StatusCode, b)
	}
	for body, code := range map[string]string{
		`{"jsonrpc":"2.0","method":"no/such"}`:                                        `"code":-32601`,
		`{"jsonrpc":"2.0","method":"message/send","params":{"message":{"parts":[]}}}`: `"code":-32602`,
	} {
		resp, b := do(t, "POST", url+"/a2a", body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"id":null`) || !strings.Contains(string(b), code) {
			t.Fatalf("id-less %s: %d %q", body, resp.StatusCode, b)
		}
	}
	// A batch is answered element by element; a streaming method inside it
	// is refused alone.
	resp, b = do(t, "POST", url+"/a2a", `[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"nope"}},
		{"jsonrpc":"2.0","id":2,"method":"message/stream","params":{}},
		{"jsonrpc":"2.0","method":"no/such"}, 7]`)
	var batch []rpcResp
	if err := json.Unmarshal(b, &batch); err != nil || len(batch) != 3 {
		t.Fatalf("batch: %d %s", resp.StatusCode, b)
	}
	if batch[0].Error == nil || batch[0].Error.Code != -32001 || batch[1].Error == nil || batch[1].Error.Code != -32600 || batch[2].Error == nil || batch[2].Error.Code != -32600 {
		t.Fatalf("batch answers %s", b)
	}
	if n := streamMsgs(t, js, streams.RequestsStream); n != 1 {
		t.Fatalf("published %d requests, want 1 (the notification)", n)
	}
}

// A full requests stream (DiscardNew) is backpressure: 503 with
// Retry-After in each protocol's shape, nothing half-accepted.
func TestBackpressure(t *testing.T) {
	cfg := natstest.Config()
	cfg.RequestsMaxBytes = 4 << 10
	_, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	js, _ := jetstream.New(nc)
	url := frontDoor(t, nc)
	big := strings.Repeat("x", 1500)
	accepted := 0
	var last *http.Response
	var lastBody []byte
	for i := 0; i < 10; i++ {
		last, lastBody = do(t, "POST", url+"/v1/requests", `{"params":{"text":"`+big+`"}}`)
		if last.StatusCode == 202 {
			accepted++
			continue
		}
		break
	}
	if last.StatusCode != 503 || last.Header.Get("Retry-After") == "" {
		t.Fatalf("full stream: %d %s", last.StatusCode, lastBody)
	}
	var eb ingress.ErrorBody
	if json.Unmarshal(lastBody, &eb) != nil || !eb.Error.Retryable {
		t.Fatalf("body %s", lastBody)
	}
	if n := streamMsgs(t, js, streams.RequestsStream); n != uint64(accepted) {
		t.Fatalf("stream holds %d, %d were accepted", n, accepted)
	}
	resp, b := do(t, "POST", url+"/a2a", `{"jsonrpc":"2.0","id":9,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"`+big+`"}]}}}`)
	var r struct{ Error *ingress.Error }
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || json.Unmarshal(b, &r) != nil || r.Error == nil {
		t.Fatalf("a2a full stream: %d %s", resp.StatusCode, b)
	}
}

// Two ingress replicas on separate connections share one principal's limit
// through the KV bucket. Their clock is one fixed time, mid-minute: on the
// wall clock the ten requests could straddle a minute's end (the windows
// are fixed, aligned on the epoch), and the next minute's window took what
// the first refused (CI: 9 accepted, 1 limited).
func TestRateLimitSharedByReplicas(t *testing.T) {
	clock := testkit.MidMinute()
	srv, nc1 := natstest.RunServer(t)
	nc2, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	var urls []string
	for _, nc := range []*nats.Conn{nc1, nc2} {
		js, _ := jetstream.New(nc)
		kv, err := js.KeyValue(context.Background(), streams.RateLimitBucket)
		if err != nil {
			t.Fatal(err)
		}
		lim := ingress.NewLimiter(kv, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 5}}, ingress.WithLimiterClock(clock))
		urls = append(urls, frontDoor(t, nc, withAPIKey(t), ingress.WithLimiter(lim)))
	}
	ok, limited := 0, 0
	for i := 0; i < 10; i++ {
		resp, b := do(t, "POST", urls[i%2]+"/v1/requests", `{"params":{"text":"x"}}`, "X-Api-Key", testKey)
		switch resp.StatusCode {
		case 202:
			ok++
			if resp.Header.Get("X-RateLimit-Limit") != "5" {
				t.Fatalf("headers %v", resp.Header)
			}
		case 429:
			limited++
			if resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-RateLimit-Remaining") != "0" {
				t.Fatalf("429 headers %v %s", resp.Header, b)
			}
		default:
			t.Fatalf("status %d %s", resp.StatusCode, b)
		}
	}
	if ok != 5 || limited != 5 {
		t.Fatalf("%d accepted, %d limited across two replicas; want 5 and 5", ok, limited)
	}
}

// Idempotency-Key names the request when the body has no request_id: the
// same key twice is one request.
func TestIdempotencyKey(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js, _ := jetstream.New(nc)
	url := frontDoor(t, nc)
	var ids []string
	for i := 0; i < 2; i++ {
		resp, b := do(t, "POST", url+"/v1/requests", `{"params":{"text":"x"}}`, "Idempotency-Key", "order-7781")
		if resp.StatusCode != 202 {
			t.Fatalf("status %d %s", resp.StatusCode, b)
		}
		var acc ingress.AcceptedBody
		if err := json.Unmarshal(b, &acc); err != nil {
			t.Fatal(err)
		}
		if acc.Duplicate != (i == 1) {
			t.Fatalf("answer %d: duplicate=%v", i, acc.Duplicate)
		}
		ids = append(ids, acc.RequestID)
	}
	if ids[0] != ids[1] || ids[0] != "order-7781" {
		t.Fatalf("ids %v", ids)
	}
	if n := streamMsgs(t, js, streams.RequestsStream); n != 1 {
		t.Fatalf("%d requests stored, want 1", n)
	}
}

// A principal's concurrent streams are bounded; the request itself is
// accepted and can be read later.
func TestStreamLimit(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc, ingress.WithStreamLimiter(ingress.NewStreamLimiter(1)))
	// No agent answers, so the first stream stays open.
	req, _ := http.NewRequest("POST", url+"/v1/requests", strings.NewReader(`{"request_id":"s-1","params":{}}`))
	req.Header.Set("Accept", "text/event-stream")
	first, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	if first.StatusCode != 200 {
		t.Fatalf("first stream: %d", first.StatusCode)
	}
	resp, b := do(t, "POST", url+"/v1/requests", `{"request_id":"s-2","params":{}}`, "Accept", "text/event-stream")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), `"too_many_streams"`) {
		t.Fatalf("second stream: %d %s", resp.StatusCode, b)
	}
	// An A2E answer is a stream too: the same bound, in A2E's error shape.
	resp, b = do(t, "POST", url+"/a2e", `{"a2e":"1.0","id":"p1","type":"ping"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), `"code":"too_many_streams"`) {
		t.Fatalf("A2E stream: %d %s", resp.StatusCode, b)
	}
}

// TestRateLimitChargesBatchElements: a JSON-RPC batch is charged per
// element, so it cannot multiply the limit; a batch over the limit is
// refused whole and charged as one request.
func TestRateLimitChargesBatchElements(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(context.Background(), streams.RateLimitBucket)
	if err != nil {
		t.Fatal(err)
	}
	url := frontDoor(t, nc, withAPIKey(t), ingress.WithLimiter(ingress.NewLimiter(kv, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 3}}, ingress.WithLimiterClock(testkit.MidMinute()))))
	var batch []string
	for i := 0; i < 10; i++ {
		batch = append(batch, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"x"}]}}}`)
	}
	resp, b := do(t, "POST", url+"/a2a", "["+strings.Join(batch, ",")+"]", "X-Api-Key", testKey)
	if resp.StatusCode != 429 {
		t.Fatalf("batch of 10 under a limit of 3: %d %s", resp.StatusCode, b)
	}
	if n := streamMsgs(t, js, streams.RequestsStream); n != 0 {
		t.Fatalf("a refused batch published %d requests", n)
	}
	// Refused, it costs one request (its HTTP request, as the gate charges
	// before it reads the body), not the elements that fitted before the
	// limit: they ran nothing. It cost 3, leaving the client nothing.
	resp, b = do(t, "POST", url+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"none"}}`, "X-Api-Key", testKey)
	if resp.StatusCode == 429 || resp.Header.Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("a single call after the refused batch: %d, X-RateLimit-Remaining %q, want 1 (3 a minute, the refused batch charged 1) %s",
			resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), b)
	}
}

// TestA2AAuthRefusalEchoesIDShapes: an authentication refusal on /a2a answers the
// request's id when it is readable (null otherwise), on both generations'
// JSON-RPC endpoints.
func TestA2AAuthRefusalEchoesIDShapes(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc, withAPIKey(t))
	for _, tc := range []struct{ path, body, id string }{
		{"/a2a", `{"jsonrpc":"2.0","id":42,"method":"message/send","params":{}}`, `"id":42`},
		{"/a2a", `{"jsonrpc":"2.0","id":"req-7","method":"tasks/get","params":{"id":"x"}}`, `"id":"req-7"`},
		{"/a2a", `{"jsonrpc":"2.0","id":{"bad":1},"method":"tasks/get"}`, `"id":null`},
		{"/a2a", `not json`, `"id":null`},
	} {
		resp, b := do(t, "POST", url+tc.path, tc.body)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), tc.id) || !strings.Contains(string(b), `"error"`) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, resp.StatusCode, b)
		}
	}
}

// TestA2AStreamingErrorsAsSSE: a streaming method's error (an unknown task
// to resubscribe to, bad params) is answered as the event stream the client
// asked for, whose event carries the JSON-RPC error.
func TestA2AStreamingErrorsAsSSE(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc)
	for body, code := range map[string]string{
		`{"jsonrpc":"2.0","id":5,"method":"tasks/resubscribe","params":{"id":"no-such-task"}}`:                                                                                                               `"code":-32001`,
		`{"jsonrpc":"2.0","id":6,"method":"message/stream","params":{"message":{"parts":[]}}}`:                                                                                                               `"code":-32602`,
		`{"jsonrpc":"2.0","id":7,"method":"tasks/sendSubscribe","params":{"id":"no-such-task"}}`:                                                                                                             `"error"`,
		`{"jsonrpc":"2.0","id":8,"method":"message/stream","params":{"configuration":{"historyLength":-1},"message":{"kind":"message","role":"user","messageId":"m","parts":[{"kind":"text","text":"x"}]}}}`: `"code":-32602`,
	} {
		resp, b := do(t, "POST", url+"/a2a", body, "Accept", "text/event-stream")
		ev := testkit.Events(testkit.MustReadSSE(t, bytes.NewReader(b)))
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || len(ev) != 1 || !strings.Contains(ev[0].Data, code) {
			t.Errorf("%s: %d %s %q", body, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
}

// TestE2AMalformedResumePointPublishesNothing: POST /v1/requests
// answers 400 to a malformed resume point (Last-Event-ID, ?from=) of a
// streamed or awaited answer, and "nothing is published on any of" its
// refusals (protocols/e2a NewHandler; docs/protocols.md: 400 malformed):
// the front door reads the resume point (egress.ResumePoint) before the
// publish. Were it read by egress only after it, the client would be told
// 400 bad_request, not retryable, with no request id, while the request is
// stored and an agent runs it, and its corrected retry would run it again.
func TestE2AMalformedResumePointPublishesNothing(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js, _ := jetstream.New(nc)
	url := frontDoor(t, nc)
	for _, tc := range []struct {
		what, query string
		hdr         []string
	}{
		{"SSE, Last-Event-ID: abc", "", []string{"Accept", "text/event-stream", "Last-Event-ID", "abc"}},
		{"NDJSON, ?from=-1", "?from=-1", []string{"Accept", "application/x-ndjson"}},
		{"?wait=true&from=x", "?wait=true&from=x", nil},
	} {
		before := streamMsgs(t, js, streams.RequestsStream)
		resp, b := do(t, "POST", url+"/v1/requests"+tc.query, `{"params":{"text":"transfer 100 EUR"}}`, tc.hdr...)
		after := streamMsgs(t, js, streams.RequestsStream)
		if resp.StatusCode == http.StatusBadRequest && after != before {
			t.Errorf("POST /v1/requests (%s): 400 %s, yet %d request(s) published to E2A_REQUESTS; "+
				"want nothing published on a 400 (or the request accepted and answered as such)", tc.what, bytes.TrimSpace(b), after-before)
		}
	}
}
