package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestA2AStreamingErrorsAreSSE: message/stream and tasks/resubscribe
// answer their errors as an SSE stream carrying the JSON-RPC error event.
func TestA2AStreamingErrorsAreSSE(t *testing.T) {
	p := startPipeline(t)
	for name, body := range map[string]string{
		"resubscribe_unknown": `{"jsonrpc":"2.0","id":"s1","method":"tasks/resubscribe","params":{"id":"no-such-task"}}`,
		"stream_bad_params":   `{"jsonrpc":"2.0","id":"s1","method":"message/stream","params":{"message":{"kind":"message","role":"user","messageId":"m","parts":[]}}}`,
		"stream_unknown_task": `{"jsonrpc":"2.0","id":"s1","method":"message/stream","params":{"message":{"kind":"message","role":"user","messageId":"m","taskId":"no-such-task","parts":[{"kind":"text","text":"x"}]}}}`,
	} {
		resp := p.post(t, "/a2a", "text/event-stream", body)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("%s: Content-Type %q", name, ct)
		}
		evs := readSSE(t, resp.Body)
		var r struct {
			ID    json.RawMessage
			Error *struct{ Code int }
		}
		if len(evs) != 1 || json.Unmarshal(evs[0].data, &r) != nil || r.Error == nil || string(r.ID) != `"s1"` {
			t.Fatalf("%s: events %+v", name, evs)
		}
	}
	// The a2a-go client sees the protocol error.
	_, c := a2aClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: "no-such-task"}) {
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("resubscribe unknown task: %v", err)
		}
		break
	}
}

// TestA2AResubscribeOpensWithState: a resubscribed (even finished) task's
// stream opens with a working status-update, then replays to completed.
func TestA2AResubscribeOpensWithState(t *testing.T) {
	p := startPipeline(t)
	_, c := a2aClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := sentV03(t, ctx, c, "hi")
	var events []a2a.Event
	for ev, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: task.ID}) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	first, ok := events[0].(*a2a.TaskStatusUpdateEvent)
	if !ok || (first.Status.State != a2a.TaskStateWorking && first.Status.State != a2a.TaskStateSubmitted) || first.TaskID != task.ID {
		t.Fatalf("first event %T %+v", events[0], events[0])
	}
	last, ok := events[len(events)-1].(*a2a.TaskStatusUpdateEvent)
	if !ok || !last.Final || last.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("last event %+v", events[len(events)-1])
	}
}

// TestA2AIDLessErrors: A2A defines no notifications; as the A2A TCK
// expects, an id-less call to an unknown method or with bad params gets the
// JSON-RPC error (id null), not 204.
func TestA2AIDLessErrors(t *testing.T) {
	p := startPipeline(t)
	for body, code := range map[string]int{
		`{"jsonrpc":"2.0","method":"no/such"}`:                      -32601,
		`{"jsonrpc":"2.0","method":"tasks/get","params":{"id":""}}`: -32602,
		`{"jsonrpc":"2.0","method":"message/send","params":{}}`:     -32602,
	} {
		resp := p.post(t, "/a2a", "", body)
		var r struct {
			ID    json.RawMessage
			Error *struct{ Code int }
		}
		if resp.StatusCode != 200 || jsonDecode(resp, &r) != nil || r.Error == nil || r.Error.Code != code || string(r.ID) != "null" {
			t.Fatalf("%s: %d %+v", body, resp.StatusCode, r)
		}
	}
}

// TestA2AMalformedResumePointRefusedBeforePublish: a message/stream or
// tasks/sendSubscribe with a message whose Last-Event-ID is malformed is
// refused before anything is published (its stream carries the error), as
// E2A's and A2E's doors refuse it. It was published and ran, and its
// stream answered the client's error.
func TestA2AMalformedResumePointRefusedBeforePublish(t *testing.T) {
	p := startPipeline(t)
	for key, body := range map[string]string{
		"bad-lei-a2a": `{"jsonrpc":"2.0","id":"s1","method":"message/stream","params":{"message":{"kind":"message","role":"user","messageId":"m-bad","parts":[{"kind":"text","text":"x"}]}}}`,
		"bad-lei-av":  `{"jsonrpc":"2.0","id":"s1","method":"tasks/sendSubscribe","params":{"message":{"role":"user","parts":[{"type":"text","content":"x"}]}}}`,
	} {
		resp := testkit.Open(t, http.MethodPost, p.url+"/a2a", body, "Content-Type", "application/json", "Accept", "text/event-stream",
			"Idempotency-Key", key, "Last-Event-ID", "not-an-id")
		evs := readSSE(t, resp.Body)
		resp.Body.Close()
		if len(evs) != 1 || !strings.Contains(string(evs[0].data), "-32602") || !strings.Contains(string(evs[0].data), "not-an-id") {
			var got []string
			for _, ev := range evs {
				got = append(got, ev.id+" "+string(ev.data))
			}
			t.Errorf("%s: events %q, want one -32602 error naming the Last-Event-ID", key, got)
		}
		resp = p.get(t, "/v1/requests/"+key)
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: refused, yet published: GET /v1/requests/%s = %d", key, key, resp.StatusCode)
		}
	}
}
