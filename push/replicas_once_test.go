package push_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// TestRedeliveredMessagePostedOnce: a replica holds a message past its
// ack wait before intake takes it (its callback held, as a slow intake
// or a full pull buffer holds one), so the consumer gives it to the
// other replica, which posts its update; the first replica's intake then
// takes its copy while that POST is in flight. The update is posted
// once: the second replica claimed its POST in the cursor first
// (cursor.Poster), and the first, finding the claim, hands the message
// to the config's backlog. (Before, both read the cursor before either
// wrote it, and both posted: every duplicate seen between two live
// replicas in TestTwoReplicasPostEachUpdateOnce under -race was such a
// redelivery.)
func TestRedeliveredMessagePostedOnce(t *testing.T) {
	e := newEnvOn(t)
	defer e.logOnFailure(t)
	type intake struct {
		stage     string
		delivered uint64
	}
	intakes := make(chan intake, 64)
	release := make(chan struct{})
	var holding atomic.Bool
	hook := func(name string) push.Option {
		return push.WithBeforeIntake(func(msg jetstream.Msg) {
			md, err := msg.Metadata()
			if err != nil {
				return
			}
			select {
			case intakes <- intake{name, md.NumDelivered}:
			default:
			}
			if md.NumDelivered == 1 && holding.CompareAndSwap(false, true) {
				<-release
			}
		})
	}
	e.startStage(hook("a"))
	e.startStage(hook("b"))
	posts := make(chan int, 64)
	webhook := make(chan struct{})
	r := newReceiver(t, func(n int, _ http.ResponseWriter) int {
		posts <- n
		if n == 0 {
			<-webhook
		}
		return http.StatusOK
	})
	var once1, once2 sync.Once
	free := func() { once1.Do(func() { close(release) }) }
	answer := func() { once2.Do(func() { close(webhook) }) }
	t.Cleanup(func() { free(); answer() }) // before the stages stop and the receiver closes

	e.create("alice", push.Config{TaskID: "held", URL: r.srv.URL})
	storeRequestAfter(t, e, "held-r1", "alice", "held", "")
	storeFrame(t, e, "held-r1", "alice", "held", 0, "", true)
	holder := testkit.Receive(t, intakes, 20*time.Second, "the message delivered").stage
	for {
		in := testkit.Receive(t, intakes, 20*time.Second, "the message redelivered to the other replica")
		if in.stage != holder && in.delivered > 1 {
			break
		}
	}
	testkit.Receive(t, posts, 20*time.Second, "the other replica's POST")
	free()
	testkit.Eventually(t, 20*time.Second, "the holder's intake parked the config or posted", func() bool {
		return len(wakeKeys(t, e)) > 0 || r.started() > 1
	})
	answer()
	testkit.Eventually(t, 20*time.Second, "the update delivered, the config un-parked", func() bool {
		return completedBy(t, r)["held-r1"] && consumerIdle(t, e) && len(wakeKeys(t, e)) == 0
	})
	posted := map[string]int{}
	for _, d := range r.all() {
		posted[d.eventID]++
	}
	for id, n := range posted {
		if n > 1 {
			t.Errorf("update %s posted %d times", id, n)
		}
	}
}
