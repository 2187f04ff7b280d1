package e2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// testHost is the conformance kit's fake pipeline with a 1 KiB body bound;
// held is the number of stream slots held when it served an answer.
type testHost struct {
	*conformance.Host
	held int
}

// newHost returns a testHost that set configures (nil: none).
func newHost(set func(h *conformance.Host)) *testHost {
	th := &testHost{Host: &conformance.Host{BodyLimit: 1 << 10}}
	if set != nil {
		set(th.Host)
	}
	th.OnServe = func(string, string) { th.held = th.Slots() }
	return th
}

func post(h *testHost, target, body string, header ...string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	e2aproto.NewHandler(h).ServeHTTP(rec, r)
	return rec
}

func errorOf(t *testing.T, rec *httptest.ResponseRecorder) egress.APIErrorBody {
	t.Helper()
	var b egress.APIError
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Error.Code == "" {
		t.Fatalf("not an E2A error body (%v): %d %s", err, rec.Code, rec.Body)
	}
	return b.Error
}

// An accepted request is 202 with its id, pool and links; nothing is
// streamed and no stream slot is taken.
func TestFrontDoorAccepts(t *testing.T) {
	h := newHost(func(h *conformance.Host) { h.Warning = `agent pool "echo" has no live worker` })
	rec := post(h, "/v1/requests?agent=echo", `{"request_id":"r-1","params":{"q":"hi"}}`)
	if rec.Code != http.StatusAccepted || rec.Header().Get(e2aproto.HeaderWarning) == "" {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	var acc e2aproto.AcceptedBody
	if err := json.Unmarshal(rec.Body.Bytes(), &acc); err != nil {
		t.Fatal(err)
	}
	if acc.RequestID != "r-1" || acc.Pool != "echo" || acc.Warning == "" ||
		acc.Links["self"] != "/v1/requests/r-1" || acc.Links["stream"] != "/v1/requests/r-1/stream" {
		t.Fatalf("%+v", acc)
	}
	if len(h.Published()) != 1 || h.Published()[0].IsStream || h.held != 0 || h.Slots() != 0 {
		t.Fatalf("published %d, stream %v, slots held %d/%d", len(h.Published()), h.Published()[0].IsStream, h.held, h.Slots())
	}
}

// A streamed answer (Accept) or a wait (?wait=true) is egress's E2A
// answer, holding one stream slot while it runs; a streamed one marks the
// envelope as a stream.
func TestFrontDoorAnswersAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name, target, accept string
		stream               bool
	}{
		{"sse", "/v1/requests", "text/event-stream", true},
		{"ndjson", "/v1/requests", "application/x-ndjson", true},
		{"wait", "/v1/requests?wait=true", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(nil)
			rec := post(h, tc.target, `{"request_id":"r-2","params":{}}`, "Accept", tc.accept)
			if s := h.Served(); rec.Code != http.StatusOK || len(s) != 1 || s[0] != "r-2 "+egress.FormatE2ANDJSON {
				t.Fatalf("%d %s, served %v", rec.Code, rec.Body, s)
			}
			if h.held != 1 || h.Slots() != 0 {
				t.Fatalf("slots held while answering %d, after %d", h.held, h.Slots())
			}
			if len(h.Published()) != 1 || h.Published()[0].IsStream != tc.stream {
				t.Fatalf("is_stream %v, want %v", h.Published()[0].IsStream, tc.stream)
			}
		})
	}
	// No slot left: 429 in the E2A shape, and nothing published (a client
	// retrying without a request_id would otherwise run it twice).
	h := newHost(func(h *conformance.Host) { h.NoSlot = true })
	rec := post(h, "/v1/requests", `{"request_id":"r-3","params":{}}`, "Accept", "text/event-stream")
	if e := errorOf(t, rec); rec.Code != http.StatusTooManyRequests || e.Code != "too_many_streams" || !e.Retryable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %+v %v", rec.Code, e, rec.Header())
	}
	if len(h.Published()) != 0 {
		t.Fatalf("published %d", len(h.Published()))
	}
}

