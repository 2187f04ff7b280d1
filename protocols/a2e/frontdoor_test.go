package a2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// fakeHost is the kit's fake pipeline: it admits (or refuses) every
// request, accepts (or fails) every publish, and answers an accepted
// request by starting and ending its renderer with no frame.
type fakeHost = conformance.Host

func post(t *testing.T, h host.Host, body string) (*httptest.ResponseRecorder, []a2e.Message) {
	t.Helper()
	return postKeyed(t, h, "", body)
}

// The front door over a host: local replies, a request published and
// answered through the host, shutdown ends the answer.
func TestFrontDoorOverHost(t *testing.T) {
	h := &fakeHost{}
	rec, msgs := post(t, h, `{"a2e":"1.0","id":"h1","type":"handshake/req"}
{"a2e":"1.0","id":"p1","type":"ping"}
{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}
{"a2e":"1.0","id":"s1","type":"shutdown"}
{"a2e":"1.0","id":"p2","type":"ping"}
`)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if len(msgs) != 2 || msgs[0].Type != "handshake/resp" || msgs[0].ReqID != "h1" || msgs[1].Type != "pong" || msgs[1].ReqID != "p1" {
		t.Fatalf("%+v", msgs)
	}
	if res, _ := msgs[0].Result.(map[string]any); res["version"] != "test" {
		t.Errorf("handshake %v", msgs[0].Result)
	}
	pub, served := h.Published(), h.Served()
	if len(pub) != 1 || h.Pools()[0]+" "+pub[0].Method != "echo tool/call/req" || len(served) != 1 || !strings.HasSuffix(served[0], " "+a2e.Format) {
		t.Errorf("published %v served %v", pub, served)
	}
}

// Refusals and publish errors in A2E's shape.
func TestFrontDoorErrors(t *testing.T) {
	rec, msgs := post(t, &fakeHost{Refusal: &host.Refusal{Status: 429, Code: "rate_limit_exceeded", Message: "slow down", Retryable: true}}, `{"a2e":"1.0","id":"p1","type":"ping"}`)
	if rec.Code != 429 || len(msgs) != 1 || msgs[0].Code != "rate_limit_exceeded" || !*msgs[0].Retryable || msgs[0].Detail["http_status"] != float64(429) {
		t.Errorf("refusal: %d %+v", rec.Code, msgs)
	}
	for err, code := range map[error]string{
		fmt.Errorf("%w: %q", host.ErrUnknownPool, "echo"): "unknown_agent",
		host.ErrConflict:     "conflict",
		host.ErrTooLarge:     "body_too_large",
		host.ErrBackpressure: "unavailable",
	} {
		_, msgs := post(t, &fakeHost{PublishErr: err}, `{"a2e":"1.0","id":"c1","type":"tool/call/req"}`)
		if len(msgs) != 1 || msgs[0].Type != a2e.ErrorType || msgs[0].Code != code || msgs[0].ReqID != "c1" {
			t.Errorf("%v: %+v", err, msgs)
		}
	}
	rec, msgs = post(t, &fakeHost{}, "{\"a2e\":\"1.0\",\"id\":\"\xff\"}")
	if rec.Code != 400 || len(msgs) != 1 || msgs[0].Code != normalizer.A2ECodeParseError {
		t.Errorf("bad UTF-8: %d %+v", rec.Code, msgs)
	}
}

// A POST /a2e answer is one stream: it holds one of the caller's stream
// slots while it runs, and is refused (429, an error line, nothing
// published) when the caller has none left.
func TestFrontDoorStreamSlot(t *testing.T) {
	h := &fakeHost{}
	held := -1
	h.OnServe = func(string, string) { held = h.Slots() }
	post(t, h, `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}`+"\n")
	if held != 1 || h.Slots() != 0 {
		t.Fatalf("slots while answering %d, after %d; want 1 then 0", held, h.Slots())
	}
	h = &fakeHost{NoSlot: true}
	rec, msgs := post(t, h, `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}`+"\n")
	if rec.Code != http.StatusTooManyRequests || len(msgs) != 1 || msgs[0].Type != "error" || len(h.Published()) != 0 {
		t.Fatalf("no slot left: %d %+v published %v", rec.Code, msgs, h.Published())
	}
	if m := msgs[0]; m.Code != "too_many_streams" || m.Retryable == nil || !*m.Retryable {
		t.Errorf("error line %+v", m)
	}
}

