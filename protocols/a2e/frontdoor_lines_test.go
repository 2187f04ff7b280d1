package a2e_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// TestFrontDoorErrorCarriesCapability: an A2EError names the capability
// namespace that failed (a2e-message-protocol.md, Error Handling:
// capability_name). The renderer's error lines carry it (the first
// segment of the request's type), and so do the front door's own error
// lines for a request it could not submit: they left it empty although
// the type was known.
func TestFrontDoorErrorCarriesCapability(t *testing.T) {
	for err, code := range map[error]string{
		fmt.Errorf("%w: %q", host.ErrUnknownPool, "echo"): "unknown_agent",
		host.ErrInvalidPool:  "invalid_agent",
		host.ErrConflict:     "conflict",
		host.ErrBackpressure: "unavailable",
	} {
		_, msgs := post(t, &fakeHost{PublishErr: err}, `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}`)
		if len(msgs) != 1 || msgs[0].Type != a2e.ErrorType || msgs[0].Code != code {
			t.Fatalf("%v: %+v", err, msgs)
		}
		if msgs[0].CapabilityName != "tool" {
			t.Errorf("%s error of a tool/call/req: capability_name %q, want %q", code, msgs[0].CapabilityName, "tool")
		}
	}
}

// TestHeartbeatIsAMessage: each NDJSON line is a self-contained JSON
// object (a2e-message-protocol.md, Wire Format), the heartbeat too (a
// ping naming the call). It was an empty line, which a client decoding
// every line as an A2E message cannot parse.
func TestHeartbeatIsAMessage(t *testing.T) {
	body := renderSteps(t, "r-1", func(r render.Renderer) error { return r.Heartbeat() })
	for i, l := range bytes.SplitAfter(body, []byte("\n")) {
		if len(l) == 0 {
			continue // after the last line feed
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Errorf("line %d %q is not a JSON object: %v", i, l, err)
		}
	}
}

// TestPongOnlyBodyIsNotEmpty: a body holding only messages that need no
// answer (a pong, an invoke/event or error sent back by the client) is
// not empty: the front door answered it with an invalid_request error
// claiming the body was empty.
func TestPongOnlyBodyIsNotEmpty(t *testing.T) {
	rec, msgs := post(t, &fakeHost{}, `{"a2e":"1.0","id":"p1","type":"pong","req_id":"x1"}`+"\n")
	for _, m := range msgs {
		if m.Type == a2e.ErrorType && strings.Contains(m.Message, "empty body") {
			t.Fatalf("a pong answered %d with %q (%s)", rec.Code, m.Message, rec.Body)
		}
	}
}

// TestClientResponseNotRun: a response a client sends (tool/call/resp,
// the spec's second example line) answers no request of the door: it is
// not published, and nothing answers it, as a handshake/resp. It was
// published as a new request, run by the pool and answered
// "tool/call/resp/resp".
func TestClientResponseNotRun(t *testing.T) {
	h := &fakeHost{}
	_, msgs := post(t, h, `{"a2e":"1.0","id":"r1","type":"tool/call/resp","req_id":"c1","result":{"ok":true}}`+"\n"+
		`{"a2e":"1.0","id":"p1","type":"ping"}`+"\n")
	if pub := h.Published(); len(pub) != 0 || len(msgs) != 1 || msgs[0].Type != "pong" {
		t.Fatalf("a client's tool/call/resp then a ping: published %d, answered %+v; want nothing published, the pong alone", len(pub), msgs)
	}
}

// TestFrontDoorErrorCapabilityAsRenderer: the front door's error line for
// a message of a one-segment type names the capability as the renderer's
// error lines do (the type itself); it named none, so the two answers of
// one type differed by where the error arose.
func TestFrontDoorErrorCapabilityAsRenderer(t *testing.T) {
	_, msgs := post(t, &fakeHost{PublishErr: host.ErrConflict}, `{"a2e":"1.0","id":"c1","type":"frobnicate","req_id":"r-1"}`)
	if len(msgs) != 1 || msgs[0].Type != a2e.ErrorType {
		t.Fatalf("want one error line, got %+v", msgs)
	}
	rec := httptest.NewRecorder()
	o := render.NewOutput(rec, 0)
	r := a2e.NewRenderer(o, a2e.Params{ReqID: "r-1", ReqType: "frobnicate"})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	if err := r.End(errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	var rendered a2e.Message
	if err := json.Unmarshal(bytes.TrimSpace(rec.Body.Bytes()), &rendered); err != nil {
		t.Fatalf("%v: %s", err, rec.Body.Bytes())
	}
	if msgs[0].CapabilityName != rendered.CapabilityName || rendered.CapabilityName != "frobnicate" {
		t.Errorf("capability_name: front door %q, renderer %q, want both %q", msgs[0].CapabilityName, rendered.CapabilityName, "frobnicate")
	}
}

// TestLinesNotFromFramesHaveTheirOwnIDs: A2EMessage.id is generated per
// message (a2e-message-protocol.md). The heartbeat's ping and the
// end-of-stream error had ids derived from the call's req_id (and the
// ping's count, the error's code), a correlation id the client chooses
// and may give two calls: both calls' pings, and their timeout errors,
// had the same ids, and a client dropping a message id it has seen lost
// the second call's error.
func TestLinesNotFromFramesHaveTheirOwnIDs(t *testing.T) {
	seen := map[string]string{}
	for call := range 2 {
		body := renderSteps(t, "1", render.Renderer.Heartbeat, func(r render.Renderer) error { return r.End(egress.ErrWaitTimeout) })
		for _, l := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
			var m a2e.Message
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			name := fmt.Sprintf("call %d's %s", call+1, m.Type)
			if other, ok := seen[m.ID]; ok {
				t.Errorf("%s has the id of %s: %s", name, other, m.ID)
			}
			seen[m.ID] = name
		}
	}
}

