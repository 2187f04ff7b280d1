package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// storedContext is the context_id of request id as E2A_REQUESTS holds it.
func storedContext(t *testing.T, p *pipetest.Pipeline, id string) string {
	t.Helper()
	subj, err := subjects.RequestAnyPool(id)
	if err != nil {
		t.Fatal(err)
	}
	m, err := streams.LastBySubject(context.Background(), p.NC, streams.RequestsStream, subj)
	if err != nil {
		t.Fatalf("request %s: %v", id, err)
	}
	env, err := e2a.FromJSON(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return env.ContextID
}

// TestE2ATaskKeepsItsFirstTurnsContext: a task E2A itself started records
// no context (its context_id was claimed by each turn instead), so a later
// turn naming another context_id was taken and ran there (a bridged A2A
// upstream got a new upstream task, an HTTP agent no history). The first
// turn's context is the task's: a later turn naming another is refused 400
// invalid_request with nothing published, as a turn of an A2A task is
// (60ded18b); one naming none joins it. A task whose first turn named no
// context takes the context its next turn names (claimed as the caller's),
// and is then held to it.
func TestE2ATaskKeepsItsFirstTurnsContext(t *testing.T) {
	p := pipetest.Start(t)
	p.Pool(demo.Pool, demo.New())
	post := func(body string) (int, []byte) {
		t.Helper()
		resp, b := testkit.Do(t, http.MethodPost, p.URL+"/v1/requests?wait=true", body)
		return resp.StatusCode, b
	}
	ok := func(what, body string) {
		t.Helper()
		if status, b := post(body); status != http.StatusOK {
			t.Fatalf("%s: %d %s", what, status, b)
		}
	}
	refused := func(what, requestID, body string) {
		t.Helper()
		status, b := post(body)
		if status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s; want 400 %s, the task's context being another", what, status, b, e2aproto.CodeInvalidRequest)
		}
		if e := e2aError(t, b); e.Code != e2aproto.CodeInvalidRequest || e.Retryable || !strings.Contains(e.Message, "context_id") {
			t.Fatalf("%s: refusal %+v", what, e)
		}
		checkNotPublished(t, p.NC, requestID)
	}
	ok("a new E2A task in its context", `{"request_id":"kc-1","task_id":"kc-task","context_id":"kc-ctx","params":{"text":"x","frames":1}}`)
	refused("a later turn naming another context", "kc-2",
		`{"request_id":"kc-2","task_id":"kc-task","context_id":"kc-other","params":{"text":"x","frames":1}}`)
	ok("a later turn naming none", `{"request_id":"kc-3","task_id":"kc-task","params":{"text":"x","frames":1}}`)
	if c := storedContext(t, p, "kc-3"); c != "kc-ctx" {
		t.Fatalf("the turn naming no context ran in %q; want the task's, kc-ctx", c)
	}
	ok("a later turn naming the task's context", `{"request_id":"kc-4","task_id":"kc-task","context_id":"kc-ctx","params":{"text":"x","frames":1}}`)

	ok("a new E2A task naming no context", `{"request_id":"kn-1","task_id":"kn-task","params":{"text":"x","frames":1}}`)
	ok("its next turn naming one", `{"request_id":"kn-2","task_id":"kn-task","context_id":"kn-ctx","params":{"text":"x","frames":1}}`)
	refused("a turn after it naming another", "kn-3",
		`{"request_id":"kn-3","task_id":"kn-task","context_id":"kn-other","params":{"text":"x","frames":1}}`)
	ok("a turn after it naming none", `{"request_id":"kn-4","task_id":"kn-task","params":{"text":"x","frames":1}}`)
	if c := storedContext(t, p, "kn-4"); c != "kn-ctx" {
		t.Fatalf("the turn naming no context ran in %q; want the one the task took, kn-ctx", c)
	}
}

