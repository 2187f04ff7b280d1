package push_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// wakeKeys lists the parked configs' wake-up keys in E2A_PUSH with their
// revisions.
func wakeKeys(t testing.TB, e *env) map[string]uint64 {
	t.Helper()
	ctx := tctx(t)
	kv, err := e.js.KeyValue(ctx, streams.PushBucket)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range lister.Keys() {
		if !strings.HasPrefix(k, "wake.") {
			continue
		}
		en, err := kv.Get(ctx, k)
		if err == nil {
			out[k] = en.Revision()
		}
	}
	return out
}

// TestParkedConfigDrainedPastBucketTTL: E2A_PUSH keys age out after
// TasksTTL (the task's config and the cursor are written again as the
// task goes on, so they stay); the wake-up key is written once, when the
// config is parked, and again by wakeLater once a third of the TTL old.
// A webhook failing for longer than TasksTTL (retry window 24 h by
// default; docs/capacity.md has E2A_TASKS_TTL set to the hot streams' max
// age) while its task keeps answering: once the webhook is back, every
// turn is delivered, in order (the wake-up aged out before, and the
// config stayed parked for ever).
func TestParkedConfigDrainedPastBucketTTL(t *testing.T) {
	sc := streams.DefaultConfig()
	sc.TasksTTL = 2 * time.Second
	e := newEnv(t, push.WithStreamsConfig(sc))
	e.startStage(push.WithStreamsConfig(sc))
	r, healed := healingReceiver(t)
	e.create("alice", push.Config{TaskID: "ttl", URL: r.srv.URL})
	var turns []string
	after := ""
	next := func() {
		label := fmt.Sprintf("t%d", len(turns))
		after = e.turn("alice", "ttl", after, label, 2)
		turns = append(turns, label)
	}
	next()
	testkit.Eventually(t, 10*time.Second, "the failing config parked (a wake-up key written)", func() bool {
		return len(wakeKeys(t, e)) == 1
	})
	parked, ttl := time.Now(), 2*time.Second
	// The task keeps answering (each turn renews its configs' key) for
	// twice the bucket's TTL while the webhook fails.
	last := time.Now()
	testkit.Eventually(t, 30*time.Second, "the task answered for 2×TasksTTL", func() bool {
		if time.Since(last) > 500*time.Millisecond {
			next()
			last = time.Now()
		}
		return time.Since(parked) > 2*ttl
	})
	if _, err := e.store.Get(tctx(t), "alice", "ttl", mustOnlyConfig(t, e, "alice", "ttl")); err != nil {
		t.Fatalf("the config aged out while its task answered: %v", err)
	}
	healed.Store(true)
	next()
	testkit.Eventually(t, 15*time.Second, fmt.Sprintf("a parked config is drained once its webhook is back, however long it was parked: all %d turns delivered (wake-up keys now: %v)", len(turns), wakeKeys(t, e)), func() bool {
		return completedCount(t, push.V1, r.accepted()) == len(turns)
	})
	ordered(t, push.V1, r.accepted(), turns, expectText(turns, 2))
}

func mustOnlyConfig(t testing.TB, e *env, principal, task string) string {
	t.Helper()
	ds, err := e.store.Deliveries(tctx(t), principal, task)
	if err != nil || len(ds) != 1 {
		t.Fatalf("configs of %s: %v %v", task, ds, err)
	}
	return ds[0].ConfigID
}

// TestDeletedParkedConfigLeavesNoWake: a config deleted while it is
// parked: the drain that finds it gone acks its wake-up and deletes its
// key (it stayed in E2A_PUSH until E2A_TASKS_TTL; for ever with 0).
func TestDeletedParkedConfigLeavesNoWake(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	r := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusServiceUnavailable })
	c := e.create("alice", push.Config{TaskID: "del", URL: r.srv.URL})
	e.turn("alice", "del", "", "", 3)
	testkit.Eventually(t, 10*time.Second, "the failing config parked", func() bool {
		return len(wakeKeys(t, e)) == 1 && r.started() > 1
	})
	if err := e.store.Delete(tctx(t), "alice", "del", c.ID); err != nil {
		t.Fatal(err)
	}
	// The drain runs again (its wake-up is nak'd for the 5..50 ms backoff)
	// and finds the config gone.
	testkit.Eventually(t, 10*time.Second, "the wake-up consumer has nothing pending (the drain saw the config gone)", func() bool {
		ci, err := e.js.Consumer(context.Background(), "KV_"+streams.PushBucket, push.DefaultConsumer+"-wake")
		if err != nil {
			return false
		}
		info, err := ci.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.NumRedelivered == 0
	})
	if got := wakeKeys(t, e); len(got) != 0 {
		t.Errorf("a deleted config's wake-up key is deleted with it (or by the drain that finds it gone); left: %v", got)
	}
}

