package audit_test

import (
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestReadAPIChosenIDEnvelopeAgedOut: a request of a client's own id
// whose envelope aged out of E2A_REQUESTS (stored first, dropped first)
// while its frames are still in E2A_RESPONSES is answered to its owner as
// the hot streams answered it, its envelope found in E2A_AUDIT around its
// first hot frame's time (Auditor.RequestNear); another principal still
// gets the unknown id's 404. Its owner got 404 (no time in the id, so the
// History was not asked, and without an envelope no owner), where the
// audit role read the frames.
func TestReadAPIChosenIDEnvelopeAgedOut(t *testing.T) {
	t.Parallel()
	js, _, _, srv := historyServer(t)
	id := "client-chosen-aged-envelope"
	completeRequest(t, js, "demo", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "chat.send", UserID: "alice",
		Params: map[string]any{"text": "chosen"}}, 2)
	hot := hotAnswers(t, srv, []string{id})
	waitAudit(t, js, 4)
	natstest.Purge(t, js, streams.RequestsStream)
	checkFromHistory(t, srv, []string{id}, hot)

	// With the frames gone too, nothing tells when to search: 404, as
	// before, for the owner (no scan of the history for a chosen id).
	natstest.Purge(t, js, streams.ResponsesStream)
	if got := getAnswer(t, srv.URL+"/v1/requests/"+id, "alice"); got.Status != http.StatusNotFound {
		t.Errorf("%s with nothing hot as alice: %+v, want 404", id, got)
	}
}