// renderSteps runs the renderer of a tool/call/req answering reqID:
// Start, then each step, and returns what it wrote.
func renderSteps(t *testing.T, reqID string, steps ...func(render.Renderer) error) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	o := render.NewOutput(rec, 0)
	r := a2e.NewRenderer(o, a2e.Params{ReqID: reqID, ReqType: "tool/call/req"})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	for _, step := range steps {
		if err := step(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	return rec.Body.Bytes()
}

// TestEmptyBodyRefused: a body with no message (empty, or blank lines) is
// refused whole, 400 with one invalid_request line, as the door's other
// refusals before any line runs; it was answered 200.
func TestEmptyBodyRefused(t *testing.T) {
	for _, body := range []string{"", "\n \n"} {
		rec, msgs := post(t, &fakeHost{}, body)
		if rec.Code != http.StatusBadRequest || len(msgs) != 1 || msgs[0].Code != normalizer.A2ECodeInvalidRequest ||
			msgs[0].Retryable == nil || *msgs[0].Retryable {
			t.Errorf("body %q: %d %s", body, rec.Code, rec.Body)
		}
	}
}

// TestLocalMessagesIgnoreIdempotencyKey: the Idempotency-Key is the id of
// the body's one request; a ping or a handshake submits none, so a key the
// request-id grammar refuses does not refuse them (a ping was answered an
// invalid_params error line), while a request under it still is.
func TestLocalMessagesIgnoreIdempotencyKey(t *testing.T) {
	h := &fakeHost{}
	_, msgs := postKeyed(t, h, "bad\x01key", `{"a2e":"1.0","id":"h1","type":"handshake/req"}
{"a2e":"1.0","id":"p1","type":"ping"}
{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}
`)
	if len(msgs) != 3 || msgs[0].Type != "handshake/resp" || msgs[1].Type != "pong" || msgs[1].ReqID != "p1" ||
		msgs[2].Type != a2e.ErrorType || msgs[2].Code != normalizer.A2ECodeInvalidParams || msgs[2].ReqID != "r-1" {
		t.Fatalf("%+v", msgs)
	}
	if pub := h.Published(); len(pub) != 0 {
		t.Fatalf("published %d under a refused key", len(pub))
	}
}

// TestVersionChecked: A2E is version 1.0 (a2e-message-protocol.md,
// "always 1.0"): a message of another major version ("a2e" or "version")
// is refused with an unsupported error line, not retryable, nothing
// published; it was run as a 1.0 message. Minor versions (1.1) and the
// field left out are 1.0.
func TestVersionChecked(t *testing.T) {
	for _, c := range []struct {
		fields string
		ok     bool
	}{
		{`"a2e":"1.0"`, true}, {`"version":"1.0"`, true}, {`"a2e":"1.1"`, true}, {`"a2e":"1"`, true}, {``, true},
		{`"a2e":"2.0"`, false}, {`"version":"0.9"`, false}, {`"a2e":"x"`, false}, {`"a2e":""`, false}, {`"a2e":"10.0"`, false},
	} {
		h := &fakeHost{}
		sep := ""
		if c.fields != "" {
			sep = ","
		}
		_, msgs := post(t, h, `{`+c.fields+sep+`"id":"c1","type":"tool/call/req","req_id":"r-1"}`)
		pub := h.Published()
		if c.ok && len(pub) != 1 {
			t.Errorf("%s: published %d: %+v", c.fields, len(pub), msgs)
		}
		if !c.ok && (len(pub) != 0 || len(msgs) != 1 || msgs[0].Code != normalizer.A2ECodeUnsupported ||
			msgs[0].Retryable == nil || *msgs[0].Retryable || msgs[0].ReqID != "r-1" || !strings.Contains(msgs[0].Message, "1.x")) {
			t.Errorf("%s: published %d: %+v", c.fields, len(pub), msgs)
		}
	}
}
