package host_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// TestRefuseJSONRPCRetryAfter: a JSON-RPC refusal (A2A, AgentVault, ACP
// over HTTP) carries the refusal's wait as Retry-After, in whole seconds
// rounded up (at least 1), unless the answer already has one (the gate's,
// set first, wins); a refusal without a wait adds none. It set no
// Retry-After at all, so a refusal whose header was set on another writer
// (a stream slot's, a charge after the gate) reached the client without it.
func TestRefuseJSONRPCRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		preset string
		wait   time.Duration
		want   string
	}{
		{"rounded up", "", 2500 * time.Millisecond, "3"},
		{"whole seconds", "", 15 * time.Second, "15"},
		{"at least one second", "", time.Millisecond, "1"},
		{"the gate's wins", "7", 30 * time.Second, "7"},
		{"no wait", "", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if tc.preset != "" {
				rec.Header().Set("Retry-After", tc.preset)
			}
			host.RefuseJSONRPC(rec, json.RawMessage(`1`), host.Refusal{Status: http.StatusServiceUnavailable,
				RPCCode: jsonrpc.CodeInternalError, Message: "retry later", Retryable: true, RetryAfter: tc.wait})
			if got := rec.Header().Get("Retry-After"); got != tc.want || rec.Code != http.StatusServiceUnavailable {
				t.Errorf("wait %v (header before %q): %d Retry-After %q, want %q", tc.wait, tc.preset, rec.Code, got, tc.want)
			}
			var resp struct {
				ID    json.RawMessage `json:"id"`
				Error *jsonrpc.Error  `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Error == nil || resp.Error.Code != jsonrpc.CodeInternalError || string(resp.ID) != "1" {
				t.Errorf("body %s (%v), want the JSON-RPC error of id 1", rec.Body, err)
			}
		})
	}
}

// TestTooManyStreamsCarriesItsWait: host.TooManyStreams carries its wait,
// a second, as every refusal does, so an answer of it says Retry-After: 1
// with no header set by hand: RefuseJSONRPC of the refusal alone said
// none (its callers set "1" before, each its own way).
func TestTooManyStreamsCarriesItsWait(t *testing.T) {
	if host.TooManyStreams.RetryAfterSeconds() != 1 {
		t.Errorf("TooManyStreams waits %v, want a second", host.TooManyStreams.RetryAfter)
	}
	for name, answer := range map[string]func(http.ResponseWriter){
		"RefuseJSONRPC": func(w http.ResponseWriter) { host.RefuseJSONRPC(w, json.RawMessage(`1`), host.TooManyStreams) },
		"AnswerSubmitError": func(w http.ResponseWriter) {
			host.AnswerSubmitError(host.HTTPReply(w, json.RawMessage(`1`)), host.ErrTooManyStreams)
		},
	} {
		rec := httptest.NewRecorder()
		answer(rec)
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
			t.Errorf("%s: %d Retry-After %q, want 429 with Retry-After 1", name, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
}
