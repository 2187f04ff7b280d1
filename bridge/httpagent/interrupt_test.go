package httpagent_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// TestInterruptAnswerCarriesHistory: issue 38 §2: an interrupted
// task is carried through every bridge, and the client's next message
// continues it, "the agent (or upstream) receiving the answer with the
// task's history". An HTTP agent (the README's smallest, stateless agent)
// asks "Which city?"; an A2A v1.0 client (a2a-go/v2) answers "Paris" on
// the task. The HTTP agent holds no state of its own and the pipeline
// holds the task's history (as the OpenAI bridge sends a context's earlier
// turns upstream): the POST of the answer's turn carries the task's
// earlier turn in its history member (WithHistory), the user's "the
// weather" and the agent's question, so the agent knows what "Paris"
// answers.
func TestInterruptAnswerCarriesHistory(t *testing.T) {
	srv := newRecorder(t, func(n int) string {
		if n == 1 {
			return `{"response_kind":"a2a.stream_event","status":"succeeded","is_final":true,"body":` +
				string(e2a.MarshalBody(e2a.InterruptBody(e2a.StateInputRequired, "Which city?"))) + "}\n"
		}
		return `{"response_kind":"e2a.complete","body":{"result":{"text":"ok"}}}` + "\n"
	})
	r := newRig(t, srv.URL, rigConfig{})
	c := up.Client(t, r.p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	if _, err := c.SendMessage(ctx, up.Reply(task, "Paris")); err != nil {
		t.Fatal(err)
	}
	bodies := srv.Bodies()
	if len(bodies) != 2 {
		t.Fatalf("%d POSTs to the HTTP agent, want 2", len(bodies))
	}
	second := string(bodies[1])
	if !strings.Contains(second, "Paris") {
		t.Fatalf("the answer's POST does not hold the answer: %s", second)
	}
	if !strings.Contains(second, "the weather") || !strings.Contains(second, "Which city?") {
		t.Fatalf("the HTTP agent got the answer to its input-required question without the task's history "+
			"(want the POST of the answer's turn to carry the user's first message \"the weather\" and the agent's question \"Which city?\"): %s", second)
	}
}

// TestInterruptAsTaskFrameTakesTheAnswer: an HTTP agent wrapping an
// A2A framework answers its turn with a final a2a.task frame (an A2A v0.3
// Task, which the package documentation accepts for a2a.task frames) in
// state input-required with its question. Every A2A client of the request
// is shown the task input-required (SendMessage's result, GetTask), so
// the client answers on the task: the answer must be taken as the task's
// next turn (A2A: an interrupted task is not terminal), as ingress's
// terminal-task check reads the final a2a.task frame's state too
// (e2a.Response.Interrupt, egress.Service.Continuable).
func TestInterruptAsTaskFrameTakesTheAnswer(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = mustRead(r)
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		if n == 1 {
			_, _ = w.Write([]byte(`{"response_kind":"a2a.task","is_final":true,"body":{"kind":"task","id":"x","contextId":"y",` +
				`"status":{"state":"input-required","message":{"kind":"message","role":"agent","messageId":"q1","parts":[{"kind":"text","text":"Which city?"}]}}}}` + "\n"))
			return
		}
		_, _ = w.Write([]byte(`{"response_kind":"e2a.complete","body":{"result":{"text":"ok"}}}` + "\n"))
	}))
	defer srv.Close()
	r := newRig(t, srv.URL, rigConfig{})
	c := up.Client(t, r.p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, up.Msg("the weather"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("question: %T %+v", res, res)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateInputRequired {
		return // not shown as interrupted: nothing to answer (consistent)
	}
	if _, err := c.SendMessage(ctx, up.Reply(task, "Paris")); err != nil {
		t.Fatalf("GetTask shows task %s input-required, but the answer on the task is refused: %v; want it taken as the task's next turn", task.ID, err)
	}
}