// Every refusal is an E2A error body with its status; none publishes.
func TestFrontDoorRefusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		h         *testHost
		target    string
		body      string
		header    []string
		status    int
		code      string
		retryable bool
	}{
		{"gate", newHost(func(h *conformance.Host) {
			h.Refusal = &host.Refusal{Status: 401, Code: "unauthenticated", Message: "no credentials"}
		}),
			"/v1/requests", `{"params":{}}`, nil, 401, "unauthenticated", false},
		{"rate limit", newHost(func(h *conformance.Host) {
			h.Refusal = &host.Refusal{Status: 429, Code: "rate_limited", Message: "slow down", Retryable: true}
		}),
			"/v1/requests", `{"params":{}}`, nil, 429, "rate_limited", true},
		{"not json", newHost(nil), "/v1/requests", `{`, nil, 400, e2aproto.CodeInvalidRequest, false},
		{"bad request id", newHost(nil), "/v1/requests", `{"request_id":" a","params":{}}`, nil, 400, e2aproto.CodeInvalidRequestID, false},
		{"bad session id", newHost(nil), "/v1/requests", `{"session_id":"\u202eabc","params":{}}`, nil, 400, e2aproto.CodeInvalidRequestID, false},
		{"bad pool", newHost(nil), "/v1/requests?agent=no.dots", `{"params":{}}`, nil, 400, e2aproto.CodeInvalidAgent, false},
		{"too large", newHost(nil), "/v1/requests", `{"params":{"x":"` + strings.Repeat("x", 2<<10) + `"}}`, nil, 413, e2aproto.CodeBodyTooLarge, false},
		{"conflict", newHost(func(h *conformance.Host) { h.PublishErr = fmt.Errorf("taken: %w", host.ErrConflict) }), "/v1/requests", `{"params":{}}`, nil, 409, e2aproto.CodeConflict, false},
		{"envelope too large", newHost(func(h *conformance.Host) { h.PublishErr = host.ErrTooLarge }), "/v1/requests", `{"params":{}}`, nil, 413, e2aproto.CodeBodyTooLarge, false},
		{"unknown pool", newHost(func(h *conformance.Host) { h.PublishErr = host.ErrUnknownPool }), "/v1/requests", `{"params":{}}`, nil, 404, e2aproto.CodeUnknownAgent, false},
		{"client gone", newHost(func(h *conformance.Host) { h.PublishErr = context.Canceled }), "/v1/requests", `{"params":{}}`, nil, 499, e2aproto.CodeClientClosed, true},
		// The server's shutdown cut the publish (the client is there): 503
		// retryable, as an unavailable pipeline, never 499.
		{"shutting down", newHost(func(h *conformance.Host) {
			h.PublishErr = fmt.Errorf("%w: request %q may have been accepted", egress.ErrShuttingDown, "r-9")
		}), "/v1/requests", `{"params":{}}`, nil, 503, e2aproto.CodeUnavailable, true},
		{"backpressure", newHost(func(h *conformance.Host) { h.PublishErr = host.ErrBackpressure }), "/v1/requests", `{"params":{}}`, nil, 503, e2aproto.CodeUnavailable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := post(tc.h, tc.target, tc.body, tc.header...)
			e := errorOf(t, rec)
			if rec.Code != tc.status || e.Code != tc.code || e.Retryable != tc.retryable || e.Message == "" {
				t.Fatalf("%d %+v, want %d %s retryable=%v", rec.Code, e, tc.status, tc.code, tc.retryable)
			}
			if tc.retryable != (rec.Header().Get("Retry-After") != "") {
				t.Errorf("Retry-After %q with retryable=%v", rec.Header().Get("Retry-After"), tc.retryable)
			}
			if tc.code == e2aproto.CodeConflict && strings.Contains(e.Message, "taken") {
				t.Errorf("a conflict reveals the other principal's request: %q", e.Message)
			}
			if tc.h.PublishErr == nil && len(tc.h.Published()) != 0 {
				t.Errorf("a refused request was published")
			}
		})
	}
}

// A body's is_stream is kept when the answer is not streamed in the call
// (the client reads the stream later with GET …/stream).
func TestFrontDoorKeepsBodyIsStream(t *testing.T) {
	h := newHost(nil)
	rec := post(h, "/v1/requests", `{"request_id":"r-5","is_stream":true,"params":{}}`)
	if rec.Code != http.StatusAccepted || len(h.Published()) != 1 || !h.Published()[0].IsStream {
		t.Fatalf("%d %s, published %+v", rec.Code, rec.Body, h.Published())
	}
}

// An Accept that excludes the stream types (q=0) is no stream: the request
// is accepted (202), as egress would answer it with the JSON view anyway.
func TestFrontDoorAcceptExcluded(t *testing.T) {
	h := newHost(nil)
	rec := post(h, "/v1/requests", `{"request_id":"r-4","params":{}}`, "Accept", "text/event-stream;q=0, application/json")
	if rec.Code != http.StatusAccepted || len(h.Published()) != 1 || h.Published()[0].IsStream || h.held != 0 {
		t.Fatalf("%d %s, published %d", rec.Code, rec.Body, len(h.Published()))
	}
}
