package push_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// finalStored waits until request id's final frame is stored.
func finalStored(t *testing.T, e *env, id string) {
	t.Helper()
	subj, _ := subjects.Response(id)
	testkit.Eventually(t, 20*time.Second, "final frame of "+id+" stored", func() bool {
		raw, err := streams.LastBySubject(context.Background(), e.nc, streams.ResponsesStream, subj)
		if err != nil {
			return false
		}
		fs, err := e2a.BurstResponses(raw.Header.Get(subjects.HeaderFrames), raw.Data)
		return err == nil && len(fs) > 0 && fs[len(fs)-1].IsFinal
	})
}

// TestReplacedConfigStartsFresh: a config replaced under its id (A2A's
// set, e.g. to mend a failing URL) while its cursor sits on an earlier,
// failing turn gets the updates stored after it (docs/push.md), with none
// of the old config's failures. Before, the replacement kept the old
// cursor, which no later message could follow: the config never
// delivered again.
func TestReplacedConfigStartsFresh(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	var failing atomic.Bool
	r1 := newReceiver(t, func(int, http.ResponseWriter) int {
		if failing.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	r2 := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "t1", ID: "hook", URL: r1.srv.URL})
	a := e.turn("alice", "t1", "", "a", 2)
	e.handled("alice", "t1", r1)

	failing.Store(true)
	b := e.turn("alice", "t1", a, "b", 2)
	finalStored(t, e, b)
	testkit.Eventually(t, 10*time.Second, "r1 failing on turn b", func() bool {
		return len(r1.all()) > len(r1.accepted())
	})

	e.create("alice", push.Config{TaskID: "t1", ID: "hook", URL: r2.srv.URL})
	ds, err := e.store.Deliveries(tctx(t), "alice", "t1")
	if err != nil || len(ds) != 1 || !ds[0].FailingSince.IsZero() || ds[0].Attempts != 0 || ds[0].LastEvent != "" {
		t.Fatalf("the replaced config's delivery state %+v (%v), want a fresh one", ds, err)
	}
	c := e.turn("alice", "t1", b, "c", 2)
	finalStored(t, e, c)
	testkit.Eventually(t, 15*time.Second, "turn c's completion at the new URL", func() bool {
		return completedCount(t, push.V1, r2.accepted()) >= 1
	})
}

// TestUndecodableMessagePassed: a message on a request's response subject
// whose frames do not decode (a buggy or hostile writer) is skipped, and
// the configs' cursors pass it: what is stored after it is delivered.
// Before, the cursor stayed before it and nothing after it was ever the
// config's next message.
func TestUndecodableMessagePassed(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "t1", URL: r.srv.URL})
	gate := uuid.NewString()
	id := e.turnWith("alice", "t1", "", "", 4, map[string]any{"gate": gate})
	subj, _ := subjects.Response(id)
	testkit.Eventually(t, 10*time.Second, "the first chunk delivered", func() bool { return len(r.accepted()) >= 1 })
	if _, err := e.js.Publish(context.Background(), subj, []byte("not a frame")); err != nil {
		t.Fatal(err)
	}
	openGate(gate)
	// The request's writer then ends the request (its last stored frame
	// does not decode: an e2a.error); that final frame reaches the webhook.
	finalStored(t, e, id)
	testkit.Eventually(t, 15*time.Second, "an update stored after the bad message delivered", func() bool {
		return len(r.accepted()) > 1
	})
}
