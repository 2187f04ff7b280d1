package a2av1

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/errordetails"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	a2av03 "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// renderedWaits is the wait each binding says for refusal f, in seconds
// (a Retry-After header as sent, a google.rpc.RetryInfo's delay as its
// seconds; "" where it says none): A2A v0.3's JSON-RPC (a2a.Refuse), and
// v1.0's HTTP+JSON (restRefuse), JSON-RPC (refuseRPC, and refuseTooMany
// with a call's id) and gRPC (gateStatus).
func renderedWaits(t *testing.T, f host.Refusal) map[string]string {
	t.Helper()
	got := map[string]string{}
	w := httptest.NewRecorder()
	a2av03.Refuse(w, f)
	got["v0.3 JSON-RPC Retry-After"] = w.Header().Get("Retry-After")

	w = httptest.NewRecorder()
	restRefuse(w, f)
	var st restStatus
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatalf("HTTP+JSON %s: %v", w.Body, err)
	}
	got["v1.0 HTTP+JSON Retry-After"] = w.Header().Get("Retry-After")
	got["v1.0 HTTP+JSON RetryInfo"] = retryInfoSeconds(t, st.Error.Details)

	for name, write := range map[string]func(http.ResponseWriter){
		"v1.0 JSON-RPC":         func(w http.ResponseWriter) { refuseRPC(w, f) },
		"v1.0 JSON-RPC with id": func(w http.ResponseWriter) { refuseTooMany(w, json.RawMessage(`7`), f, refuseRPC) },
	} {
		if name == "v1.0 JSON-RPC with id" && f.Code != host.TooManyStreams.Code && f.Code != host.TooManyTurns.Code {
			continue
		}
		w = httptest.NewRecorder()
		write(w)
		var resp struct {
			Error *struct{ Data []*errordetails.Typed } `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Error == nil {
			t.Fatalf("%s %s: %v", name, w.Body, err)
		}
		got[name+" Retry-After"] = w.Header().Get("Retry-After")
		got[name+" RetryInfo"] = retryInfoSeconds(t, resp.Error.Data)
	}

	got["v1.0 gRPC RetryInfo"] = ""
	for _, d := range status.Convert(gateStatus(f)).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			got["v1.0 gRPC RetryInfo"] = strconv.FormatFloat(ri.GetRetryDelay().AsDuration().Seconds(), 'f', -1, 64)
		}
	}
	return got
}

// retryInfoSeconds is the delay of the google.rpc.RetryInfo among
// details in seconds ("" without one).
func retryInfoSeconds(t *testing.T, details []*errordetails.Typed) string {
	t.Helper()
	for _, d := range details {
		if d.TypeURL != retryInfoType {
			continue
		}
		s, _ := d.Value["retryDelay"].(string)
		delay, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("RetryInfo %v: %v", d.Value, err)
		}
		return strconv.FormatFloat(delay.Seconds(), 'f', -1, 64)
	}
	return ""
}

// checkWaits fails unless every binding says f's wait as want seconds.
func checkWaits(t *testing.T, f host.Refusal, want string) {
	t.Helper()
	for where, secs := range renderedWaits(t, f) {
		if secs != want {
			t.Errorf("%s (%d %s, wait %v): %q seconds, want %q as every binding", where, f.Status, f.Code, f.RetryAfter, secs, want)
		}
	}
}

// TestRefusalWaitSameSecondsEveryBinding: a refusal's wait is whole
// seconds rounded up (host.WaitSeconds, as Retry-After says it) in every
// binding, so a 1.2 s wait is 2 s in A2A v0.3's JSON-RPC, and in v1.0's
// HTTP+JSON, JSON-RPC and gRPC (their RetryInfo said 1.2s, and HTTP+JSON
// had no Retry-After at all unless the gate had set one).
func TestRefusalWaitSameSecondsEveryBinding(t *testing.T) {
	for _, f := range []host.Refusal{
		{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded", Message: "slow down", Retryable: true,
			RPCCode: jsonrpc.CodeRateLimited, RetryAfter: 1200 * time.Millisecond},
		{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "retry later", Retryable: true,
			RPCCode: jsonrpc.CodeInternalError, RetryAfter: 1200 * time.Millisecond},
	} {
		checkWaits(t, f, "2")
	}
}

// TestTooManyStreamsCarriesItsWait: host.TooManyStreams carries its wait
// (a second), which each binding renders from the refusal as it renders
// any other's: a Retry-After and RetryInfo of 1 s. The callers set it by
// hand, on some paths only (HTTP+JSON's restRefuse and JSON-RPC's data
// had none).
func TestTooManyStreamsCarriesItsWait(t *testing.T) {
	checkWaits(t, host.TooManyStreams, "1")
}

// TestTooManyTurnsCarriesItsWait: host.TooManyTurns, the refusal of a
// message to a task with as many turns waiting as allowed, is rendered as
// host.TooManyStreams is: a Retry-After and RetryInfo of 1 s on every
// binding.
func TestTooManyTurnsCarriesItsWait(t *testing.T) {
	checkWaits(t, host.TooManyTurns, "1")
}
