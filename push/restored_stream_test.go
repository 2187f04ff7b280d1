package push_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestRestoredStreamNotServedFromTheCache: the stage keeps the messages
// it rendered by stream sequence (a message handed to a parked config
// stays for its drain), and E2A_RESPONSES made again under it (restored
// from a backup, or removed and applied again: its consumer goes with
// it, and the stage binds a new one) numbers its messages from there
// again. Bob's first update is stored at the sequence alice's parked
// message had: bob's webhook gets his own turn, never alice's update
// from the cache (it got her text, under her request's event ids).
func TestRestoredStreamNotServedFromTheCache(t *testing.T) {
	e := newEnvOn(t)
	e.startStage()
	failing, _ := healingReceiver(t)
	e.create("alice", push.Config{TaskID: "ta", URL: failing.srv.URL})
	storeRequest(t, e, "alice-r1", "alice", "ta")
	storeFrame(t, e, "alice-r1", "alice", "ta", 0, "alice-secret;", false)
	storeFrame(t, e, "alice-r1", "alice", "ta", 1, "", true)
	testkit.Eventually(t, 20*time.Second, "alice's config parked, the consumer idle", func() bool {
		return failing.started() > 0 && consumerIdle(t, e)
	})

	remakeResponses(t, e)
	bob := newReceiver(t, nil)
	defer e.logOnFailure(t)
	defer func() {
		if t.Failed() {
			for _, d := range bob.all() {
				t.Logf("bob got %s %.200s", d.eventID, d.body)
			}
		}
	}()
	e.create("bob", push.Config{TaskID: "tb", URL: bob.srv.URL})
	storeRequest(t, e, "bob-r1", "bob", "tb")
	storeFrame(t, e, "bob-r1", "bob", "tb", 0, "bob1;", false)
	storeFrame(t, e, "bob-r1", "bob", "tb", 1, "", true)
	testkit.Eventually(t, 30*time.Second, "bob's final update handled", func() bool {
		ds, err := e.store.Deliveries(context.Background(), "bob", "tb")
		return err == nil && len(ds) == 1 && strings.HasPrefix(ds[0].LastEvent, "bob-r1:1:")
	})
	for _, d := range bob.all() {
		if strings.Contains(string(d.body), "alice") || !strings.HasPrefix(d.eventID, "bob-r1:") {
			t.Errorf("bob's webhook got alice's update %s: %.300s", d.eventID, d.body)
		}
	}
	ordered(t, push.V1, bob.accepted(), []string{"bob"}, "bob1;")
}
