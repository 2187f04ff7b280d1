package a2av1_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// askPipeline serves one pool, ask, whose agent thinks aloud (a reasoning
// chunk: a thought part, which a client without the interaction spec
// does not get) and then asks back (input-required): the blocking answer
// is the Task with its history.
func askPipeline(t *testing.T) *pipetest.Pipeline {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("ask")))
	p.Pool("ask", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaReasoning, "thinking"); err != nil {
			return err
		}
		return agent.Interrupt(w, e2a.StateInputRequired, "which one?")
	}))
	return p
}

// userMessageOf is the message of history whose messageId is id, as JSON
// (nil when history has none).
func userMessageOf(t *testing.T, history []map[string]any, id string) map[string]any {
	t.Helper()
	for _, m := range history {
		if m["messageId"] == id {
			return m
		}
	}
	return nil
}

// sameMessage reports where got, a history message, differs from sent,
// the message as the client sent it (the ids of its task and context
// aside).
func sameMessage(got, sent map[string]any) string {
	var diffs []string
	for _, k := range []string{"messageId", "role", "parts", "metadata", "extensions", "referenceTaskIds"} {
		if !reflect.DeepEqual(got[k], sent[k]) {
			g, _ := json.Marshal(got[k])
			s, _ := json.Marshal(sent[k])
			diffs = append(diffs, k+": got "+string(g)+", sent "+string(s))
		}
	}
	return strings.Join(diffs, "; ")
}

// TestUserMessageShownAsSent: the Message a client sends is part of the
// task's history as sent (A2A v1.0 §3.1.1, Task.history). A message of a
// data part, a text part with metadata, a URL part and another text part
// came back from GetTask (and the SendMessage answer's history) as
// [text "second\nfourth", url, data]: its text parts merged with "\n",
// its data part last, 4 parts 3, the text part's metadata gone.
func TestUserMessageShownAsSent(t *testing.T) {
	p := askPipeline(t)
	const sentMsg = `{"role":"ROLE_USER","messageId":"asis-1","metadata":{"trace":"t1"},"extensions":["https://example.com/ext"],` +
		`"parts":[{"data":{"first":1},"metadata":{"k":"d"}},{"text":"second","metadata":{"k":"t"}},` +
		`{"url":"https://x.example/third.json","mediaType":"application/json","filename":"third.json"},{"text":"fourth"}]}`
	var sent map[string]any
	if err := json.Unmarshal([]byte(sentMsg), &sent); err != nil {
		t.Fatal(err)
	}
	res, code, body := rpcCall(t, p, "SendMessage", `{"message":`+sentMsg+`}`)
	if code != 0 {
		t.Fatalf("SendMessage: %s", body)
	}
	var answer struct {
		Task struct {
			ID      string           `json:"id"`
			History []map[string]any `json:"history"`
		} `json:"task"`
	}
	if err := json.Unmarshal(res, &answer); err != nil || answer.Task.ID == "" {
		t.Fatalf("SendMessage answered %s (%v); want a task", body, err)
	}
	if m := userMessageOf(t, answer.Task.History, "asis-1"); m == nil {
		t.Errorf("the answer's history lacks the user message: %s", body)
	} else if d := sameMessage(m, sent); d != "" {
		t.Errorf("the answer's history shows the user message otherwise than sent: %s", d)
	}
	got, _, body := rpcCall(t, p, "GetTask", `{"id":"`+answer.Task.ID+`"}`)
	var task struct {
		History []map[string]any `json:"history"`
	}
	_ = json.Unmarshal(got, &task)
	if m := userMessageOf(t, task.History, "asis-1"); m == nil {
		t.Errorf("GetTask's history lacks the user message: %s", body)
	} else if d := sameMessage(m, sent); d != "" {
		t.Errorf("GetTask shows the user message otherwise than sent: %s", d)
	}
}

// TestHistoryLengthCountsShownMessages: historyLength is "the maximum
// number of most recent messages from the task's history" the answer
// holds (A2A v1.0 §3.2.4), of the messages its client gets. With the
// agent's thought (hidden from a client without the interaction spec)
// the last of history, historyLength 1 answered no history at all, where
// historyLength 5 showed the user message.
func TestHistoryLengthCountsShownMessages(t *testing.T) {
	p := askPipeline(t)
	for _, n := range []string{"1", "5"} {
		id := "hl-" + n
		res, code, body := rpcCall(t, p, "SendMessage", `{"configuration":{"historyLength":`+n+`},"message":{"role":"ROLE_USER","messageId":"`+id+
			`","parts":[{"text":"hello"}]}}`)
		if code != 0 {
			t.Fatalf("SendMessage: %s", body)
		}
		var answer struct {
			Task struct {
				History []map[string]any `json:"history"`
			} `json:"task"`
		}
		_ = json.Unmarshal(res, &answer)
		if userMessageOf(t, answer.Task.History, id) == nil {
			t.Errorf("historyLength %s: the answer's history lacks the user message, its last shown one: %s", n, body)
		}
		if n == "1" && len(answer.Task.History) != 1 {
			t.Errorf("historyLength 1: history %v; want 1 message", answer.Task.History)
		}
	}
}

// TestReturnImmediatelyShowsUserMessage: a new task's answer with
// returnImmediately is the Task as submitted with its history, the user's
// message (as GetTask right after shows it, and as the answer for a
// continued task, v0.3's blocking:false and the stream's first event
// did); it was a bare Task without history, on every binding.
func TestReturnImmediatelyShowsUserMessage(t *testing.T) {
	p := askPipeline(t)
	res, code, body := rpcCall(t, p, "SendMessage", `{"configuration":{"returnImmediately":true},"message":{"role":"ROLE_USER","messageId":"ri-1",`+
		`"parts":[{"text":"hello"}]}}`)
	if code != 0 {
		t.Fatalf("SendMessage: %s", body)
	}
	var answer struct {
		Task struct {
			ID      string           `json:"id"`
			Status  map[string]any   `json:"status"`
			History []map[string]any `json:"history"`
		} `json:"task"`
	}
	if err := json.Unmarshal(res, &answer); err != nil || answer.Task.ID == "" {
		t.Fatalf("SendMessage answered %s (%v); want a task", body, err)
	}
	if answer.Task.Status["state"] != "TASK_STATE_SUBMITTED" || answer.Task.Status["timestamp"] == nil {
		t.Errorf("returnImmediately: status %v; want TASK_STATE_SUBMITTED with its timestamp", answer.Task.Status)
	}
	if m := userMessageOf(t, answer.Task.History, "ri-1"); m == nil || m["role"] != "ROLE_USER" {
		t.Errorf("returnImmediately: the answer's history lacks the user message: %s", body)
	}
}
