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

// TestStreamOptionsKeptAfterOtherRefusal: a 400 or 422 about something
// else that quotes the request, stream_options and all (FastAPI's
// validation errors echo the body a request-level check refused as their
// input: here tool_choice without tools), is not a refusal of
// stream_options: the call made again without it is refused too, and later
// calls still send it, asking for their token usage. Every later call of the
// pool went without it, after a warning that the upstream refuses it.
func TestStreamOptionsKeptAfterOtherRefusal(t *testing.T) {
	srv := newModelServer(t)
	srv.setScript(func(n int, w http.ResponseWriter, _ *http.Request, body chatRequest) bool {
		if body.lastUser() != "x" {
			return false // answered: the echo
		}
		raw := srv.recordedCalls()[n-1].Raw
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"detail":[{"type":"value_error","loc":["body"],"msg":"Value error, tools must be set","input":` +
			string(raw) + `,"ctx":{"error":{}}}]}`))
		return true
	})
	logs := &testkit.Buffer{}
	p := startBridge(t, srv, setup{log: logs})
	a := read(t, askWith(t, p, "", "so-x", map[string]any{"content": "x", "tool_choice": "required"}, nil))
	if a.final.ResponseKind != e2a.KindError || a.errBody.Code != bridge.CodeRejected || srv.recordedCalls()[0].Body.StreamOptions == nil {
		t.Fatalf("final %s %+v, want %s for a call with stream_options", a.final.ResponseKind, a.errBody, bridge.CodeRejected)
	}
	n := len(srv.recordedCalls())
	a = read(t, ask(t, p, "", "so-next", "hello", nil))
	last := srv.recordedCalls()[len(srv.recordedCalls())-1]
	if a.final.ResponseKind != e2a.KindComplete || len(srv.recordedCalls()) != n+1 || last.Body.StreamOptions == nil {
		t.Errorf("final %s after %d calls, stream_options %v; want one call with it", a.final.ResponseKind,
			len(srv.recordedCalls())-n, last.Body.StreamOptions)
	}
	if strings.Contains(logs.String(), "refuses stream_options") {
		t.Errorf("warned that the upstream refuses stream_options:\n%s", logs.String())
	}
}
