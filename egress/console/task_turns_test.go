package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress/console"
)

// sendV1 sends an A2A v1.0 SendMessage (JSON-RPC binding) with text,
// continuing task when set, and returns the task's id and state.
func sendV1(t *testing.T, p *pipeline, text, task string) (id, state string) {
	t.Helper()
	msg := map[string]any{"role": "ROLE_USER", "messageId": "m-" + text, "parts": []any{map[string]any{"text": text}}}
	if task != "" {
		msg["taskId"] = task
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{"message": msg}})
	resp, b := p.do(t, "POST", "/a2a/v1", string(body), "A2A-Version", "1.0", "Content-Type", "application/json")
	var r struct {
		Result struct {
			Task struct {
				ID     string `json:"id"`
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"task"`
		} `json:"result"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.Result.Task.ID == "" {
		t.Fatalf("SendMessage %q: %d %s", text, resp.StatusCode, b)
	}
	return r.Result.Task.ID, r.Result.Task.Status.State
}

// TestInterruptedTurnAnswered: an A2A v1.0 turn that asks for input
// (the demo agent's ask:input) stays listed input-required, the turn's own
// outcome, and once the client has answered (the task's next turn ran and
// completed) its entry names that turn and the task's state (task_latest),
// in the list and in the request's detail; the answer's own entry, the
// task's newest turn, names none.
func TestInterruptedTurnAnswered(t *testing.T) {
	p := startPipeline(t, pipelineOptions{})
	ctx := context.Background()
	task, st := sendV1(t, p, "ask:input the weather", "")
	if st != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("first turn: %s", st)
	}
	if _, st := sendV1(t, p, "Paris", task); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("the answer: %s", st)
	}
	var turns []console.Entry
	waitFor(t, 20*time.Second, "both turns of the task listed final", func() bool {
		pg, err := p.con.List(ctx, console.Query{TaskID: task})
		if err != nil {
			t.Fatal(err)
		}
		turns = pg.Entries
		return len(turns) == 2 && turns[0].Status == console.StatusSucceeded && turns[1].Status == console.StatusInputRequired
	})
	asked, answer := turns[1], turns[0]
	for _, e := range turns {
		if e.Protocol != "a2a/v1.0" {
			t.Errorf("turn %s of an A2A v1.0 call listed as protocol %q, want a2a/v1.0", e.RequestID, e.Protocol)
		}
	}
	want := console.TaskTurn{RequestID: answer.RequestID, Status: console.StatusSucceeded}
	if asked.TaskLatest == nil || *asked.TaskLatest != want {
		t.Errorf("the answered turn's entry: task_latest %+v, want %+v", asked.TaskLatest, want)
	}
	if answer.TaskLatest != nil {
		t.Errorf("the task's newest turn names a later one: %+v", answer.TaskLatest)
	}
	resp, b := p.do(t, "GET", "/console/api/requests?status=input-required", "")
	pg := decode[console.Page](t, b)
	if resp.StatusCode != http.StatusOK || len(pg.Entries) != 1 || pg.Entries[0].TaskLatest == nil || *pg.Entries[0].TaskLatest != want {
		t.Errorf("GET /console/api/requests?status=input-required: %d %s; want the turn with task_latest %+v", resp.StatusCode, b, want)
	}
	resp, b = p.do(t, "GET", "/console/api/requests/"+asked.RequestID, "")
	d := decode[console.RequestDetail](t, b)
	if resp.StatusCode != http.StatusOK || d.Entry == nil || d.Entry.Status != console.StatusInputRequired ||
		d.Entry.TaskLatest == nil || *d.Entry.TaskLatest != want {
		t.Errorf("detail of the answered turn: %d %s; want input-required with task_latest %+v", resp.StatusCode, b, want)
	}
}

// TestInterruptedTurnOtherPrincipalsTask: a task's turns are its owner's
// (ingress refuses another principal's request naming the task); a
// request of another principal's on the same id that reached the stream
// anyway (a stage publishing on its own) is not the task's next turn: the
// interrupted entry names none, for its owner and for the audit role.
func TestInterruptedTurnOtherPrincipalsTask(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true})
	asked := p.submit(t, `{"task_id":"shared-id","params":{"text":"the weather","ask":"input"}}`, "X-Api-Key", keyAlice)
	waitFor(t, 20*time.Second, "alice's turn input-required", func() bool {
		e, err := p.con.Lookup(context.Background(), asked)
		return err == nil && e != nil && e.Status == console.StatusInputRequired
	})
	other := publishRequests(t, p.nc, "idle", 1, func(int) string {
		return `{"request_id":"bulk-0000","user_id":"bob","task_id":"shared-id","params":{}}`
	})
	waitIndexed(t, p, asked, other[0])
	for _, key := range []string{keyAlice, keyOps} {
		resp, b := p.do(t, "GET", "/console/api/requests/"+asked, "", "X-Api-Key", key)
		d := decode[console.RequestDetail](t, b)
		if resp.StatusCode != http.StatusOK || d.Entry == nil || d.Entry.Status != console.StatusInputRequired || d.Entry.TaskLatest != nil {
			t.Errorf("detail of alice's interrupted turn, as %s: %d %s; want input-required naming no later turn", key[:6], resp.StatusCode, b)
		}
	}
}
