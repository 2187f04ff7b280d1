package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// interruptedStream reads an a2a-go v0.3 message/stream or
// tasks/resubscribe to its end and checks that it ends with a final
// status-update in state carrying want as the agent's message; it returns
// that event.
func interruptedStream(t *testing.T, events func(yield func(a2a.Event, error) bool), state a2a.TaskState, want string) *a2a.TaskStatusUpdateEvent {
	t.Helper()
	var last a2a.Event
	for ev, err := range events {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		last = ev
	}
	su, ok := last.(*a2a.TaskStatusUpdateEvent)
	if !ok || !su.Final || su.Status.State != state || su.Status.Message == nil {
		t.Fatalf("last event %T %+v, want a final %s status-update with a message", last, last, state)
	}
	m := su.Status.Message
	if got := textOf(m.Parts); got != want || m.Role != a2a.MessageRoleAgent || m.ID == "" || m.TaskID != su.TaskID || m.ContextID != su.ContextID {
		t.Fatalf("status message %+v (text %q), want the agent's %q in task %s", m, got, want, su.TaskID)
	}
	return su
}

// answerFor returns the user's answer to a question of task t.
func answerFor(taskID a2a.TaskID, contextID, text string) *a2a.MessageSendParams {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})
	m.TaskID, m.ContextID = taskID, contextID
	return &a2a.MessageSendParams{Message: m}
}

// completedWith checks a message/send result: the task, completed, in the
// same context, its artifacts saying "You said: <answer>".
func completedWith(t *testing.T, res a2a.SendMessageResult, taskID a2a.TaskID, contextID, answer string) {
	t.Helper()
	task, ok := res.(*a2a.Task)
	if !ok || task.ID != taskID || task.ContextID != contextID || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("continuation result %T %+v, want task %s of context %s completed", res, res, taskID, contextID)
	}
	var reply string
	for _, a := range task.Artifacts {
		reply += textOf(a.Parts)
	}
	if reply != "You said: "+answer {
		t.Fatalf("continuation reply %q", reply)
	}
}

// TestInterruptA2AV03: with the a2a-go v0.3 client, a turn that asks for
// input ends the stream (or message/send) with the task input-required
// and the agent's question; tasks/get and tasks/resubscribe show it; the
// answer, sent with the same taskId, is a new turn of the same task and
// context that completes; tasks/get then holds both turns. The same for
// auth-required, asked through the message metadata. A completed task
// still refuses a message (-32004).
func TestInterruptA2AV03(t *testing.T) {
	p := startPipeline(t)
	_, c := a2aClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Streaming question, non-streaming answer.
	q := demo.Question(e2a.StateInputRequired, "the weather")
	su := interruptedStream(t, c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser,
		a2a.TextPart{Text: "ask:input the weather"})}), a2a.TaskStateInputRequired, q)
	task, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: su.TaskID})
	if err != nil || task.Status.State != a2a.TaskStateInputRequired || task.Status.Message == nil || textOf(task.Status.Message.Parts) != q {
		t.Fatalf("tasks/get of the interrupted task: %+v %v", task, err)
	}
	interruptedStream(t, c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: su.TaskID}), a2a.TaskStateInputRequired, q)
	res, err := c.SendMessage(ctx, answerFor(su.TaskID, "", "Paris"))
	if err != nil {
		t.Fatalf("the answer: %v", err)
	}
	completedWith(t, res, su.TaskID, su.ContextID, "Paris")
	task, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: su.TaskID})
	if err != nil || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("tasks/get after the answer: %+v %v", task, err)
	}
	var history []string
	for _, m := range task.History {
		if s := textOf(m.Parts); s != "" {
			history = append(history, string(m.Role)+": "+s)
		}
	}
	want := []string{"user: ask:input the weather", "agent: I need more from you first.", "agent: " + q, "user: Paris"}
	if strings.Join(history, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history\n%s\nwant\n%s", strings.Join(history, "\n"), strings.Join(want, "\n"))
	}
	// The agent got the answer as a turn of the task.
	checkTurnEnvelopes(t, p, string(su.TaskID), su.ContextID, 2)

	// A completed task takes no more messages.
	_, err = c.SendMessage(ctx, answerFor(su.TaskID, su.ContextID, "again"))
	if !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Fatalf("a message to the completed task: %v, want UnsupportedOperation", err)
	}

	// Non-streaming question (auth-required, asked by metadata), streaming
	// answer.
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "the calendar"})
	m.Metadata = map[string]any{"ask": "auth"}
	res, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: m})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	aq := demo.Question(e2a.StateAuthRequired, "the calendar")
	if !ok || task.Status.State != a2a.TaskStateAuthRequired || task.Status.Message == nil || textOf(task.Status.Message.Parts) != aq {
		t.Fatalf("message/send asking for auth: %T %+v", res, res)
	}
	var last a2a.Event
	for ev, err := range c.SendStreamingMessage(ctx, answerFor(task.ID, task.ContextID, "approved")) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if su, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || su.Status.State != a2a.TaskStateCompleted || su.TaskID != task.ID || su.ContextID != task.ContextID {
		t.Fatalf("the streamed answer ends %T %+v", last, last)
	}
	task, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("tasks/get after the streamed answer: %+v %v", task, err)
	}
}

