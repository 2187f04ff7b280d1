package openai_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestStreamErrorEchoingTheKey: the model server (or a proxy in front of
// it) refuses the bridge's key with an error event in a 200 stream that
// quotes the Authorization header it got. The key is never stored, logged
// or shown: the Handler scrubs every upstream error (bridge.Scrubber), not
// only a non-2xx answer's body.
func TestStreamErrorEchoingTheKey(t *testing.T) {
	logs := &testkit.Buffer{}
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{log: logs})
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
		msg, _ := json.Marshal("invalid credentials: " + r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`data: {"error":{"message":` + string(msg) + `,"type":"authentication_error","code":401}}` + "\n\n"))
		return true
	})
	a := read(t, ask(t, p, "", "review-echo-key", "hello", nil))
	if a.final.ResponseKind != e2a.KindError || a.errBody.Code != bridge.CodeAuth {
		t.Fatalf("final %s %+v, want e2a.error %s", a.final.ResponseKind, a.errBody, bridge.CodeAuth)
	}
	noSecret(t, p, logs, a.errBody.Message, upstreamKey, "the bridge's key")
}

// TestLongStreamErrorEchoingTheKey: as TestStreamErrorEchoingTheKey,
// but the error event's message is long (a proxy's verbose refusal that
// quotes the Authorization header it got after 175 characters of prose).
// docs/security.md: "every upstream error is scrubbed of them before it is
// logged or written as a frame, whatever answer carried it (... an error
// event in a 200 stream quoting the request's headers ...)". No part of
// the key may reach the client, the stored frames or the logs: the
// message must be scrubbed before it is cut to its 200 characters, not
// after (a key cut in two is no longer found by the scrub).
func TestLongStreamErrorEchoingTheKey(t *testing.T) {
	logs := &testkit.Buffer{}
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{log: logs})
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, _ chatRequest) bool {
		prose := strings.Repeat("a", 175)
		msg, _ := json.Marshal(prose + " " + r.Header.Get("Authorization") + " was refused by the gateway")
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`data: {"error":{"message":` + string(msg) + `,"type":"authentication_error","code":401}}` + "\n\n"))
		return true
	})
	a := read(t, ask(t, p, "", "long-echo-key", "hello", nil))
	if a.final.ResponseKind != e2a.KindError || a.errBody.Code != bridge.CodeAuth {
		t.Fatalf("final %s %+v, want e2a.error %s", a.final.ResponseKind, a.errBody, bridge.CodeAuth)
	}
	prefix := upstreamKey[:16] // "sk-upstream-6f1d": a third of the secret
	if strings.Contains(a.errBody.Message, prefix) {
		t.Errorf("the final frame shows the start of the bridge's key %q: %q; want the key scrubbed before the message is cut", prefix, a.errBody.Message)
	}
	if n := natstest.StoredWith(t, p.JS, prefix); n > 0 {
		t.Errorf("the start of the bridge's key %q is in %d stored messages; want none", prefix, n)
	}
	if strings.Contains(logs.String(), prefix) {
		t.Errorf("the start of the bridge's key %q is in the logs; want none", prefix)
	}
}

// noSecret checks that secret (what names it) is in none of the final
// frame's message, p's stored messages and the logs.
func noSecret(t *testing.T, p *pipetest.Pipeline, logs *testkit.Buffer, message, secret, what string) {
	t.Helper()
	if strings.Contains(message, secret) {
		t.Errorf("the final frame shows %s: %q", what, message)
	}
	if n := natstest.StoredWith(t, p.JS, secret); n > 0 {
		t.Errorf("%s is in %d stored messages", what, n)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("%s is in the logs", what)
	}
}
