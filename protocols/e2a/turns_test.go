package e2a_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// turnHost is a testHost whose caller has the task and session records
// of host.TurnRecords: records by "task:<id>" or "session:<id>" (the
// caller's), others' ids refused as another principal's; the last
// submission's turn is kept.
type turnHost struct {
	*testHost
	records  map[string]*host.Task
	others   map[string]bool
	terminal bool
	turn     *host.Turn
}

func (h *turnHost) Admit(w http.ResponseWriter, r *http.Request, protocol string, refuse host.Refuse) (host.Caller, bool) {
	c, ok := h.testHost.Admit(w, r, protocol, refuse)
	if !ok {
		return nil, false
	}
	return turnCaller{Caller: c, h: h}, true
}

type turnCaller struct {
	host.Caller
	h *turnHost
}

var _ host.TurnRecords = turnCaller{}

func (c turnCaller) Record(_ context.Context, id string, session bool) (*host.Task, error) {
	key := "task:" + id
	if session {
		key = "session:" + id
	}
	if c.h.others[key] {
		return nil, host.ErrConflict
	}
	return c.h.records[key], nil
}

func (c turnCaller) CheckTaskOpen(context.Context, *host.Task) error {
	if c.h.terminal {
		return host.ErrTaskTerminal
	}
	return nil
}

func (c turnCaller) Submit(ctx context.Context, s host.Submission) (*host.Submitted, error) {
	c.h.turn = s.Turn
	return c.Caller.Submit(ctx, s)
}

// A request naming a task or an ACP session is a turn of it: a task the
// caller has (joining its context when the request names none), a new
// task for an id nobody has; another principal's task or session is 409
// conflict, a finished A2A task 409 task_terminal, with nothing
// published; a session_id naming no ACP session is no turn.
func TestFrontDoorTurns(t *testing.T) {
	a2aTask := &host.Task{Session: host.Session{ID: "t-a2a", Protocol: normalizer.ProtocolA2A, Pool: "echo", RequestIDs: []string{"t-a2a", "r-held"}}, ContextID: "ctx-1"}
	e2aTask := &host.Task{Session: host.Session{ID: "t-e2a", Protocol: normalizer.ProtocolE2A, Pool: "echo"}}
	acpSession := &host.Task{Session: host.Session{ID: "s-acp", Protocol: normalizer.ProtocolACP, Pool: "echo"}}
	for _, tc := range []struct {
		name, body string
		terminal   bool
		publishErr error
		status     int
		code       string
		// want is the turn's record id and whether it is a session's ("":
		// no turn).
		want    string
		session bool
		context string
	}{
		{name: "new task", body: `{"task_id":"t-new","params":{}}`, status: 202, want: "t-new"},
		{name: "own A2A task", body: `{"task_id":"t-a2a","params":{}}`, status: 202, want: "t-a2a", context: "ctx-1"},
		{name: "own task, its own context", body: `{"task_id":"t-a2a","context_id":"ctx-1","params":{}}`, status: 202, want: "t-a2a", context: "ctx-1"},
		// A turn of an existing task runs in the task's context: another
		// one is refused, as the A2A doors refuse it (-32602).
		{name: "own task, another context", body: `{"task_id":"t-a2a","context_id":"ctx-2","params":{}}`, status: 400, code: e2aproto.CodeInvalidRequest},
		{name: "own task, another context, a request it does not hold", body: `{"request_id":"r-1","task_id":"t-a2a","context_id":"ctx-2","params":{}}`, status: 400, code: e2aproto.CodeInvalidRequest},
		// The retry of a turn the task holds already (accepted before
		// this check) is Submit's to answer, as the duplicate it is.
		{name: "own task, another context, a retry it holds", body: `{"request_id":"r-held","task_id":"t-a2a","context_id":"ctx-2","params":{}}`, status: 202, want: "t-a2a", context: "ctx-2"},
		{name: "own E2A task recording no context", body: `{"task_id":"t-e2a","context_id":"ctx-3","params":{}}`, status: 202, want: "t-e2a", context: "ctx-3"},
		{name: "new task, any context", body: `{"task_id":"t-new","context_id":"ctx-9","params":{}}`, status: 202, want: "t-new", context: "ctx-9"},
		{name: "another's task", body: `{"task_id":"t-other","params":{}}`, status: 409, code: e2aproto.CodeConflict},
		{name: "finished A2A task", body: `{"task_id":"t-a2a","params":{}}`, terminal: true, status: 409, code: e2aproto.CodeTaskTerminal},
		{name: "another's task made meanwhile", body: `{"task_id":"t-new","params":{}}`, publishErr: host.ErrSessionNotFound, status: 409, code: e2aproto.CodeConflict},
		{name: "own ACP session", body: `{"session_id":"s-acp","params":{}}`, status: 202, want: "s-acp", session: true},
		{name: "another's ACP session", body: `{"session_id":"s-other","params":{}}`, status: 409, code: e2aproto.CodeConflict},
		{name: "another's ACP session beside a task", body: `{"task_id":"t-new","session_id":"s-other","params":{}}`, status: 409, code: e2aproto.CodeConflict},
		{name: "E2A session label", body: `{"session_id":"s-label","params":{}}`, status: 202},
		{name: "task and own session", body: `{"task_id":"t-new","session_id":"s-acp","params":{}}`, status: 202, want: "t-new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := newHost(func(h *conformance.Host) { h.PublishErr = tc.publishErr })
			h := &turnHost{testHost: th, terminal: tc.terminal,
				records: map[string]*host.Task{"task:t-a2a": a2aTask, "task:t-e2a": e2aTask, "session:s-acp": acpSession},
				others:  map[string]bool{"task:t-other": true, "session:s-other": true}}
			rec := httptest.NewRecorder()
			e2aproto.NewHandler(h).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/requests?agent=echo", strings.NewReader(tc.body)))
			if rec.Code != tc.status {
				t.Fatalf("%d %s; want %d", rec.Code, rec.Body, tc.status)
			}
			if tc.code != "" {
				if e := errorOf(t, rec); e.Code != tc.code || e.Retryable || strings.Contains(e.Message, "-other") {
					t.Fatalf("error %+v; want %s, not retryable, naming nothing of the record", e, tc.code)
				} else if tc.code == e2aproto.CodeInvalidRequest && (!strings.Contains(e.Message, "context_id") || !strings.Contains(e.Message, "task_id") ||
					strings.Contains(e.Message, "ctx-1")) {
					t.Fatalf("error %+v; want it to name context_id and task_id by their roles, not the task's context", e)
				}
				if n := len(th.Published()); n != 0 {
					t.Fatalf("%d published; want none", n)
				}
				return
			}
			switch {
			case tc.want == "" && h.turn != nil:
				t.Fatalf("turn %+v; want none", h.turn)
			case tc.want == "":
				return
			case h.turn == nil || h.turn.Task.ID != tc.want || h.turn.Session != tc.session || h.turn.Created:
				t.Fatalf("turn %+v; want one of %s (session %v)", h.turn, tc.want, tc.session)
			}
			if tc.want == "t-new" && (h.turn.Task.Protocol != normalizer.ProtocolE2A || h.turn.Task.Pool != "echo") {
				t.Fatalf("a new task's turn %+v; want protocol e2a, pool echo", h.turn)
			}
			if env := th.Published()[0]; env.ContextID != tc.context {
				t.Fatalf("context %q; want %q", env.ContextID, tc.context)
			}
		})
	}
}
