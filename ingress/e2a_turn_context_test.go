package ingress_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
)

// TestE2ATurnInAnotherContextRefused: an A2A v1.0 task of the demo pool
// asks for input; the same principal answers it over E2A naming the task
// but another context_id. The A2A doors refuse such a message (-32602: a
// message continuing a task MUST name the task's context); E2A took it,
// claimed the other context and ran the turn there (a bridged A2A upstream
// got a new upstream task, the one asking stayed input-required upstream).
// It is refused 400 invalid_request, not retryable, naming the fields'
// roles, with nothing published; the task still asks. The answer naming
// the task's context (or none) is taken and ends the task; a new task_id
// with a context_id nobody has is still taken.
func TestE2ATurnInAnotherContextRefused(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("the weather"))
	q.Metadata = map[string]any{"ask": "input"}
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: q})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("the question: %T %+v; want a task asking for input", res, res)
	}
	resp, b := testkit.Do(t, http.MethodPost, p.url+"/v1/requests?wait=true",
		fmt.Sprintf(`{"request_id":"ctx-other-turn","task_id":%q,"context_id":"other-ctx","params":{"text":"Paris"}}`, task.ID))
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("an E2A turn of task %s naming another context_id: %d %s; want 400 %s, as the A2A doors refuse it (-32602)",
			task.ID, resp.StatusCode, b, e2aproto.CodeInvalidRequest)
	}
	if e := e2aError(t, b); e.Code != e2aproto.CodeInvalidRequest || e.Retryable || !strings.Contains(e.Message, "context_id") ||
		!strings.Contains(e.Message, "task_id") {
		t.Fatalf("refusal %+v; want %s, not retryable, naming context_id and task_id", e, e2aproto.CodeInvalidRequest)
	}
	checkNotPublished(t, p.nc, "ctx-other-turn")
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("GetTask after the refused turn: %v %+v; want still input-required", err, got)
	}
	// In the task's context (named, or joined by naming none): taken.
	r := p.post(t, "/v1/requests?wait=true", "",
		fmt.Sprintf(`{"request_id":"ctx-own-turn","task_id":%q,"context_id":%q,"params":{"text":"Paris","frames":1}}`, task.ID, task.ContextID))
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(r.Body)
		t.Fatalf("the answer in the task's own context: %d %s", r.StatusCode, b)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	// A new task with a context_id nobody has: taken, the context claimed.
	r = p.post(t, "/v1/requests?wait=true", "", `{"request_id":"ctx-new-task","task_id":"ctx-new-task-id","context_id":"fresh-ctx","params":{"text":"x","frames":1}}`)
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(r.Body)
		t.Fatalf("a new task in a new context: %d %s", r.StatusCode, b)
	}
	_, _ = io.Copy(io.Discard, r.Body)
}
