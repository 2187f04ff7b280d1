package ingress_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// TestPushConfigNotFoundNamesConfig: getting a config that does not exist
// on the caller's own task (deleted, never made, an id too long to quote
// whole) is TaskNotFoundError (A2A v1.0 §3.1.8: "the push notification
// configuration does not exist"; JSON-RPC -32001, HTTP 404, gRPC
// NOT_FOUND) on every door (v1.0 JSON-RPC, HTTP+JSON, gRPC, with the
// a2a-go/v2 client; v0.3 JSON-RPC, with a2a-go v0.3's), its message naming
// the config (jsonrpc.QuoteForMessage) and not saying that the task, which
// exists, is not found. Another principal's task keeps the answer of a task
// that does not exist, and says nothing of configs.
func TestPushConfigNotFoundNamesConfig(t *testing.T) {
	p := startPushPipeline(t)
	r := pushtest.NewReceiver(t)
	long := strings.Repeat("x", 300)
	for _, binding := range pushBindings {
		t.Run(string(binding), func(t *testing.T) {
			alice, bob := keyClient(t, p, binding, testKey), keyClient(t, p, binding, bobKey)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := alice.SendMessage(ctx, userMessage("configs gone"))
			if err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			task := res.(*a2a.Task).ID
			if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task, ID: "gone-1", URL: r.URL + "/gone"}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if err := alice.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task, ID: "gone-1"}); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			for _, id := range []string{"gone-1", "never-made", long} {
				_, err := alice.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task, ID: id})
				checkConfigNotFound(t, err, errors.Is(err, a2a.ErrTaskNotFound), id)
			}
			_, mine := bob.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task, ID: "gone-1"})
			_, none := bob.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: "no-such-task", ID: "gone-1"})
			checkTaskNotFound(t, mine, none, errors.Is(mine, a2a.ErrTaskNotFound))
		})
	}
	t.Run("v0.3", func(t *testing.T) {
		alice, bob := v03KeyClient(t, p, testKey), v03KeyClient(t, p, bobKey)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := alice.SendMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "v03 configs gone"})})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task := res.(*a2a03.Task).ID
		if _, err := alice.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task, Config: a2a03.PushConfig{ID: "gone-1", URL: r.URL + "/gone"}}); err != nil {
			t.Fatalf("set: %v", err)
		}
		if err := alice.DeleteTaskPushConfig(ctx, &a2a03.DeleteTaskPushConfigParams{TaskID: task, ConfigID: "gone-1"}); err != nil {
			t.Fatalf("delete: %v", err)
		}
		for _, id := range []string{"gone-1", "never-made", long} {
			_, err := alice.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: task, ConfigID: id})
			checkConfigNotFound(t, err, errors.Is(err, a2a03.ErrTaskNotFound), id)
		}
		_, mine := bob.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: task, ConfigID: "gone-1"})
		_, none := bob.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: "no-such-task", ConfigID: "gone-1"})
		checkTaskNotFound(t, mine, none, errors.Is(mine, a2a03.ErrTaskNotFound))
	})
}

// checkConfigNotFound checks the answer err to a get of config id on the
// caller's task: TaskNotFound's code (isTaskNotFound, in the client's
// generation), the config named, cut as jsonrpc.QuoteForMessage cuts it,
// the task not said to be missing.
func checkConfigNotFound(t *testing.T, err error, isTaskNotFound bool, id string) {
	t.Helper()
	if !isTaskNotFound {
		t.Fatalf("get of config %.20q: %v; want TaskNotFoundError's code", id, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "push notification config "+jsonrpc.QuoteForMessage(id)+" not found") {
		t.Fatalf("get of config %.20q: message %q does not name the config", id, msg)
	}
	if strings.Contains(strings.ToLower(msg), "task not found") {
		t.Fatalf("get of config %.20q: message %q says the task is not found; it exists", id, msg)
	}
}

// checkTaskNotFound checks a get of a config of another principal's task
// (mine) against one of a task that does not exist (none): both
// TaskNotFound (isTaskNotFound, of mine), the same message, no config
// named.
func checkTaskNotFound(t *testing.T, mine, none error, isTaskNotFound bool) {
	t.Helper()
	if !isTaskNotFound || mine == nil || none == nil {
		t.Fatalf("another's task: %v; no task: %v; want TaskNotFoundError for both", mine, none)
	}
	if mine.Error() != none.Error() || strings.Contains(mine.Error(), "config") {
		t.Fatalf("another's task answers %q, no task %q: want the same task-not-found answer", mine, none)
	}
}
