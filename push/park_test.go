package push_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	var healed atomic.Bool
	r := newReceiver(t, func(int, http.ResponseWriter) int {
		if healed.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
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
