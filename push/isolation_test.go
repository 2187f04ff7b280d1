package push_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestFailingTenantDoesNotStopOthers: the consumer holds at most 8
// messages (WithMaxAckPending); tenant alice's webhooks fail (503) or
// hang (past the delivery timeout) while her tasks store many more
// response messages than that. Bob's task, afterwards, is delivered
// within seconds all the same: a config whose webhook cannot take an
// update is parked and holds no message of the consumer. Once alice's
// webhooks recover they get every update of her tasks, in order, none
// missing (duplicates only with the same id and body).
func TestFailingTenantDoesNotStopOthers(t *testing.T) {
	for _, c := range []struct {
		mode, version string
		replicas      int
	}{{"503", push.V1, 1}, {"hang", push.V1, 1}, {"503", push.V03, 2}, {"hang", push.V1, 2}} {
		t.Run(fmt.Sprintf("%s-%s-%d", c.mode, c.version, c.replicas), func(t *testing.T) {
			failingTenant(t, c.mode, c.version, c.replicas)
		})
	}
}

func failingTenant(t *testing.T, mode, version string, replicas int) {
	e := newEnv(t)
	for range replicas {
		e.startStage(push.WithMaxAckPending(8), push.WithTimeout(300*time.Millisecond))
	}
	recovered := make(chan struct{})
	var once sync.Once
	heal := func() { once.Do(func() { close(recovered) }) }
	defer heal()
	down := func(int, http.ResponseWriter) int {
		select {
		case <-recovered:
			return http.StatusOK
		default:
		}
		if mode == "hang" {
			<-recovered // past the stage's timeout: it gave up on this call
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	}
	const tasks, chunks = 3, 4
	turns := []string{"a", "b", "c"}
	var alice []*receiver
	var requests []string
	for i := range tasks {
		r := newReceiver(t, down)
		alice = append(alice, r)
		task := fmt.Sprintf("a-%d", i)
		e.create("alice", push.Config{TaskID: task, URL: r.srv.URL, Version: version})
		after := ""
		for _, label := range turns {
			after = e.turn("alice", task, after, label, chunks)
			requests = append(requests, after)
		}
	}
	// Every turn of alice's is stored: far more messages than the
	// consumer may hold.
	testkit.Eventually(t, 20*time.Second, "alice's turns stored", func() bool {
		n := 0
		for _, id := range requests {
			n += subjectCount(t, e, id)
		}
		return n >= 2*len(requests) && n > 8
	})
	testkit.Eventually(t, 10*time.Second, "alice's webhooks called", func() bool {
		for _, r := range alice {
			if r.started() > 0 {
				return true
			}
		}
		return false
	})
	bob := newReceiver(t, nil)
	e.create("bob", push.Config{TaskID: "b-0", URL: bob.srv.URL})
	e.turn("bob", "b-0", "", "", 4)
	testkit.Eventually(t, 5*time.Second, "bob's task delivered while alice's webhooks are down", func() bool {
		return completedCount(t, push.V1, bob.accepted()) == 1
	})
	ordered(t, push.V1, bob.accepted(), []string{""}, expectText([]string{""}, 4))
	heal()
	want := expectText(turns, chunks)
	for i, r := range alice {
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("alice's task %d delivered after recovery", i), func() bool {
			return completedCount(t, version, r.accepted()) == len(turns)
		})
		ordered(t, version, r.accepted(), turns, want)
	}
}

// subjectCount is the number of stored response messages of request id.
func subjectCount(t testing.TB, e *env, id string) int {
	t.Helper()
	st, err := e.js.Stream(context.Background(), streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter("e2a.resp."+id))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Subjects["e2a.resp."+id])
}
