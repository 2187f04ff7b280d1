package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// recordKeys returns the keys of KV_E2A_TASKS that name records of kind
// (ingress.KindTask, KindContext…).
func recordKeys(t *testing.T, js jetstream.JetStream, kind string) []string {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), streams.TasksBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeysFiltered(context.Background(), kind+".>")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range keys.Keys() {
		out = append(out, k)
	}
	return out
}

// sendV1 sends req with c and returns the task it answers.
func sendV1(ctx context.Context, t *testing.T, c *a2aclient.Client, req *a2a.SendMessageRequest) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage answered %T, not a task", res)
	}
	return task
}

// notFoundForBob checks that bob finds nothing of the task id, whatever he
// calls (A2A v1.0 over gRPC).
func notFoundForBob(ctx context.Context, t *testing.T, bob *a2aclient.Client, id a2a.TaskID) {
	t.Helper()
	if _, err := bob.GetTask(ctx, &a2a.GetTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob GetTask: %v", err)
	}
	if _, err := bob.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob CancelTask: %v", err)
	}
	for ev, err := range bob.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("bob SubscribeToTask: %v %v", ev, err)
		}
		break
	}
	answer := v1Answer(&a2a.Task{ID: id}, "Paris")
	if _, err := bob.SendMessage(ctx, answer); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob continues the task: %v", err)
	}
	if list, err := bob.ListTasks(ctx, &a2a.ListTasksRequest{}); err != nil || list.TotalSize != 0 {
		t.Fatalf("bob ListTasks: %+v %v", list, err)
	}
}

// TestFirstTurnIsTheRecord: a new A2A task is named by its first request
// and writes no task record: the request (E2A_REQUESTS) is the record, read
// by GetTask, ListTasks and the next turn's claim for its owner, and
// nothing of it exists for another principal (get, cancel, subscribe,
// continue, list). The second turn creates the record (the first request
// and itself, the first request's owner); a task recorded the earlier way
// (an id of its own, its record written with its first turn) is read as
// before, and each task is listed once.
func TestFirstTurnIsTheRecord(t *testing.T) {
	p, _ := startGRPCPipeline(t, ingress.WithAuth(aliceAndBob(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice, bob := grpcClient(t, p, testKey), grpcClient(t, p, bobKey)

	// The first turn: the demo asks for input.
	task := sendV1(ctx, t, alice, userMessage("ask:input the weather"))
	v1Interrupted(t, "first turn", task, a2a.TaskStateInputRequired, "What should I say about the weather? Answer in this task.")
	if keys := recordKeys(t, p.js, ingress.KindTask); len(keys) != 0 {
		t.Fatalf("the first turn wrote task records %v", keys)
	}
	subj, _ := subjects.Request("demo", string(task.ID))
	if _, err := streams.LastBySubject(ctx, p.nc, streams.RequestsStream, subj); err != nil {
		t.Fatalf("the task is not named by its request (%s): %v", subj, err)
	}
	got, err := alice.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateInputRequired || got.ContextID != task.ContextID {
		t.Fatalf("alice GetTask: %+v %v", got, err)
	}
	if list, err := alice.ListTasks(ctx, &a2a.ListTasksRequest{}); err != nil || list.TotalSize != 1 || list.Tasks[0].ID != task.ID {
		t.Fatalf("alice ListTasks: %+v %v", list, err)
	}
	notFoundForBob(ctx, t, bob, task.ID)

	// The second turn answers: the record is created from the first.
	done := sendV1(ctx, t, alice, v1Answer(task, "Paris"))
	if done.ID != task.ID || done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the answer: %+v", done)
	}
	store, err := ingress.NewTaskStore(ctx, p.js)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Get(ctx, ingress.KindTask, string(task.ID))
	if err != nil || len(rec.RequestIDs) != 2 || rec.RequestIDs[0] != string(task.ID) || rec.Principal != "alice" ||
		rec.ContextID != task.ContextID || rec.Pool != "demo" || rec.Protocol != "a2a" {
		t.Fatalf("record after the second turn: %+v %v", rec, err)
	}
	if keys := recordKeys(t, p.js, ingress.KindTask); len(keys) != 1 {
		t.Fatalf("task records %v", keys)
	}
	got, err = alice.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted || len(got.History) < 2 {
		t.Fatalf("alice GetTask after the answer: %+v %v", got, err)
	}
	if _, err := alice.SendMessage(ctx, v1Answer(task, "again")); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Fatalf("a message to the completed task: %v", err)
	}
	notFoundForBob(ctx, t, bob, task.ID)

	// A task recorded the earlier way: its own id, a record from its
	// first turn (here over a one-turn task's request).
	other := sendV1(ctx, t, alice, userMessage("hello"))
	legacy := ingress.TaskRecord{ID: "legacy-task", ContextID: other.ContextID, Protocol: "a2a", Pool: "demo", Principal: "alice"}
	if _, err := store.AppendNew(ctx, ingress.KindTask, legacy, string(other.ID), tenant.Principal{ID: "alice"}); err != nil {
		t.Fatal(err)
	}
	got, err = alice.GetTask(ctx, &a2a.GetTaskRequest{ID: "legacy-task"})
	if err != nil || got.ID != "legacy-task" || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("alice GetTask of a recorded task: %+v %v", got, err)
	}
	list, err := alice.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil || list.TotalSize != 3 {
		t.Fatalf("alice ListTasks: %+v %v", list, err)
	}
	ids := map[a2a.TaskID]bool{}
	for _, lt := range list.Tasks {
		ids[lt.ID] = true
	}
	if !ids[task.ID] || !ids[other.ID] || !ids["legacy-task"] {
		t.Fatalf("alice ListTasks lists %v", ids)
	}
	notFoundForBob(ctx, t, bob, "legacy-task")
	notFoundForBob(ctx, t, bob, other.ID)
}

