package ingress_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestSubscriptionAwaitsQueuedTurnsPublish: a turn is recorded on its task
// before it is published. A subscription to the task (A2A v0.3
// tasks/resubscribe, v1.0 SubscribeToTask) whose running turn ends in that
// gap goes on with the queued turn once it is stored, its reply and the
// task's end. It served the turn at once, not stored yet: the v0.3
// subscription ended with "Task not found" after Paris's turn (seen in a
// loaded run of TestResubscribeFollowsTurnQueuedSince). Rome's turn is
// recorded here by hand and stored once the stream has looked it up more
// often than serving it does.
func TestSubscriptionAwaitsQueuedTurnsPublish(t *testing.T) {
	for name, subscribe := range taskSubscribers(t) {
		t.Run(name, func(t *testing.T) {
			g, ctx, c, task := askedParisRome(t)
			paris := up.Reply(task, "Paris")
			paris.Config = &a2a.SendMessageConfig{ReturnImmediately: true} // no wait of its own for Rome
			if _, err := c.SendMessage(ctx, paris); err != nil {
				t.Fatal(err)
			}
			if s := <-g.started; s != "Paris" {
				t.Fatalf("started %q", s)
			}
			lines := subscribed(ctx, subscribe(ctx, g.URL, task))

			rome := uuid.Must(uuid.NewV7()).String()
			lookups := lookupsOf(t, g.NC, "$JS.API.>", rome)
			parisID := recordTurn(t, ctx, g, task, rome)
			close(g.gates["Paris"])
			// Serving a request looks it up at most three times (its frames,
			// its envelope, the leader's confirmation): a stream that looks
			// six times waits for it.
			for n := 0; n < 6; {
				select {
				case <-lookups:
					n++
				case seen := <-lines:
					t.Fatalf("the subscription ended before Rome's turn was stored: %s", strings.Join(seen, " | "))
				case <-ctx.Done():
					t.Fatal("Rome's turn was looked up only", n, "times")
				}
			}
			subj, _ := subjects.Request("gated", rome)
			env := fmt.Sprintf(`{"request_id":%q,"task_id":%q,"context_id":%q,"method":"message/send","params":{"text":"Rome"},`+
				`"provenance":{"source_protocol":"a2a"}}`, rome, task.ID, task.ContextID)
			m := nats.NewMsg(subj)
			m.Data = []byte(env)
			m.Header.Set(subjects.HeaderMsgID, rome)
			m.Header.Set(subjects.HeaderRequestID, rome)
			m.Header.Set(subjects.HeaderAfterRequest, parisID)
			if _, err := g.JS.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
			if s := <-g.started; s != "Rome" {
				t.Fatalf("started %q", s)
			}
			close(g.gates["Rome"])
			followedRome(t, "the subscription", <-lines)
		})
	}
}
