package push_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// cursorKeys are the E2A_PUSH bucket's delivery cursors (cur.*).
func cursorKeys(t testing.TB, e *env) []string {
	t.Helper()
	ctx := tctx(t)
	kv, err := e.js.KeyValue(ctx, streams.PushBucket)
	if err != nil {
		t.Fatal(err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range lister.Keys() {
		if strings.HasPrefix(k, "cur.") {
			out = append(out, k)
		}
	}
	return out
}

// TestDeletedConfigGetsNoMoreUpdates: a config deleted while its webhook
// answers one POST gets no further POST, and its cursor stays deleted.
// The lane delivered from the config read when each message came: after
// Store.Delete answered (and the client's
// DeleteTaskPushNotificationConfig succeeded), the updates queued behind
// the POST in flight were still posted (the deleted cursor read as an
// empty one, so the next message was taken as the config's next), and
// the cursor was created again in the bucket (kv.Create succeeds over a
// delete marker): a cursor of no config, kept until the key's age ended.
// Found by a review.
func TestDeletedConfigGetsNoMoreUpdates(t *testing.T) {
	e := newEnvOn(t)
	reg := prometheus.NewRegistry()
	e.startStage(push.WithRegisterer(reg))
	inFlight := make(chan struct{})
	release := make(chan struct{})
	r := newReceiver(t, func(n int, _ http.ResponseWriter) int {
		if n == 0 {
			close(inFlight)
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
		}
		return http.StatusOK
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	c := e.create("alice", push.Config{TaskID: "del-flight", URL: r.srv.URL})
	storeRequestAfter(t, e, "del-flight-r1", "alice", "del-flight", "")
	storeFrame(t, e, "del-flight-r1", "alice", "del-flight", 0, "a", false)
	storeFrame(t, e, "del-flight-r1", "alice", "del-flight", 1, "b", false)
	storeFrame(t, e, "del-flight-r1", "alice", "del-flight", 2, "", true)
	select {
	case <-inFlight:
	case <-time.After(20 * time.Second):
		t.Fatal("no POST")
	}
	// Every message is rendered, so handed to the config's lane (queued
	// behind the POST in flight), before the config is deleted.
	testkit.Eventually(t, 20*time.Second, "the three messages rendered", func() bool {
		return counter(t, reg, "e2a_push_rendered_total") >= 3
	})
	if err := e.store.Delete(tctx(t), "alice", "del-flight", c.ID); err != nil {
		t.Fatal(err)
	}
	atDelete := r.started()
	close(release) // the POST in flight completes (docs/push.md)
	testkit.Eventually(t, 20*time.Second, "the push consumer idle", func() bool { return consumerIdle(t, e) })
	if got := r.started(); got != atDelete {
		t.Errorf("%d POSTs started after the config was deleted (%d before): a deleted config got updates", got-atDelete, atDelete)
	}
	if keys := cursorKeys(t, e); len(keys) != 0 {
		t.Errorf("the deleted config's cursor is in the bucket again: %v", keys)
	}
}

// TestRedeliverKeepsTheBodysVersion: updates dead-lettered for an A2A
// v0.3 config (their bodies the v0.3 Task), its id then set again as an
// A2A v1.0 config, are dropped by a redelivery, not posted. They were
// posted as that v0.3 Task under the v1.0 token header
// A2A-Notification-Token: a v1.0 receiver got a body that is no
// StreamResponse. Found by a review.
func TestRedeliverKeepsTheBodysVersion(t *testing.T) {
	e := newEnvOn(t)
	e.startStage()
	old := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusBadRequest })
	e.create("alice", push.Config{TaskID: "ver", ID: "hook", URL: old.srv.URL, Token: "t03", Version: push.V03})
	storeRequestAfter(t, e, "ver-r1", "alice", "ver", "")
	storeFrame(t, e, "ver-r1", "alice", "ver", 0, "a", false)
	storeFrame(t, e, "ver-r1", "alice", "ver", 1, "", true)
	filter := push.DeadFilter{Principal: "alice", TaskID: "ver"}
	testkit.Eventually(t, 20*time.Second, "both updates dead-lettered", func() bool {
		d, err := push.ListDead(context.Background(), e.nc, filter, 100)
		return err == nil && len(d) == 2
	})
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "ver", ID: "hook", URL: r.srv.URL, Token: "t1", Version: push.V1})
	rep, err := push.Redeliver(tctx(t), e.nc, filter, push.WithAllowHosts("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.all() {
		var sr map[string]json.RawMessage
		if err := json.Unmarshal(d.body, &sr); err != nil {
			t.Fatal(err)
		}
		_, s := sr["statusUpdate"]
		_, a := sr["artifactUpdate"]
		_, k := sr["task"]
		_, m := sr["message"]
		if !s && !a && !k && !m {
			t.Errorf("update %s posted to a v1.0 config (token header %s) with a body that is no StreamResponse: %.120s",
				d.eventID, push.HeaderTokenV1, d.body)
		}
	}
	if rep.Dropped != 2 || rep.Delivered != 0 || rep.Kept != 0 {
		t.Errorf("redelivery report %+v: want the two v0.3 updates dropped, as a deleted config's", rep)
	}
	if d, err := push.ListDead(tctx(t), e.nc, filter, 100); err != nil || len(d) != 0 {
		t.Errorf("dead letters left after the redelivery: %d %v", len(d), err)
	}
}
