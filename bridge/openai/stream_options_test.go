package openai_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestStreamOptionsRefused: a server that refuses stream_options (Mistral's
// API answers 422 extra_forbidden; Azure OpenAI's older API versions 400
// "Unrecognized request argument supplied: stream_options") is called again
// at once without it, and every later call goes without it: the client gets
// its answer (no token usage), the operator one warning. Before, every
// request failed upstream_rejected. A 400 for anything else is not retried.
func TestStreamOptionsRefused(t *testing.T) {
	for name, refusal := range map[string]struct {
		status int
		body   string
	}{
		"mistral": {http.StatusUnprocessableEntity, `{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","stream_options","include_usage"],"msg":"Extra inputs are not permitted","input":true}]},"type":"invalid_request_error","param":null,"code":null}`},
		"azure":   {http.StatusBadRequest, `{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error","param":null,"code":null}}`},
	} {
		t.Run(name, func(t *testing.T) {
			srv := newModelServer(t)
			srv.setScript(func(_ int, w http.ResponseWriter, _ *http.Request, body chatRequest) bool {
				if body.StreamOptions == nil && !strings.Contains(body.lastUser(), "other") {
					return false // answered: the echo
				}
				w.Header().Set("Content-Type", "application/json")
				if strings.Contains(body.lastUser(), "other") {
					w.WriteHeader(http.StatusBadRequest)
					_, _ = w.Write([]byte(`{"error":{"message":"model not found","type":"invalid_request_error"}}`))
					return true
				}
				w.WriteHeader(refusal.status)
				_, _ = w.Write([]byte(refusal.body))
				return true
			})
			logs := &testkit.Buffer{}
			p := startBridge(t, srv, setup{log: logs})
			for i, id := range []string{"so-1", "so-2"} {
				a := read(t, ask(t, p, "", id, "hello "+id, nil))
				if a.final.ResponseKind != e2a.KindComplete || a.text != "echo: hello "+id {
					t.Fatalf("%s: final %s %+v, text %q", id, a.final.ResponseKind, a.errBody, a.text)
				}
				calls := srv.recordedCalls()
				if want := i + 2; len(calls) != want {
					t.Fatalf("%s: %d upstream calls, want %d (one refused, then each without stream_options)", id, len(calls), want)
				}
				if last := calls[len(calls)-1]; bytes.Contains(last.Raw, []byte("stream_options")) {
					t.Errorf("%s: the call after the refusal still sends stream_options: %s", id, last.Raw)
				}
			}
			if n := strings.Count(logs.String(), "refuses stream_options"); n != 1 {
				t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
			}
			// Another refusal is the upstream's, not retried.
			a := read(t, ask(t, p, "", "so-other", "other", nil))
			if a.final.ResponseKind != e2a.KindError || a.errBody.Code != bridge.CodeRejected || len(srv.recordedCalls()) != 4 {
				t.Errorf("final %s %+v after %d calls, want %s after one more call", a.final.ResponseKind, a.errBody,
					len(srv.recordedCalls()), bridge.CodeRejected)
			}
		})
	}
}
