package push_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestTwoReplicasPostEachUpdateOnce: two replicas share the consumer and
// a slow webhook (each POST takes 100 ms) while the tasks' messages come
// faster than it answers, so a message reaches a replica while the other
// replica's POST of the message before it is in flight, and the config is
// parked. Each update is posted once: the parked config's drain, on
// either replica, does not post the update whose POST is in flight
// elsewhere. (Before, about one update in five was posted twice, within
// a second: the drain read the cursor before the in-flight POST moved it.)
func TestTwoReplicasPostEachUpdateOnce(t *testing.T) {
	e := newEnv(t)
	defer e.logOnFailure(t)
	e.startStage()
	e.startStage()
	r := newReceiver(t, func(int, http.ResponseWriter) int {
		time.Sleep(100 * time.Millisecond)
		return http.StatusOK
	})
	const tasks, chunks = 10, 10
	for i := range tasks {
		e.create("alice", push.Config{TaskID: fmt.Sprintf("once-%d", i), URL: r.srv.URL})
	}
	for i := range tasks {
		e.turn("alice", fmt.Sprintf("once-%d", i), "", "", chunks)
	}
	testkit.Eventually(t, 60*time.Second, "every task completed", func() bool {
		return completedCount(t, push.V1, r.accepted()) == tasks
	})
	posted := map[string]int{}
	twice := 0
	for _, d := range r.all() {
		if posted[d.eventID]++; posted[d.eventID] == 2 {
			twice++
			t.Logf("twice: %s", d.eventID)
		}
	}
	if twice > 0 || r.started() != len(posted) {
		t.Errorf("%d updates posted %d times (%d POSTs started): %d posted more than once", len(posted), len(r.all()), r.started(), twice)
	}
}
