package ingress_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// taskCalls are A2A calls to a pipeline by API key: v0.3 JSON-RPC at
// /a2a, an Idempotency-Key when idem is set, and v1.0 JSON-RPC at
// /a2a/v1.
type taskCalls struct {
	t *testing.T
	p *pipeline
}

func (c taskCalls) call(path, key, idem, body string) string {
	c.t.Helper()
	hdr := []string{"X-Api-Key", key, "A2A-Version", "1.0"}
	if idem != "" {
		hdr = append(hdr, "Idempotency-Key", idem)
	}
	_, b := testkit.Do(c.t, http.MethodPost, c.p.url+path, body, hdr...)
	return string(b)
}

// send is message/send of text (to the task taskID when set), paced by
// the demo agent's metadata (one frame when ""), non-blocking if asked.
func (c taskCalls) send(key, idem, taskID, text, metadata string, blocking bool) string {
	c.t.Helper()
	task, config := "", ""
	if taskID != "" {
		task = `"taskId":"` + taskID + `",`
	}
	if !blocking {
		config = `,"configuration":{"blocking":false}`
	}
	return c.call("/a2a", key, idem, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{`+task+
		`"kind":"message","role":"user","messageId":"m-`+text[:5]+`","parts":[{"kind":"text","text":"`+text+`"}],"metadata":`+
		cmp.Or(metadata, `{"frames":1}`)+`}`+config+`}}`)
}

// task is a v0.3 call naming the task id (tasks/get, tasks/cancel,
// tasks/resubscribe).
func (c taskCalls) task(key, method, id string) string {
	c.t.Helper()
	return c.call("/a2a", key, "", `{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":{"id":"`+id+`"}}`)
}

// v1 is an A2A v1.0 JSON-RPC call.
func (c taskCalls) v1(key, method, params string) string {
	c.t.Helper()
	return c.call("/a2a/v1", key, "", `{"jsonrpc":"2.0","id":3,"method":"`+method+`","params":`+params+`}`)
}

// bobTakesOver is a day later: the hot streams dropped alice's requests
// (and the dedupe window passed), and bob's request, a new task named by
// his Idempotency-Key id, is stored under id and runs (its second frame a
// minute away).
func (c taskCalls) bobTakesOver(id, text string) {
	c.t.Helper()
	awaitDedupeWindowPassed(c.t, c.p)
	natstest.Purge(c.t, c.p.js, streams.RequestsStream, streams.ResponsesStream)
	if b := c.send(bobKey, id, "", text, `{"frames":2,"delay_ms":60000}`, false); !strings.Contains(b, `"id":"`+id+`"`) {
		c.t.Fatalf("bob's message/send under the id %s of alice's: %.600s", id, b)
	}
	testkit.Eventually(c.t, 10*time.Second, "bob's task working", func() bool {
		return strings.Contains(c.task(bobKey, "tasks/get", id), `"working"`)
	})
}

// bobsRequestUntouched checks, after alice's cancel (named by call), that
// no cancel of bob's request id is stored and that bob reads his task
// still working, then cancels it.
func (c taskCalls) bobsRequestUntouched(id, text, call string) {
	c.t.Helper()
	ctl, _ := subjects.Control(id)
	if _, err := streams.LastBySubject(context.Background(), c.p.nc, streams.ControlStream, ctl); !errors.Is(err, streams.ErrNoMessages) {
		c.t.Errorf("a cancel of bob's request is stored after alice's %s (%v)", call, err)
	}
	if b := c.task(bobKey, "tasks/get", id); !strings.Contains(b, text) || !strings.Contains(b, `"working"`) {
		c.t.Errorf("bob's tasks/get of his task: %.600s", b)
	}
	if b := c.task(bobKey, "tasks/cancel", id); !strings.Contains(b, `"canceled"`) {
		c.t.Errorf("bob's tasks/cancel of his task: %.600s", b)
	}
}

