package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestFollowedStreamSkipsAnotherPrincipalsTurn: alice's stream of her
// answer to her task (A2A v0.3 message/stream) goes on with a turn the
// task's record lists after hers only when that turn is the task's own.
// Here the record lists, after alice's turn, a request stored under that
// id by bob (what the record may hold once the hot streams dropped the
// task's own request and bob's took its id): alice's stream must end with
// her turn, never showing bob's reply. It showed it (the later turn was
// followed without the ownership rule every other read of a task keeps:
// host.Session.OwnRequests).
func TestFollowedStreamSkipsAnotherPrincipalsTurn(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("gated"),
		ingress.WithAuth(pipetest.KeyAuth(t, map[string]string{"alice": "key-alice-0123456789", "bob": "key-bob-0123456789ab"}, nil))))
	started, gate := make(chan struct{}, 1), make(chan struct{})
	p.Pool("gated", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		text, _ := env.Params["text"].(string)
		switch text {
		case "the weather":
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		case "Paris":
			started <- struct{}{}
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := w.Chunk(e2a.DeltaText, "Hello, "+text); err != nil {
			return err
		}
		return w.Complete(nil)
	}))
	msg := func(text, task string) string {
		ids := ""
		if task != "" {
			ids = fmt.Sprintf(`,"taskId":%q`, task)
		}
		return fmt.Sprintf(`{"kind":"message","messageId":%q,"role":"user","parts":[{"kind":"text","text":%q}]%s}`, uuid.NewString(), text, ids)
	}
	post := func(method, body, accept string) []sseEvent {
		resp := testkit.Open(t, "POST", p.URL+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{"message":`+body+`}}`,
			"Content-Type", "application/json", "Accept", accept, ingress.HeaderAPIKey, "key-alice-0123456789")
		defer resp.Body.Close()
		if accept != "text/event-stream" {
			var r struct{ Result struct{ ID string } }
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Result.ID == "" {
				t.Fatalf("%s: %v %+v", method, err, r)
			}
			return []sseEvent{{data: []byte(r.Result.ID)}}
		}
		return readSSE(t, resp.Body)
	}
	task := string(post("message/send", msg("the weather", ""), "application/json")[0].data)
	streamed := make(chan []sseEvent, 1)
	go func() { streamed <- post("message/stream", msg("Paris", task), "text/event-stream") }()
	testkit.Receive(t, started, 10*time.Second, "alice's Paris turn running")

	// Bob's request, stored under the id the record lists after alice's.
	bob := uuid.Must(uuid.NewV7()).String()
	ts, err := ingress.NewTaskStore(context.Background(), p.JS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Append(context.Background(), ingress.KindTask, *record(t, p.JS, ingress.KindTask, task), bob, tenant.Principal{ID: "alice"}); err != nil {
		t.Fatal(err)
	}
	subj, _ := subjects.Request("gated", bob)
	env := fmt.Sprintf(`{"request_id":%q,"user_id":"bob","task_id":%q,"method":"message/send","params":{"text":"bob's secret"}}`, bob, task)
	if _, err := p.JS.Publish(context.Background(), subj, []byte(env)); err != nil {
		t.Fatal(err)
	}
	close(gate)
	evs := <-streamed
	got := sseLines(evs)
	if strings.Contains(got, "bob's secret") {
		t.Fatalf("alice's stream shows bob's request:\n%s", got)
	}
	if last := string(evs[len(evs)-1].data); !strings.Contains(last, `"completed"`) || !strings.Contains(last, `"final":true`) {
		t.Fatalf("alice's stream ends with %s, want her turn's completed status, final", last)
	}
}
