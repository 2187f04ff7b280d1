package e2a_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// TestFrontDoorTurnGivesTaskItsContext: a task E2A starts records its
// first turn's context_id (the turn's host.Task.ContextID, NewContext so
// that the host claims it for the caller as a new task's); a turn naming a
// context of a task whose record holds none gives it that context the same
// way (the record as read is left alone). A turn of a task whose record
// holds a context, naming it or none, gives nothing: its record is checked
// instead.
func TestFrontDoorTurnGivesTaskItsContext(t *testing.T) {
	noContext := &host.Task{Session: host.Session{ID: "t-e2a", Protocol: normalizer.ProtocolE2A, Pool: "echo"}}
	withContext := &host.Task{Session: host.Session{ID: "t-ctx", Protocol: normalizer.ProtocolE2A, Pool: "echo"}, ContextID: "ctx-1"}
	for _, tc := range []struct {
		name, body, context string
		newContext          bool
	}{
		{"new task naming a context", `{"task_id":"t-new","context_id":"ctx-9","params":{}}`, "ctx-9", true},
		{"new task naming none", `{"task_id":"t-new","params":{}}`, "", false},
		{"task without context, naming one", `{"task_id":"t-e2a","context_id":"ctx-3","params":{}}`, "ctx-3", true},
		{"task without context, naming none", `{"task_id":"t-e2a","params":{}}`, "", false},
		{"task with context, naming it", `{"task_id":"t-ctx","context_id":"ctx-1","params":{}}`, "ctx-1", false},
		{"task with context, naming none", `{"task_id":"t-ctx","params":{}}`, "ctx-1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &turnHost{testHost: newHost(nil), records: map[string]*host.Task{"task:t-e2a": noContext, "task:t-ctx": withContext}}
			rec := httptest.NewRecorder()
			e2aproto.NewHandler(h).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/requests?agent=echo", strings.NewReader(tc.body)))
			if rec.Code != http.StatusAccepted || h.turn == nil {
				t.Fatalf("%d %s, turn %+v; want 202 and a turn", rec.Code, rec.Body, h.turn)
			}
			if h.turn.NewContext != tc.newContext || h.turn.Task.ContextID != tc.context {
				t.Fatalf("turn %+v; want its task's context %q, NewContext %v", h.turn, tc.context, tc.newContext)
			}
			if noContext.ContextID != "" {
				t.Fatalf("the record as read was changed: %+v", noContext)
			}
		})
	}
}