// TestTaskRecordOutlivesItsRequests: a task id the client chose (the
// Idempotency-Key of its first turn) stays taken while E2A_TASKS holds the
// task's record (from its second turn, TasksTTL after its last), after
// its requests left the hot streams (24 h): another principal's first
// turn under that id is a conflict revealing nothing, nothing of it is
// published, and the owner's reads of the task never meet it.
func TestTaskRecordOutlivesItsRequests(t *testing.T) {
	p := pastDedupePipeline(t)
	c := taskCalls{t: t, p: p}
	const id = "task-key-record"
	if b := c.send(testKey, id, "", "ask:input alice-topic", "", true); !strings.Contains(b, "input-required") {
		t.Fatalf("alice's first turn: %.600s", b)
	}
	if b := c.send(testKey, "", id, "alice-answer", "", true); !strings.Contains(b, `"completed"`) {
		t.Fatalf("alice's answer: %.600s", b)
	}
	// 24 h later: her requests and frames aged out, her task's record did not.
	awaitDedupeWindowPassed(t, p)
	natstest.Purge(t, p.js, streams.RequestsStream, streams.ResponsesStream)

	if b := c.send(bobKey, id, "", "bob-secret-text", "", true); !strings.Contains(b, `"conflict":true`) || strings.Contains(b, "alice") {
		t.Errorf("bob's message/send with the id of alice's recorded task: %.400s, want the conflict (the id is alice's task's)", b)
	}
	if n := requestMessages(t, p, id); n != 0 {
		t.Errorf("E2A_REQUESTS holds %d requests of the refused id", n)
	}
	for _, key := range []string{testKey, bobKey} {
		if g := c.task(key, "tasks/get", id); strings.Contains(g, "bob-secret-text") || !strings.Contains(g, "error") {
			t.Errorf("tasks/get of the id: %.600s", g)
		}
	}
}

// TestTaskRecordKeepsOutAnotherPrincipalsRequest: a task's record names
// its requests by id and outlives them in the hot streams; once they
// dropped one, another principal may store a request under its id (bob's
// new task, named by the Idempotency-Key alice gave her answer). That
// request is none of the task's (host.Session.Owns: its envelope names
// bob): alice's tasks/get, v1.0 GetTask and ListTasks leave it out (no
// request of hers is left: not found), tasks/resubscribe does not follow
// it and tasks/cancel does not cancel it (no cancel is stored for it),
// while bob reads and cancels his task.
func TestTaskRecordKeepsOutAnotherPrincipalsRequest(t *testing.T) {
	p := pastDedupePipeline(t)
	c := taskCalls{t: t, p: p}
	const taskID, answerID, secret = "task-kept-apart", "answer-kept-apart", "bob-secret-text"
	if b := c.send(testKey, taskID, "", "ask:input alice-topic", "", true); !strings.Contains(b, "input-required") {
		t.Fatalf("alice's first turn: %.600s", b)
	}
	if b := c.send(testKey, answerID, taskID, "alice-answer", "", true); !strings.Contains(b, `"completed"`) {
		t.Fatalf("alice's answer: %.600s", b)
	}
	c.bobTakesOver(answerID, secret)
	// (The cancel before the resubscription: were bob's request followed,
	// it would end first.)
	for _, call := range []struct{ name, answer string }{
		{"tasks/get", c.task(testKey, "tasks/get", taskID)},
		{"GetTask", c.v1(testKey, "GetTask", `{"id":"`+taskID+`"}`)},
		{"tasks/cancel", c.task(testKey, "tasks/cancel", taskID)},
		{"tasks/resubscribe", c.task(testKey, "tasks/resubscribe", taskID)},
	} {
		if strings.Contains(call.answer, secret) || !strings.Contains(call.answer, "not found") {
			t.Errorf("alice's %s of her task: %.600s, want not found (none of her requests is left)", call.name, call.answer)
		}
	}
	if b := c.v1(testKey, "ListTasks", `{}`); strings.Contains(b, secret) || strings.Contains(b, answerID) {
		t.Errorf("alice's ListTasks: %.600s", b)
	}
	c.bobsRequestUntouched(answerID, secret, "tasks/cancel")
}

// TestSessionRecordKeepsOutAnotherPrincipalsRequest is
// TestTaskRecordKeepsOutAnotherPrincipalsRequest for an ACP session: bob's
// request, stored under the id alice gave a prompt of her session (its
// Idempotency-Key) once the hot streams dropped it, is neither replayed
// by her session/load nor cancelled by her session/cancel.
func TestSessionRecordKeepsOutAnotherPrincipalsRequest(t *testing.T) {
	p := pastDedupePipeline(t)
	c := taskCalls{t: t, p: p}
	const promptID, secret = "prompt-kept-apart", "bob-secret-text"
	var created struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if b := c.call("/acp", testKey, "", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`); json.Unmarshal([]byte(b), &created) != nil || created.Result.SessionID == "" {
		t.Fatalf("alice's session/new: %.600s", b)
	}
	sid := created.Result.SessionID
	if b := c.call("/acp", testKey, promptID, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+sid+
		`","prompt":[{"type":"text","text":"alice-prompt"}]}}`); !strings.Contains(b, "end_turn") {
		t.Fatalf("alice's session/prompt: %.600s", b)
	}
	c.bobTakesOver(promptID, secret)
	if b := c.call("/acp", testKey, "", `{"jsonrpc":"2.0","id":3,"method":"session/cancel","params":{"sessionId":"`+sid+`"}}`); strings.Contains(b, "error") {
		t.Errorf("alice's session/cancel: %.600s", b)
	}
	if b := c.call("/acp", testKey, "", `{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":"`+sid+
		`","cwd":"/tmp","mcpServers":[]}}`); strings.Contains(b, secret) {
		t.Errorf("alice's session/load replays bob's request: %.600s", b)
	}
	c.bobsRequestUntouched(promptID, secret, "session/cancel")
}

