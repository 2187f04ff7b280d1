package ingress_test

import (
	"context"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestCancelTurnWhoseRequestAgedOut: a prompt running longer than
// E2A_REQUESTS_MAX_AGE (an agent waiting hours on a model or a human)
// loses its request to the stream's age limit while it runs (the purge
// below stands for it; its frames stay in E2A_RESPONSES). Its session's
// session/cancel must still stop it. The cancel awaited the request in
// E2A_REQUESTS (a turn is recorded before it is published) for the whole
// publish wait, took it for one never published and sent nothing: the
// prompt ran on, and so would a task's turn under CancelTask.
func TestCancelTurnWhoseRequestAgedOut(t *testing.T) {
	const alice = "ak_alice_0123456789abcdef"
	h := startACPHeld(t, pipetest.WithIngress(ingress.WithAuth(pipetest.KeyAuth(t, map[string]string{"alice": alice}, nil))))
	sid := acpNewSession(t, h.p.URL, alice)
	lines := acpLines(t, h.p.URL, alice, promptBody("1", sid, "hi", true))
	id := h.request(t)
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "the prompt's first frame stored", func() bool {
		_, err := streams.LastBySubject(context.Background(), h.p.NC, streams.ResponsesStream, subj)
		return err == nil
	})
	natstest.Purge(t, h.p.JS, streams.RequestsStream) // aged out: the prompt runs on
	cancelNotified(t, h.p.URL, alice, sid)
	if !h.cancelStored(t, id) {
		t.Errorf("session/cancel answered with no cancel stored for the running prompt %s whose request aged out", id)
		h.release()
	}
	if got := h.stopReason(t, lines, id, true); got != "cancelled" {
		t.Errorf("the prompt ended %q, want cancelled", got)
	}
}