// checkTurnEnvelopes checks that task taskID has n turns, the requests
// recorded on it, each of whose envelope names the task and its context
// (the agent received the answer as a turn of the task).
func checkTurnEnvelopes(t *testing.T, p *pipeline, taskID, contextID string, n int) {
	t.Helper()
	store, err := ingress.NewTaskStore(context.Background(), p.js)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Get(context.Background(), ingress.KindTask, taskID)
	if err != nil || len(rec.RequestIDs) != n {
		t.Fatalf("task record %+v %v, want %d requests", rec, err, n)
	}
	for _, id := range rec.RequestIDs {
		var view struct {
			State    string
			Envelope e2a.Envelope
		}
		if err := jsonDecode(p.get(t, "/v1/requests/"+id+"?wait=true"), &view); err != nil {
			t.Fatal(err)
		}
		if view.Envelope.TaskID != taskID || view.Envelope.ContextID != contextID {
			t.Fatalf("request %s: envelope task %q context %q, want %q %q", id, view.Envelope.TaskID, view.Envelope.ContextID, taskID, contextID)
		}
	}
}

// TestInterruptAgentVault: tasks/sendSubscribe of a question ends with a
// task_status INPUT_REQUIRED carrying it; tasks/send with the task's id
// answers; tasks/get then lists both turns, COMPLETED.
func TestInterruptAgentVault(t *testing.T) {
	p := startPipeline(t)
	resp := p.post(t, "/a2a", "text/event-stream", `{"jsonrpc":"2.0","id":"av-1","method":"tasks/sendSubscribe","params":{"message":{"role":"user","parts":[{"type":"text","content":"ask:input the weather"}]}}}`)
	evs := readSSE(t, resp.Body)
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	var st struct {
		TaskID  string  `json:"taskId"`
		State   string  `json:"state"`
		Message *string `json:"message"`
	}
	last := evs[len(evs)-1]
	q := demo.Question(e2a.StateInputRequired, "the weather")
	if err := json.Unmarshal(last.data, &st); err != nil || last.event != "task_status" || st.State != "INPUT_REQUIRED" || st.Message == nil || *st.Message != q {
		t.Fatalf("last event %s %s", last.event, last.data)
	}
	resp = p.post(t, "/a2a", "", `{"jsonrpc":"2.0","id":"av-2","method":"tasks/send","params":{"id":"`+st.TaskID+`","message":{"role":"user","parts":[{"type":"text","content":"Paris"}]}}}`)
	var sent struct{ Result struct{ ID string } }
	if err := jsonDecode(resp, &sent); err != nil || sent.Result.ID != st.TaskID {
		t.Fatalf("tasks/send: %+v %v", sent, err)
	}
	var task struct {
		State    string
		Messages []struct {
			Role  string
			Parts []struct{ Content string }
		}
	}
	testkit.Eventually(t, 20*time.Second, "the AgentVault task completed", func() bool {
		r := p.post(t, "/a2a", "", `{"jsonrpc":"2.0","id":"av-3","method":"tasks/get","params":{"id":"`+st.TaskID+`"}}`)
		b, _ := io.ReadAll(r.Body)
		var out struct{ Result json.RawMessage }
		if json.Unmarshal(b, &out) != nil || json.Unmarshal(out.Result, &task) != nil {
			return false
		}
		return task.State == "COMPLETED"
	})
	var all []string
	for _, m := range task.Messages {
		for _, pt := range m.Parts {
			all = append(all, m.Role+": "+pt.Content)
		}
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{"user: ask:input the weather", "assistant: " + q, "user: Paris", "assistant: You said: Paris"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("tasks/get messages lack %q:\n%s", want, joined)
		}
	}
}