// TestChosenTaskIDClaimedOnce: alice's new A2A task named by her
// Idempotency-Key, and bob's E2A request naming the same id as its
// task_id, at the same moment (bob's sent once alice's first turn claimed
// the id and before its publish): one of them takes the id. Alice's turn
// was checked against the task records, then published, and bob's record
// of the id made between the two: both were accepted, and bob's record
// hid alice's task from her (tasks/get not found, her answer to its
// question refused).
func TestChosenTaskIDClaimedOnce(t *testing.T) {
	p := startPipelineWith(t, ingress.WithAuth(aliceAndBob(t)))
	c := taskCalls{t: t, p: p}
	const id = "chosen-task-raced"
	var bobCode atomic.Int32
	var once sync.Once
	ingress.SetAppendedHook(p.in, func(kind, task, requestID string) {
		if kind != ingress.KindTask || task != id || requestID != id {
			return
		}
		once.Do(func() {
			resp, b := testkit.Do(t, http.MethodPost, p.url+"/v1/requests",
				`{"request_id":"bob-raced","task_id":"`+id+`","params":{"text":"bob's"}}`, "X-Api-Key", bobKey)
			bobCode.Store(int32(resp.StatusCode))
			if resp.StatusCode < 400 || strings.Contains(string(b), "alice") {
				t.Errorf("bob's E2A request naming %s as alice's first turn claims it: %d %s; want it refused, saying nothing of hers",
					id, resp.StatusCode, b)
			}
		})
	})
	t.Cleanup(func() { ingress.SetAppendedHook(p.in, nil) })
	if b := c.send(testKey, id, "", "ask:input alice-topic", "", true); !strings.Contains(b, "input-required") {
		t.Fatalf("alice's first turn: %.600s", b)
	}
	if bobCode.Load() == 0 {
		t.Fatal("bob's request was not sent between alice's claim of the id and her publish")
	}
	if n := requestMessages(t, p, "bob-raced"); n != 0 {
		t.Errorf("E2A_REQUESTS holds %d requests of bob's refused request", n)
	}
	if g := c.task(testKey, "tasks/get", id); !strings.Contains(g, "input-required") || strings.Contains(g, "bob's") {
		t.Errorf("alice's tasks/get of her task: %.600s", g)
	}
	if b := c.send(testKey, "", id, "alice-answer", "", true); !strings.Contains(b, `"completed"`) {
		t.Errorf("alice's answer: %.600s", b)
	}
}

// TestChosenTaskIDOfOwnTaskConflict: a new A2A task under an
// Idempotency-Key that names another task of the caller's (an E2A
// task_id, whose record lists its turns) is the conflict of an id in use,
// nothing recorded or published: its first turn was appended to that
// task's record, a turn of an E2A task answered as an A2A task's first.
// The retry of a new task's first turn (the same key again) is still its
// duplicate, the same task.
func TestChosenTaskIDOfOwnTaskConflict(t *testing.T) {
	p := startPipelineWith(t, ingress.WithAuth(aliceAndBob(t)))
	c := taskCalls{t: t, p: p}
	if resp, b := testkit.Do(t, http.MethodPost, p.url+"/v1/requests?wait=true", `{"task_id":"own-e2a-task","params":{"text":"e2a turn","frames":1}}`,
		"X-Api-Key", testKey); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's E2A task: %d %s", resp.StatusCode, b)
	}
	if b := c.send(testKey, "own-e2a-task", "", "a2a-first", "", true); !strings.Contains(b, `"conflict":true`) {
		t.Errorf("a new A2A task under the id of alice's E2A task: %.600s, want the conflict of an id in use", b)
	}
	if n := requestMessages(t, p, "own-e2a-task"); n != 0 {
		t.Errorf("E2A_REQUESTS holds %d requests under the E2A task's id", n)
	}
	first := c.send(testKey, "own-new-task", "", "first-turn", "", true)
	again := c.send(testKey, "own-new-task", "", "first-turn", "", true)
	if !strings.Contains(first, `"id":"own-new-task"`) || !strings.Contains(first, `"completed"`) || !strings.Contains(again, `"id":"own-new-task"`) {
		t.Errorf("a new task's first turn, then its retry: %.400s; %.400s", first, again)
	}
	if n := requestMessages(t, p, "own-new-task"); n != 1 {
		t.Errorf("E2A_REQUESTS holds %d requests of the new task's first turn and its retry, want 1", n)
	}
}