// postKeyed posts body with an Idempotency-Key.
// postKeyed posts body with the Idempotency-Key key (none when "") and
// returns the answer and its messages.
func postKeyed(t *testing.T, h host.Host, key, body string) (*httptest.ResponseRecorder, []a2e.Message) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, a2e.Path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	a2e.NewHandler(h).ServeHTTP(rec, req)
	lines, err := conformance.NDJSONLines(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var out []a2e.Message
	for _, l := range lines {
		var m a2e.Message
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return rec, out
}

// An Idempotency-Key is the id of one request: a body that would submit
// two requests under it (the second a duplicate of the first, answered
// with the first's frames) is refused whole, nothing published; one
// request among local messages, or two without the key, run.
func TestFrontDoorIdempotencyKeyOneRequest(t *testing.T) {
	const two = `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1","name":"add","args":{"a":1}}
{"a2e":"1.0","id":"c2","type":"tool/call/req","req_id":"r-2","name":"delete_everything"}
`
	h := &fakeHost{}
	rec, msgs := postKeyed(t, h, "k-1", two)
	if rec.Code != http.StatusBadRequest || len(msgs) != 1 || msgs[0].Type != "error" || msgs[0].Code != normalizer.A2ECodeInvalidRequest ||
		msgs[0].Retryable == nil || *msgs[0].Retryable || !strings.Contains(msgs[0].Message, "Idempotency-Key") {
		t.Fatalf("two requests under one key: %d %s", rec.Code, rec.Body)
	}
	if pub := h.Published(); len(pub) != 0 {
		t.Fatalf("published %d under a refused key", len(pub))
	}

	// Local messages, a malformed line and what follows shutdown submit
	// nothing: one request under the key runs, with the key as its id.
	h = &fakeHost{}
	rec, msgs = postKeyed(t, h, "k-2", `{"a2e":"1.0","id":"h1","type":"handshake/req"}
{"a2e":"1.0","id":"p1","type":"ping"}
{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}
{not json
{"a2e":"1.0","id":"s1","type":"shutdown"}
{"a2e":"1.0","id":"c2","type":"tool/call/req","req_id":"r-2"}
`)
	pub := h.Published()
	if rec.Code != http.StatusOK || len(pub) != 1 || pub[0].RequestID != "k-2" {
		t.Fatalf("one request under a key: %d published %d %s", rec.Code, len(pub), rec.Body)
	}
	if len(msgs) != 3 || msgs[0].Type != "handshake/resp" || msgs[1].Type != "pong" || msgs[2].Type != "error" || msgs[2].Code != normalizer.A2ECodeParseError {
		t.Fatalf("%+v", msgs)
	}

	// Without the key every message gets its own request id.
	h = &fakeHost{}
	rec, _ = post(t, h, two)
	pub = h.Published()
	if rec.Code != http.StatusOK || len(pub) != 2 || pub[0].RequestID == pub[1].RequestID {
		t.Fatalf("without a key: %d %+v", rec.Code, pub)
	}
}

// A final frame that carries content is an invoke/event and the response
// (or the error): each has its own id (A2EMessage.id is generated per
// message, a2e-message-protocol.md), the event the frame's, the response
// one derived from it, the same each time the frame is rendered.
// TestFrontDoorChargesEachRequest: the gate charges a body once; each
// further message that submits work is charged too (a body of up to
// MaxLines requests counted once let a principal multiply its rate limit),
// and a charge refused ends the body with the refusal as its error line.
func TestFrontDoorChargesEachRequest(t *testing.T) {
	const three = `{"a2e":"1.0","id":"h1","type":"handshake/req"}
{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}
{"a2e":"1.0","id":"c2","type":"tool/call/req","req_id":"r-2"}
{"a2e":"1.0","id":"c3","type":"tool/call/req","req_id":"r-3"}
`
	h := &fakeHost{}
	if rec, _ := post(t, h, three); rec.Code != http.StatusOK || len(h.Published()) != 3 || h.Charged() != 2 {
		t.Fatalf("three requests: %d, published %d, charged %d beyond the gate's one, want 3 and 2", rec.Code, len(h.Published()), h.Charged())
	}
	h = &fakeHost{ChargeLimit: 1}
	rec, msgs := post(t, h, three)
	if pub := h.Published(); len(pub) != 2 {
		t.Fatalf("over the limit: published %d, want 2 (%s)", len(pub), rec.Body)
	}
	last := msgs[len(msgs)-1]
	if last.Type != "error" || last.Code != "rate_limited" || last.Retryable == nil || !*last.Retryable || last.ReqID != "r-3" {
		t.Fatalf("over the limit, last line %+v, want the rate_limited error of r-3", last)
	}
}

func TestFinalFrameMessageIDs(t *testing.T) {
	for _, c := range []struct {
		name     string
		status   string
		body     string
		lastType string
	}{
		{"succeeded", e2a.StatusSucceeded, `{"delta_kind":"text","delta":"Hello"}`, "tool/call/resp"},
		{"failed", e2a.StatusFailed, `{"delta_kind":"text","delta":"partial"}`, a2e.ErrorType},
	} {
		f := &e2a.Response{ProtocolVersion: "1.0", ResponseID: "11111111-2222-3333-4444-555555555555", RequestID: "req-1",
			Sequence: 0, IsFinal: true, Status: c.status, ResponseKind: e2a.KindChunk,
			Timestamp: "2026-03-29T12:00:00+00:00", Provenance: e2a.Provenance{SourceProtocol: "e2a"},
			Body: json.RawMessage(c.body)}
		var ids [2][]string
		for run := range ids {
			h := &fakeHost{FramesFor: func(string) []*e2a.Response { return []*e2a.Response{f} }}
			_, msgs := post(t, h, `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}`)
			if len(msgs) != 2 || msgs[0].Type != a2e.EventType || msgs[1].Type != c.lastType {
				t.Fatalf("%s: %+v", c.name, msgs)
			}
			for _, m := range msgs {
				ids[run] = append(ids[run], m.ID)
			}
		}
		if ids[0][0] != "11111111222233334444555555555555" {
			t.Errorf("%s: event id %s, want the frame's", c.name, ids[0][0])
		}
		if ids[0][1] == ids[0][0] || len(ids[0][1]) != 32 || strings.Trim(ids[0][1], "0123456789abcdef") != "" {
			t.Errorf("%s: final message id %q: not its own UUID hex (event %q)", c.name, ids[0][1], ids[0][0])
		}
		if ids[0][1] != ids[1][1] {
			t.Errorf("%s: final message id not deterministic: %s, %s", c.name, ids[0][1], ids[1][1])
		}
	}
}

// TestFrontDoorBodyOverLimit: a body over the host's limit is refused 413
// body_too_large, not retryable, nothing published, as the door's other
// 413s (a message over max_payload, a workflow too large) and E2A's; it
// was invalid_request. A body that cannot be read (the client's
// connection broke) is a 400 read_error, retryable: it was answered 413
// "body exceeds", whatever its size.
func TestFrontDoorBodyOverLimit(t *testing.T) {
	h := &fakeHost{BodyLimit: 64}
	rec, msgs := post(t, h, `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1","text":"`+strings.Repeat("x", 64)+`"}`)
	if rec.Code != http.StatusRequestEntityTooLarge || len(msgs) != 1 || msgs[0].Code != "body_too_large" ||
		msgs[0].Retryable == nil || *msgs[0].Retryable || len(h.Published()) != 0 {
		t.Errorf("body over the limit: %d %s", rec.Code, rec.Body)
	}
	h = &fakeHost{}
	req := httptest.NewRequest(http.MethodPost, a2e.Path, io.MultiReader(strings.NewReader(`{"a2e":"1.0",`), iotest.ErrReader(io.ErrUnexpectedEOF)))
	rec = httptest.NewRecorder()
	a2e.NewHandler(h).ServeHTTP(rec, req)
	var m a2e.Message
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || rec.Code != http.StatusBadRequest || m.Code != "read_error" ||
		m.Retryable == nil || !*m.Retryable || len(h.Published()) != 0 {
		t.Errorf("body that cannot be read: %d %s", rec.Code, rec.Body)
	}
}
