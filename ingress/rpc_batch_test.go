package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestA2ABatchAnswersValues: inside a batch the non-streaming methods are
// answered as values, the same as alone: a blocking message/send waits for
// the demo agent and answers its task, tasks/send answers the AgentVault
// id, and tasks/get of that task answers it in the profile's shape.
func TestA2ABatchAnswersValues(t *testing.T) {
	p := startPipeline(t)
	post := func(body string) []map[string]json.RawMessage {
		t.Helper()
		resp, err := http.Post(p.url+"/a2a?agent=demo", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out []map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("batch: %d %v", resp.StatusCode, err)
		}
		return out
	}
	out := post(`[{"jsonrpc":"2.0","id":"s","method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"text","text":"hello batch"}]}}},
		{"jsonrpc":"2.0","id":"av","method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"x"}]}}}]`)
	if len(out) != 2 {
		t.Fatalf("%d answers", len(out))
	}
	var task struct {
		Kind   string `json:"kind"`
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
		Artifacts []any `json:"artifacts"`
	}
	if string(out[0]["id"]) != `"s"` || json.Unmarshal(out[0]["result"], &task) != nil || task.Kind != "task" ||
		task.Status.State != "completed" || len(task.Artifacts) == 0 {
		t.Fatalf("message/send in a batch: %s / %s", out[0]["result"], out[0]["error"])
	}
	var avTask struct {
		ID string `json:"id"`
	}
	if string(out[1]["id"]) != `"av"` || json.Unmarshal(out[1]["result"], &avTask) != nil || avTask.ID == "" {
		t.Fatalf("tasks/send in a batch: %s / %s", out[1]["result"], out[1]["error"])
	}
	out = post(`[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"` + task.ID + `"}},
		{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"` + avTask.ID + `"}},
		{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{"id":"` + task.ID + `"}}]`)
	var got struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if json.Unmarshal(out[0]["result"], &got) != nil || got.ID != task.ID || got.Status.State != "completed" {
		t.Fatalf("tasks/get (A2A) in a batch: %s / %s", out[0]["result"], out[0]["error"])
	}
	// The AgentVault task in its own shape: state names of the profile.
	if json.Unmarshal(out[1]["result"], &got) != nil || got.ID != avTask.ID || got.Status.State == "" {
		t.Fatalf("tasks/get (AgentVault) in a batch: %s / %s", out[1]["result"], out[1]["error"])
	}
	var rpcErr struct {
		Code int `json:"code"`
		Data struct {
			Code string `json:"code"`
		} `json:"data"`
	}
	if json.Unmarshal(out[2]["error"], &rpcErr) != nil || rpcErr.Code != -32002 || rpcErr.Data.Code != "not_cancelable" {
		t.Fatalf("tasks/cancel of a finished task in a batch: %s / %s", out[2]["result"], out[2]["error"])
	}
}

// TestA2ABatchStreamingNotificationRuns: a message/stream notification
// inside a batch is run as it is when sent alone (its request published,
// nothing answered); it was dropped without a word, an accepted message
// lost.
func TestA2ABatchStreamingNotificationRuns(t *testing.T) {
	p := startPipeline(t)
	sub := subscribeRequests(t, p.nc, "demo")
	resp := p.post(t, "/a2a?agent=demo", "", `[{"jsonrpc":"2.0","method":"message/stream","params":{"message":{"kind":"message","role":"user","messageId":"note-in-batch","parts":[{"kind":"text","text":"hi"}]}}},
		{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"no-such-task"}}]`)
	var out []map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out) != 1 || string(out[0]["id"]) != "1" {
		t.Fatalf("batch: %d %v %v", resp.StatusCode, err, out)
	}
	resp.Body.Close()
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the streaming notification's request was not published: %v", err)
	}
	if !strings.Contains(string(m.Data), "note-in-batch") {
		t.Fatalf("published %s", m.Data)
	}
}

// subscribeRequests subscribes to the requests published for pool (a
// core subscription on its E2A_REQUESTS subjects, flushed: it sees every
// request published after it returns), unsubscribed when the test ends.
func subscribeRequests(t *testing.T, nc *nats.Conn, pool string) *nats.Subscription {
	t.Helper()
	filter, err := subjects.RequestFilter(pool)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.SubscribeSync(filter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}
