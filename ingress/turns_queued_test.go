package ingress_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	a2av03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestQueuedTurnStartedNotTerminal: two answers to an
// input-required task, Rome's queued behind Paris's; Paris's turn ends
// and Rome's starts but writes nothing yet. Then GetTask (v1.0), ListTasks
// (v1.0) and tasks/get (v0.3) must not show the task terminal (Paris's
// turn completed, Rome's runs); once Rome's ends, each shows it completed
// with both replies.
func TestQueuedTurnStartedNotTerminal(t *testing.T) {
	g := startQueuedTask(t, "Paris", "Rome")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := up.Client(t, g.URL)
	v03 := v03ClientAt(t, g.URL)
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	send := v1BlockingAnswer(c)
	done := make(chan error, 2)
	go func() { _, err := send(ctx, task, "Paris"); done <- err }()
	if s := testkit.Receive(t, g.started, 30*time.Second, "the turn Paris to start"); s != "Paris" {
		t.Fatalf("started %q", s)
	}
	go func() { _, err := send(ctx, task, "Rome"); done <- err }()
	testkit.Eventually(t, 10*time.Second, "Rome's turn recorded behind Paris's", func() bool {
		return len(record(t, g.JS, ingress.KindTask, string(task.ID)).RequestIDs) == 3
	})
	close(g.gates["Paris"])
	if err := <-done; err != nil {
		t.Fatalf("Paris: %v", err)
	}
	if s := testkit.Receive(t, g.started, 30*time.Second, "the turn Rome to start (was it refused?)"); s != "Rome" {
		t.Fatalf("started %q", s)
	}
	check := func(when string, final bool) {
		t.Helper()
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatal(err)
		}
		list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: task.ContextID, IncludeArtifacts: true})
		if err != nil {
			t.Fatal(err)
		}
		var listed *a2a.Task
		for _, lt := range list.Tasks {
			if lt.ID == task.ID {
				listed = lt
			}
		}
		old, err := v03.GetTask(ctx, &a2av03.TaskQueryParams{ID: a2av03.TaskID(task.ID)})
		if err != nil {
			t.Fatal(err)
		}
		if listed == nil {
			t.Fatalf("%s: ListTasks of the context lacks the task", when)
		}
		states := []string{string(got.Status.State), string(listed.Status.State), string(old.Status.State)}
		if !final {
			done, err := c.ListTasks(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateCompleted})
			if err != nil {
				t.Fatal(err)
			}
			for _, lt := range done.Tasks {
				if lt.ID == task.ID {
					t.Errorf("%s: ListTasks of completed tasks lists the task", when)
				}
			}
			if got.Status.State.Terminal() || listed.Status.State.Terminal() || old.Status.State.Terminal() {
				t.Errorf("%s: GetTask, ListTasks, v0.3 tasks/get say %v; want no terminal state", when, states)
			}
			return
		}
		if got.Status.State != a2a.TaskStateCompleted || listed.Status.State != a2a.TaskStateCompleted || old.Status.State != a2av03.TaskStateCompleted {
			t.Errorf("%s: GetTask, ListTasks, v0.3 tasks/get say %v; want completed", when, states)
		}
		arts, oldArts := "", ""
		for _, a := range got.Artifacts {
			arts += " | artifact: " + v1Text(a.Parts)
		}
		for _, a := range old.Artifacts {
			oldArts += " | artifact: " + textOf(a.Parts)
		}
		listedArts := ""
		for _, a := range listed.Artifacts {
			listedArts += " | artifact: " + v1Text(a.Parts)
		}
		for name, h := range map[string]string{"GetTask": v1HistoryText(got) + arts, "v0.3 tasks/get": v03History(old.History) + oldArts,
			"ListTasks": v1HistoryText(listed) + listedArts} {
			if !strings.Contains(h, "Hello, Paris") || !strings.Contains(h, "Hello, Rome") {
				t.Errorf("%s: %s history %q, want both replies (history or artifacts)", when, name, h)
			}
		}
	}
	check("Rome's turn started, nothing written", false)
	close(g.gates["Rome"])
	if err := <-done; err != nil {
		t.Fatalf("Rome: %v", err)
	}
	check("after Rome's turn", true)
}

