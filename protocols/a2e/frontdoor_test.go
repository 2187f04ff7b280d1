package a2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// fakeHost is a pipeline that admits (or refuses) every request, accepts
// (or fails) every publish, and answers an accepted request by starting
// and ending its renderer with no frame.
type fakeHost struct {
	refusal   *host.Refusal
	noSlot    bool // every stream slot taken
	slots     int  // slots held now
	onServe   func()
	publish   error
	published []string
	served    []string
}

var _ host.Host = (*fakeHost)(nil)

func (h *fakeHost) Admit(w http.ResponseWriter, r *http.Request, protocol string, refuse host.Refuse) (host.Caller, bool) {
	if h.refusal != nil {
		refuse(w, *h.refusal)
		return nil, false
	}
	return fakeCaller{h}, true
}

func (h *fakeHost) Serve(w http.ResponseWriter, r *http.Request, requestID, format string, newRenderer egress.NewRenderer) {
	h.served = append(h.served, requestID+" "+format)
	if h.onServe != nil {
		h.onServe()
	}
	rend := newRenderer(egress.NewOutput(w, 0))
	_ = rend.Start()
	_ = rend.End(nil)
}

func (h *fakeHost) ServeE2A(http.ResponseWriter, *http.Request, string) {
	panic("A2E answers with its own renderer")
}

func (h *fakeHost) Normalizer() *normalizer.Normalizer {
	return normalizer.New(normalizer.Config{Routes: normalizer.Routes{Default: "echo"}})
}

func (h *fakeHost) MaxBody() int64 { return 1 << 20 }

func (h *fakeHost) Version() string { return "test" }

type fakeCaller struct{ h *fakeHost }

func (c fakeCaller) Input(r *http.Request, body []byte, agent string) normalizer.Input {
	return normalizer.Input{Body: body, Header: r.Header, Channel: "http", Agent: agent}
}

func (c fakeCaller) Publish(ctx context.Context, pool string, env *e2a.Envelope) (host.Accepted, error) {
	if c.h.publish != nil {
		return host.Accepted{}, c.h.publish
	}
	c.h.published = append(c.h.published, pool+" "+env.Method)
	return host.Accepted{RequestID: env.RequestID, Pool: pool}, nil
}

func (c fakeCaller) StreamSlot(w http.ResponseWriter, refuse host.Refuse) (func(), bool) {
	if c.h.noSlot {
		refuse(w, host.Refusal{Status: http.StatusTooManyRequests, Code: "too_many_streams", Message: "too many concurrent streams", Retryable: true})
		return nil, false
	}
	c.h.slots++
	return func() { c.h.slots-- }, true
}

func post(t *testing.T, h *fakeHost, body string) (*httptest.ResponseRecorder, []a2e.Message) {
	t.Helper()
	rec := httptest.NewRecorder()
	a2e.NewHandler(h).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, a2e.Path, strings.NewReader(body)))
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
	if len(h.published) != 1 || h.published[0] != "echo tool/call/req" || len(h.served) != 1 || !strings.HasSuffix(h.served[0], " "+a2e.Format) {
		t.Errorf("published %v served %v", h.published, h.served)
	}
}

// Refusals and publish errors in A2E's shape.
func TestFrontDoorErrors(t *testing.T) {
	rec, msgs := post(t, &fakeHost{refusal: &host.Refusal{Status: 429, Code: "rate_limit_exceeded", Message: "slow down", Retryable: true}}, `{"a2e":"1.0","id":"p1","type":"ping"}`)
	if rec.Code != 429 || len(msgs) != 1 || msgs[0].Code != "rate_limit_exceeded" || !*msgs[0].Retryable || msgs[0].Detail["http_status"] != float64(429) {
		t.Errorf("refusal: %d %+v", rec.Code, msgs)
	}
	for err, code := range map[error]string{
		fmt.Errorf("%w: %q", host.ErrUnknownPool, "echo"): "unknown_agent",
		host.ErrConflict:     "conflict",
		host.ErrTooLarge:     "body_too_large",
		host.ErrBackpressure: "unavailable",
	} {
		_, msgs := post(t, &fakeHost{publish: err}, `{"a2e":"1.0","id":"c1","type":"tool/call/req"}`)
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
	h.onServe = func() { held = h.slots }
	post(t, h, `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}`+"\n")
	if held != 1 || h.slots != 0 {
		t.Fatalf("slots while answering %d, after %d; want 1 then 0", held, h.slots)
	}
	h = &fakeHost{noSlot: true}
	rec, msgs := post(t, h, `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}`+"\n")
	if rec.Code != http.StatusTooManyRequests || len(msgs) != 1 || msgs[0].Type != "error" || len(h.published) != 0 {
		t.Fatalf("no slot left: %d %+v published %v", rec.Code, msgs, h.published)
	}
	if m := msgs[0]; m.Code != "too_many_streams" || m.Retryable == nil || !*m.Retryable {
		t.Errorf("error line %+v", m)
	}
}
