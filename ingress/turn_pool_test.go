package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	a2av03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
)

// A turn goes to the pool that holds its task unless the client names a
// pool: the default pool has never seen the task (a bridge's upstream
// task, an agent's state). Each test asks pool "asker" a question on its
// own path, then answers it on the pipeline's own endpoint, whose default
// pool is "elsewhere".

// askedOnPool starts the two pools and returns the pipeline, a v1.0
// client of asker's path, and asker's input-required task.
func askedOnPool(t *testing.T, ctx context.Context) (*pipetest.Pipeline, *a2aclient.Client, *a2a.Task) {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("elsewhere")))
	p.Pool("elsewhere", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return agent.Reply(w, "elsewhere never saw the task")
	}))
	p.Pool("asker", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if text, _ := env.Params["text"].(string); text == "the weather" {
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		}
		return agent.Reply(w, "Sunny in Paris")
	}))
	c := up.Client(t, p.URL+"/pools/asker")
	return p, c, up.Asked(t, ctx, c, up.Msg("the weather"))
}

// completedByAsker waits for the task to complete with asker's answer.
func completedByAsker(t *testing.T, ctx context.Context, c *a2aclient.Client, id a2a.TaskID) {
	t.Helper()
	var last *a2a.Task
	testkit.Eventually(t, 20*time.Second, "the task completed", func() bool {
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		last = got
		return err == nil && got.Status.State == a2a.TaskStateCompleted
	})
	if h := last.History; len(h) == 0 || v1Text(h[len(h)-1].Parts) != "Sunny in Paris" {
		t.Fatalf("task %s completed with history %+v; want asker's answer \"Sunny in Paris\" last", id, h)
	}
}

// TestE2ATurnFollowsItsTasksPool: E2A POST /v1/requests with the task_id
// and no ?agent=: accepted on pool asker (the 202 names it).
func TestE2ATurnFollowsItsTasksPool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, c, task := askedOnPool(t, ctx)
	body := fmt.Sprintf(`{"request_id":"e2a-turn-pool","task_id":%q,"params":{"text":"Paris"}}`, task.ID)
	r, err := http.Post(p.URL+"/v1/requests", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var acc e2aproto.AcceptedBody
	if err := json.NewDecoder(r.Body).Decode(&acc); err != nil || r.StatusCode != http.StatusAccepted || acc.Pool != "asker" {
		t.Fatalf("E2A turn of asker's task with no ?agent=: %d %+v (%v); want 202 on pool asker", r.StatusCode, acc, err)
	}
	completedByAsker(t, ctx, c, task.ID)
}

// TestA2AContinuationFollowsItsTasksPool: the answer sent to the
// pipeline's own A2A interface, v1.0 (a2a-go/v2) and v0.3 (a2a-go v0.3),
// is asker's to answer.
func TestA2AContinuationFollowsItsTasksPool(t *testing.T) {
	t.Run("v1.0", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, c, task := askedOnPool(t, ctx)
		if _, err := up.Client(t, p.URL).SendMessage(ctx, up.Reply(task, "Paris")); err != nil {
			t.Fatal(err)
		}
		completedByAsker(t, ctx, c, task.ID)
	})
	t.Run("v0.3", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, c, task := askedOnPool(t, ctx)
		if _, err := v03ClientAt(t, p.URL).SendMessage(ctx, answerFor(a2av03.TaskID(task.ID), task.ContextID, "Paris")); err != nil {
			t.Fatal(err)
		}
		completedByAsker(t, ctx, c, task.ID)
	})
}