// rpcAs posts a JSON-RPC call to /a2a with key and returns the decoded
// answer.
func rpcAs(t *testing.T, p *pipeline, key, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest("POST", p.url+"/a2a", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ingress.HeaderAPIKey, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return out
}

// TestFirstTurnIsTheRecordV03: the same over A2A v0.3 and the AgentVault
// profile (JSON-RPC at /a2a): tasks/get of a one-turn task for its owner,
// the protocol's not found for another principal.
func TestFirstTurnIsTheRecordV03(t *testing.T) {
	p := startPipelineWith(t, ingress.WithAuth(aliceAndBob(t)))
	for _, c := range []struct {
		name, send, get string
		notFound        float64
	}{
		{"a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":%q}}`, -32001},
		{"agentvault", `{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"hello"}]}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":%q}}`, -32001},
	} {
		t.Run(c.name, func(t *testing.T) {
			sent := rpcAs(t, p, testKey, c.send)
			res, _ := sent["result"].(map[string]any)
			id, _ := res["id"].(string)
			if id == "" {
				t.Fatalf("send: %v", sent)
			}
			get := strings.Replace(c.get, "%q", `"`+id+`"`, 1)
			got := rpcAs(t, p, testKey, get)
			if r, _ := got["result"].(map[string]any); r == nil || r["id"] != id {
				t.Fatalf("alice tasks/get: %v", got)
			}
			got = rpcAs(t, p, bobKey, get)
			if e, _ := got["error"].(map[string]any); e == nil || e["code"] != c.notFound {
				t.Fatalf("bob tasks/get: %v", got)
			}
			unknown := rpcAs(t, p, bobKey, strings.Replace(c.get, "%q", `"`+id+`x"`, 1))
			if e, _ := unknown["error"].(map[string]any); e == nil || e["code"] != c.notFound {
				t.Fatalf("bob's answer for alice's task %v differs from an unknown task's %v", got, unknown)
			}
		})
	}
	if keys := recordKeys(t, p.js, ingress.KindTask); len(keys) != 0 {
		t.Fatalf("one-turn tasks wrote records %v", keys)
	}
}

// TestTaskStoreSecondTurnsRace: concurrent second turns of a task that has
// no record yet (its first request, as the normalizer makes and ingress
// publishes it, stands for it) create the record once, from the first
// request, and chain after each other: exactly one follows the first
// request, each follows the one before it in the final record. Another
// principal's turn changes nothing, and a retry of the first turn writes
// nothing.
func TestTaskStoreSecondTurnsRace(t *testing.T) {
	ctx := context.Background()
	ts, js := newTaskStore(t)
	res, err := normalizer.New(normalizer.Config{Routes: normalizer.Routes{Default: "demo"}}).FromA2A(normalizer.Input{
		Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	env := res.Envelope
	env.UserID = "alice"
	if env.TaskID != env.RequestID {
		t.Fatalf("a new task is named %q, its request %q", env.TaskID, env.RequestID)
	}
	data, _ := e2a.MarshalEnvelope(env)
	subj, _ := subjects.Request("demo", env.RequestID)
	if _, err := js.Publish(ctx, subj, data); err != nil {
		t.Fatal(err)
	}
	id := env.TaskID
	first, err := ts.Get(ctx, ingress.KindTask, id)
	if err != nil || first.Principal != "alice" || first.Pool != "demo" || first.ContextID != env.ContextID ||
		len(first.RequestIDs) != 1 || first.RequestIDs[0] != id {
		t.Fatalf("the first request as the record: %+v %v", first, err)
	}
	alice, bob := tenant.Principal{ID: "alice"}, tenant.Principal{ID: "bob"}
	base := ingress.TaskRecord{ID: id, Protocol: "a2a", Pool: "demo"}
	bobBase := base
	bobBase.Principal = "bob"
	if _, err := ts.Append(ctx, ingress.KindTask, bobBase, "r-bob", bob); !errors.Is(err, ingress.ErrTaskNotFound) {
		t.Fatalf("bob's turn: %v", err)
	}
	if rec, err := ts.Append(ctx, ingress.KindTask, base, id, alice); err != nil || len(rec.RequestIDs) != 1 {
		t.Fatalf("the first turn again: %+v %v", rec, err)
	}
	if keys := recordKeys(t, js, ingress.KindTask); len(keys) != 0 {
		t.Fatalf("records %v", keys)
	}
	const n = 12
	after := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			turn := fmt.Sprintf("r-%d", i)
			b := base
			b.Principal = "alice"
			rec, err := ts.Append(ctx, ingress.KindTask, b, turn, alice)
			if err != nil {
				t.Errorf("append %s: %v", turn, err)
				return
			}
			after[i] = rec.Before(turn)
		})
	}
	wg.Wait()
	got, err := ts.Get(ctx, ingress.KindTask, id)
	if err != nil || len(got.RequestIDs) != n+1 || got.RequestIDs[0] != id || got.Principal != "alice" || got.ContextID != env.ContextID {
		t.Fatalf("record %+v %v", got, err)
	}
	afterFirst := 0
	for i := range n {
		turn := fmt.Sprintf("r-%d", i)
		if want := got.Before(turn); after[i] != want || want == "" {
			t.Errorf("%s appended after %q; the record has it after %q", turn, after[i], want)
		}
		if after[i] == id {
			afterFirst++
		}
	}
	if afterFirst != 1 {
		t.Errorf("%d turns follow the first request", afterFirst)
	}
}