// TestParkedBacklogStaysBounded: a parked config's cursor stays the
// same size whatever the number of turns of its task parked (its backlog
// names the first and the last turn, not every one), so every message of
// the task can be handed to it and acked while its webhook is down. When
// the backlog listed every turn (ids up to subjects.MaxIDLength, 1 KiB;
// turns as many as the task has within the retry window, 24 h) the
// cursor outgrew max_payload (1 MiB by default, about a thousand turns of
// 1 KiB ids; 64 KiB here, about sixty): no message of the task could be
// handed to the config, each was nak'd and redelivered for as long as the
// webhook stayed down, and the task's messages filled the consumer's
// MaxAckPending (8 here, as in TestFailingTenantDoesNotStopOthers):
// another tenant's task was not delivered at all.
func TestParkedBacklogStaysBounded(t *testing.T) {
	e := newEnvOn(t, natstest.WithMaxPayload(64<<10))
	e.startStage(push.WithMaxAckPending(8))
	down, healed := healingReceiver(t)
	e.create("alice", push.Config{TaskID: "chatty", URL: down.srv.URL})
	after := ""
	const turnsN = 90
	var ids []string
	for i := range turnsN {
		id := fmt.Sprintf("%s-%04d", strings.Repeat("q", 1000), i)
		storeRequestAfter(t, e, id, "alice", "chatty", after)
		storeFrame(t, e, id, "alice", "chatty", 0, "", true)
		after = id
		ids = append(ids, id)
		if i == 0 {
			testkit.Eventually(t, 10*time.Second, "alice's failing config parked", func() bool {
				return len(wakeKeys(t, e)) == 1
			})
		}
	}
	bob := newReceiver(t, nil)
	e.create("bob", push.Config{TaskID: "quiet", URL: bob.srv.URL})
	storeRequestAfter(t, e, "bob-1", "bob", "quiet", "")
	storeFrame(t, e, "bob-1", "bob", "quiet", 0, "hello;", false)
	storeFrame(t, e, "bob-1", "bob", "quiet", 1, "", true)
	// Bob's task is delivered within seconds when nothing holds the
	// consumer (TestFailingTenantDoesNotStopOthers); given 10.
	deadline := time.Now().Add(10 * time.Second)
	testkit.Eventually(t, 30*time.Second, "bob's task delivered, or 10 s passed", func() bool {
		return completedCount(t, push.V1, bob.accepted()) == 1 || time.Now().After(deadline)
	})
	if completedCount(t, push.V1, bob.accepted()) != 1 {
		c, err := e.js.Consumer(context.Background(), streams.ResponsesStream, push.DefaultConsumer)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("another tenant's task not delivered in 10 s: the consumer has %d messages ack-pending (bound 8), %d "+
			"redelivered, %d not delivered yet; the stage logged %d times \"delivery state unavailable\" (%s)",
			info.NumAckPending, info.NumRedelivered, info.NumPending, strings.Count(e.log.String(), "delivery state unavailable"),
			firstLine(e.log.String(), "delivery state unavailable"))
	}
	// Its webhook back, the parked config gets every turn, in order.
	healed.Store(true)
	testkit.Eventually(t, 60*time.Second, "every turn of alice's task delivered after recovery", func() bool {
		return len(completedBy(t, down)) == turnsN
	})
	var order []string
	for _, d := range down.accepted() {
		if req, _, _ := splitID(d.eventID); len(order) == 0 || order[len(order)-1] != req {
			order = append(order, req)
		}
	}
	if !slices.Equal(order, ids) {
		t.Fatalf("turns delivered out of order: %d deliveries of %d turns", len(order), len(ids))
	}
}
