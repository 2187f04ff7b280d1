package a2av1

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// The exact answers of a temporary failure (errUnavailable: host.ErrBackpressure,
// egress.ErrShuttingDown) on the HTTP bindings, at fixedNow: A2A v1.0
// §11.6's google.rpc.Status (code, status, message, details with @type) and
// §9.5's JSON-RPC error (code, message, data), each with a google.rpc.RetryInfo
// beside the ErrorInfo (§3.3.2: a temporary failure, with retry guidance).
const (
	unavailableREST = `{"error":{"code":503,"status":"UNAVAILABLE","message":"server error: the pipeline is unavailable; retry later",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"},` +
		`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"a2a-protocol.org","metadata":{"timestamp":"2026-01-02T03:04:05Z"},"reason":"SERVER_ERROR"}]}}`
	unavailableRPC = `{"code":-32000,"message":"server error: the pipeline is unavailable; retry later",` +
		`"data":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"},` +
		`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"a2a-protocol.org","metadata":{"timestamp":"2026-01-02T03:04:05Z"},"reason":"SERVER_ERROR"}]}`
)

func fixNow(t *testing.T) {
	old := now
	now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	t.Cleanup(func() { now = old })
}

// checkAnswer fails unless rec holds status, Retry-After retry and body (JSON,
// compared compact).
func checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder, status int, retry, body string) {
	t.Helper()
	got := strings.TrimSpace(rec.Body.String())
	if rec.Code != status || rec.Header().Get("Retry-After") != retry || got != body {
		t.Errorf("%s: %d Retry-After %q\n%s\nwant %d Retry-After %q\n%s", what, rec.Code, rec.Header().Get("Retry-After"), got, status, retry, body)
	}
}

// TestUnavailableAnswers: every place the HTTP+JSON and JSON-RPC bindings
// write a temporary failure answers it alike: 503 UNAVAILABLE with
// Retry-After: 1 and a RetryInfo of 1s on HTTP+JSON (a plain answer, the
// SDK's unary answers through specREST, a stream's end), -32000 with the
// RetryInfo in data on JSON-RPC (a plain answer, a stream's end). They
// were 500 INTERNAL and -32000 with the ErrorInfo alone, nothing saying
// the client may retry.
func TestUnavailableAnswers(t *testing.T) {
	fixNow(t)
	for _, err := range []error{host.ErrBackpressure, fmt.Errorf("egress: %w", egress.ErrShuttingDown)} {
		rec := httptest.NewRecorder()
		writePlain(rec, err, nil, true)
		checkAnswer(t, fmt.Sprintf("HTTP+JSON plain %v", err), rec, http.StatusServiceUnavailable, "1", unavailableREST)
		rec = httptest.NewRecorder()
		writePlain(rec, err, json.RawMessage(`3`), false)
		checkAnswer(t, fmt.Sprintf("JSON-RPC plain %v", err), rec, http.StatusOK, "",
			`{"jsonrpc":"2.0","id":3,"error":`+unavailableRPC+`}`)
	}

	// The SDK's HTTP+JSON handler, its handler failing with errUnavailable.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/tasks/t1", nil)
	specREST(a2asrv.NewRESTHandler(failing{})).ServeHTTP(rec, req)
	var st restStatus
	if json.Unmarshal(rec.Body.Bytes(), &st) != nil || rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" ||
		st.Error.Code != 503 || st.Error.Status != "UNAVAILABLE" || !hasRetryInfo(st) || len(st.Error.Details) != 2 {
		t.Errorf("SDK HTTP+JSON GetTask failing unavailable: %d Retry-After %q %s; want 503, Retry-After: 1, UNAVAILABLE "+
			"with a RetryInfo and an ErrorInfo", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}

	// A stream ending with it (the server stopping): the SSE event.
	for _, rest := range []bool{true, false} {
		rec := httptest.NewRecorder()
		o := render.NewOutput(rec, time.Second)
		r := NewRESTStream(o, "r1", a2amap.Params{}, 1)
		want := unavailableREST
		if !rest {
			r = NewStream(o, "r1", a2amap.Params{}, json.RawMessage(`"s"`), 1)
			want = `{"jsonrpc":"2.0","id":"s","error":` + unavailableRPC + `}`
		}
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		if err := r.End(fmt.Errorf("egress: %w", egress.ErrShuttingDown)); err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.String(); !strings.Contains(got, "data: "+want+"\n") {
			t.Errorf("stream (rest %v) ending shutting down: %q; want the event %s", rest, got, want)
		}
	}
}

// failing is an SDK request handler whose GetTask fails as the pipeline's
// handler does when it is unavailable.
type failing struct{ a2asrv.RequestHandler }

func (failing) GetTask(context.Context, *a2a.GetTaskRequest) (*a2a.Task, error) {
	return nil, errUnavailable
}

// TestGateUnavailableRefusal: the gate's 503 (a fail-closed rate limiter
// unavailable) is the same temporary failure: on HTTP+JSON 503
// UNAVAILABLE with Retry-After and the RetryInfo beside an ErrorInfo
// (was the message alone), on JSON-RPC -32000 with them in data (was
// -32603 with no data).
func TestGateUnavailableRefusal(t *testing.T) {
	fixNow(t)
	f := host.Refusal{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "rate limiter unavailable; retry later",
		Retryable: true, RPCCode: -32603}
	rec := httptest.NewRecorder()
	restRefuse(rec, f)
	checkAnswer(t, "HTTP+JSON gate 503", rec, http.StatusServiceUnavailable, "1",
		strings.Replace(unavailableREST, "server error: the pipeline is unavailable; retry later", f.Message, 1))
	rec = httptest.NewRecorder()
	refuseRPC(rec, f)
	checkAnswer(t, "JSON-RPC gate 503", rec, http.StatusServiceUnavailable, "1", `{"jsonrpc":"2.0","id":null,"error":`+
		strings.Replace(unavailableRPC, "server error: the pipeline is unavailable; retry later", f.Message, 1)+`}`)
}

// hasRetryInfo reports whether st carries a google.rpc.RetryInfo of 1s.
func hasRetryInfo(st restStatus) bool {
	for _, d := range st.Error.Details {
		if d.TypeURL == "type.googleapis.com/google.rpc.RetryInfo" && d.Value["retryDelay"] == "1s" {
			return true
		}
	}
	return false
}