// TestTurnThroughAnotherPoolsDoorRefused: a turn of a task held by pool
// demo sent through pool other's door (its path, ?agent=other, its A2A
// endpoints, its ACP endpoint) went to pool other, whose agent never saw
// the task and got none of its history (a bridge reads its own pool's
// record). It is refused before anything is published, each door in its
// own shape (E2A 409 conflict naming the task's pool, JSON-RPC -32602);
// a door naming no pool still sends it to the task's pool, and so does
// the task's own pool's door.
func TestTurnThroughAnotherPoolsDoorRefused(t *testing.T) {
	p := pipetest.Start(t)
	p.Pool(demo.Pool, demo.New())
	p.Pool("other", demo.New())
	e2aTurn := func(path, requestID string) (int, []byte) {
		t.Helper()
		resp, b := testkit.Do(t, http.MethodPost, p.URL+path,
			fmt.Sprintf(`{"request_id":%q,"task_id":"po-task","params":{"text":"x","frames":1}}`, requestID))
		return resp.StatusCode, b
	}
	if status, b := e2aTurn("/pools/demo/v1/requests?wait=true", "po-1"); status != http.StatusOK {
		t.Fatalf("the task's first turn: %d %s", status, b)
	}
	for _, c := range []struct{ name, path, id string }{
		{"the other pool's path", "/pools/other/v1/requests", "po-2"},
		{"?agent=other", "/v1/requests?agent=other", "po-3"},
	} {
		status, b := e2aTurn(c.path, c.id)
		if status != http.StatusConflict {
			t.Fatalf("%s: a turn of demo's task: %d %s; want 409 %s", c.name, status, b, e2aproto.CodeConflict)
		}
		if e := e2aError(t, b); e.Code != e2aproto.CodeConflict || e.Retryable || !strings.Contains(e.Message, `"demo"`) {
			t.Fatalf("%s: refusal %+v; want conflict, not retryable, naming the task's pool", c.name, e)
		}
		checkNotPublished(t, p.NC, c.id)
	}
	for _, c := range []struct{ name, path, id string }{
		{"no pool", "/v1/requests", "po-4"},
		{"the task's pool", "/v1/requests?agent=demo", "po-5"},
	} {
		status, b := e2aTurn(c.path, c.id)
		var acc struct{ Pool string }
		if status != http.StatusAccepted || json.Unmarshal(b, &acc) != nil || acc.Pool != demo.Pool {
			t.Fatalf("%s: %d %s; want 202 to pool demo", c.name, status, b)
		}
	}

	// A2A v0.3: a task of demo's asking for input, answered through the
	// other pool's endpoint, then through the pipeline's own.
	_, b := testkit.Do(t, http.MethodPost, p.URL+"/pools/demo/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{`+
		`"kind":"message","role":"user","messageId":"po-a2a-1","parts":[{"kind":"text","text":"the weather"}],"metadata":{"ask":"input"}}}}`)
	var task struct {
		Result struct {
			ID        string `json:"id"`
			ContextID string `json:"contextId"`
			Status    struct{ State string }
		}
	}
	if err := json.Unmarshal(b, &task); err != nil || task.Result.Status.State != "input-required" {
		t.Fatalf("A2A task asking for input: %s", b)
	}
	answer := func(path, messageID string) string {
		_, b := testkit.Do(t, http.MethodPost, p.URL+path, `{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"taskId":"`+
			task.Result.ID+`","contextId":"`+task.Result.ContextID+`","kind":"message","role":"user","messageId":"`+messageID+
			`","parts":[{"kind":"text","text":"Paris"}]}}}`)
		return string(b)
	}
	if b := answer("/pools/other/a2a", "po-a2a-2"); !strings.Contains(b, "-32602") || !strings.Contains(b, `\"demo\"`) {
		t.Fatalf("A2A v0.3 answer through pool other: %s; want -32602 naming the task's pool", b)
	}
	resp, vb := testkit.Do(t, http.MethodPost, p.URL+"/pools/other/a2a/v1", `{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"taskId":"`+
		task.Result.ID+`","contextId":"`+task.Result.ContextID+`","role":"ROLE_USER","messageId":"po-a2a-3","parts":[{"text":"Paris"}]}}}`,
		"A2A-Version", "1.0")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(vb), "-32602") {
		t.Fatalf("A2A v1.0 answer through pool other: %d %s; want -32602", resp.StatusCode, vb)
	}
	if b := answer("/a2a", "po-a2a-4"); strings.Contains(b, `"error"`) {
		t.Fatalf("A2A v0.3 answer through the pipeline's own endpoint: %s; want it taken (to demo)", b)
	}

	// AgentVault: a task of demo's continued through the other pool.
	av := avSend(t, p.URL+"/pools/demo", "hello", "")
	avAwaitState(t, p.URL, av, "COMPLETED")
	_, b = avPost(t, p.URL+"/pools/other", `{"jsonrpc":"2.0","id":"c","method":"tasks/send","params":{"id":"`+av+
		`","message":{"role":"user","parts":[{"type":"text","content":"again"}]}}}`)
	if !strings.Contains(string(b), "-32602") {
		t.Fatalf("AgentVault tasks/send continuing demo's task through pool other: %s; want -32602", b)
	}

	// ACP: a session prompted through demo's endpoint, then through the
	// other pool's. session/new runs no agent: the session's first prompt
	// makes its pool the session's, whichever endpoint made it.
	_, b = testkit.Do(t, http.MethodPost, p.URL+"/pools/other/acp", `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	var sess struct{ Result struct{ SessionID string } }
	if err := json.Unmarshal(b, &sess); err != nil || sess.Result.SessionID == "" {
		t.Fatalf("session/new: %s", b)
	}
	prompt := func(path string) string {
		_, b := testkit.Do(t, http.MethodPost, p.URL+path, `{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"`+
			sess.Result.SessionID+`","prompt":[{"type":"text","text":"hi"}]}}`)
		return string(b)
	}
	if b := prompt("/pools/demo/acp"); strings.Contains(b, `"error"`) {
		t.Fatalf("the session's first prompt, through demo's endpoint: %s", b)
	}
	if b := prompt("/pools/other/acp"); !strings.Contains(b, "-32602") || !strings.Contains(b, `\"demo\"`) {
		t.Fatalf("ACP session/prompt of demo's session through pool other: %s; want -32602 naming the session's pool", b)
	}
	if b := prompt("/pools/demo/acp"); strings.Contains(b, `"error"`) {
		t.Fatalf("a later prompt through demo's endpoint: %s", b)
	}
}