// startTwoReplyQueuedTask is startQueuedTask whose held turns answer in
// two replies (two llm_response_ids), so that a first turn's blocking
// answer is a Task (a lone text reply is a direct Message answer).
func startTwoReplyQueuedTask(t *testing.T, texts ...string) *queuedTask {
	t.Helper()
	return startQueuedTaskReplying(t, func(w agent.Writer, text string) error {
		for i, part := range []string{"Hello, ", text} {
			if err := w.SetMetadata(map[string]any{"llm_response_id": fmt.Sprintf("%s-%d", text, i)}); err != nil {
				return err
			}
			if err := w.Chunk(e2a.DeltaText, part); err != nil {
				return err
			}
		}
		return nil
	}, texts...)
}

// TestFirstTurnAnswerNotTerminalWhileSecondQueued: the first turn
// of a new task, sent blocking (v1.0 SendMessage, v0.3 message/send),
// runs; the same principal finds the task (ListTasks) and sends it a
// second message, queued behind the first. The first's blocking answer
// must not say the task completed while the second turn has not ended
// (GetTask says working then): as TestFirstOfTwoAnswersNotTerminalWhileSecondQueued
// asks of two answers to an interrupted task, here for a task's first turn.
func TestFirstTurnAnswerNotTerminalWhileSecondQueued(t *testing.T) {
	for name, first := range map[string]func(ctx context.Context, url string) (string, error){
		"v1": func(ctx context.Context, url string) (string, error) {
			res, err := up.Client(t, url).SendMessage(ctx, up.Msg("Paris"))
			if err != nil {
				return "", err
			}
			task, ok := res.(*a2a.Task)
			if !ok {
				return fmt.Sprintf("%T", res), nil
			}
			return string(task.Status.State), nil
		},
		"v03": func(ctx context.Context, url string) (string, error) {
			msg := a2av03.NewMessage(a2av03.MessageRoleUser, a2av03.TextPart{Text: "Paris"})
			res, err := v03ClientAt(t, url).SendMessage(ctx, &a2av03.MessageSendParams{Message: msg})
			if err != nil {
				return "", err
			}
			task, ok := res.(*a2av03.Task)
			if !ok {
				return fmt.Sprintf("%T", res), nil
			}
			return string(task.Status.State), nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := startTwoReplyQueuedTask(t, "Paris", "Rome")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := up.Client(t, g.URL)
			type result struct {
				state string
				err   error
			}
			parisDone, romeDone := make(chan result, 1), make(chan result, 1)
			go func() {
				s, err := first(ctx, g.URL)
				parisDone <- result{s, err}
			}()
			if s := testkit.Receive(t, g.started, 30*time.Second, "the turn Paris to start"); s != "Paris" {
				t.Fatalf("started %q", s)
			}
			list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
			if err != nil || len(list.Tasks) != 1 {
				t.Fatalf("ListTasks while the first turn runs: %v %v", list, err)
			}
			task := list.Tasks[0]
			go func() {
				r, err := v1BlockingAnswer(c)(ctx, task, "Rome")
				romeDone <- result{r.state, err}
			}()
			testkit.Eventually(t, 10*time.Second, "Rome's turn recorded behind Paris's", func() bool {
				rec, err := ingress.NewTaskStore(ctx, g.JS)
				if err != nil {
					t.Fatal(err)
				}
				r, err := rec.Get(ctx, ingress.KindTask, string(task.ID))
				return err == nil && len(r.RequestIDs) == 2
			})
			close(g.gates["Paris"])
			pr := testkit.Receive(t, parisDone, 30*time.Second, "Paris's answer")
			if pr.err != nil {
				t.Fatalf("Paris: %v", pr.err)
			}
			now, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			if s := testkit.Receive(t, g.started, 30*time.Second, "the turn Rome to start (was it refused?)"); s != "Rome" {
				t.Fatalf("started %q", s)
			}
			close(g.gates["Rome"])
			if rr := testkit.Receive(t, romeDone, 30*time.Second, "Rome's answer"); rr.err != nil {
				t.Fatalf("Rome: %v", rr.err)
			}
			t.Logf("Paris answered %s; GetTask then %s", pr.state, now.Status.State)
			switch pr.state {
			case string(a2a.TaskStateCompleted), string(a2av03.TaskStateCompleted):
				t.Fatalf("Paris's blocking answer says the task %s while Rome's turn (accepted, queued behind it) has not run; GetTask then says %s", pr.state, now.Status.State)
			}
		})
	}
}
