package push_test

import (
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// goneTask is a task of alice with two configs: one whose webhook
// answers each POST as answer says (gone), one whose webhook accepts them
// (ok, made second), after two turns of the task (4 and 2 chunks) and
// the stage done with every frame of them (consumerIdle).
type goneTask struct {
	e        *env
	reg      *prometheus.Registry
	gone, ok *receiver
	c, ctl   push.Config
}

func runGoneTask(t *testing.T, answer func(n int, w http.ResponseWriter) int, goneURL func(base string) string) *goneTask {
	t.Helper()
	g := &goneTask{e: newEnv(t), reg: prometheus.NewRegistry()}
	g.e.startStage(push.WithRegisterer(g.reg))
	g.gone = newReceiver(t, answer)
	g.ok = newReceiver(t, nil)
	g.c = g.e.create("alice", push.Config{TaskID: "t1", ID: "a-hook", URL: goneURL(g.gone.srv.URL), Token: "tok-gone-secret"})
	g.ctl = g.e.create("alice", push.Config{TaskID: "t1", ID: "b-control", URL: g.ok.srv.URL})
	first := g.e.turn("alice", "t1", "", "a", 4)
	testkit.Eventually(t, 20*time.Second, "the first turn handled", func() bool {
		return completedCount(t, push.V1, g.ok.accepted()) == 1 && consumerIdle(t, g.e)
	})
	g.e.turn("alice", "t1", first, "b", 2)
	testkit.Eventually(t, 20*time.Second, "the second turn handled", func() bool {
		return completedCount(t, push.V1, g.ok.accepted()) == 2 && consumerIdle(t, g.e)
	})
	return g
}

// always answers every POST with status.
func always(status int) func(int, http.ResponseWriter) int {
	return func(int, http.ResponseWriter) int { return status }
}

// TestGoneEndsConfig: a webhook answering 410 Gone ends its config's
// deliveries (REST Hooks' convention: the subscription is gone for good).
// Its config is deleted (no longer listed, its cursor gone), the update it
// answered is neither retried nor dead-lettered, and it gets no other
// update of the task's two turns (exactly one POST), while the task's
// other config gets all of them. The deletion is logged with the
// webhook's host only (not its secret path, query or token) and counted
// (e2a_push_gone_total). Before, a 410 was refused as any 4xx: each
// update was POSTed and dead-lettered in turn (the gone webhook got 6
// POSTs, E2A_PUSH_DEAD 6 dead letters, the config stayed listed, its
// cursor stored).
func TestGoneEndsConfig(t *testing.T) {
	const secretPath, secretQuery = "P4THSECRETd81c", "QUERYSECRET5e2b"
	g := runGoneTask(t, always(http.StatusGone), func(base string) string {
		return base + "/hooks/" + secretPath + "?key=" + secretQuery
	})
	e := g.e
	if got := g.gone.all(); len(got) != 1 {
		t.Errorf("the gone webhook got %d POSTs, want exactly 1", len(got))
	} else if got[0].eventID != g.ok.all()[0].eventID {
		t.Errorf("the gone webhook got update %s, want the task's first, %s", got[0].eventID, g.ok.all()[0].eventID)
	}
	listed, _, err := e.store.List(tctx(t), "alice", "t1", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ID != g.ctl.ID {
		t.Errorf("configs listed %v, want the control config only", listed)
	}
	if _, err := e.store.Get(tctx(t), "alice", "t1", g.c.ID); err != push.ErrNotFound {
		t.Errorf("Get of the gone config: %v, want ErrNotFound", err)
	}
	if slices.Contains(cursorKeys(t, e), push.CursorKey("alice", "t1", g.c.ID)) {
		t.Errorf("the gone config's cursor is still stored")
	}
	dead, err := push.ListDead(tctx(t), e.nc, push.DeadFilter{Principal: "alice", TaskID: "t1"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 0 {
		t.Errorf("%d dead letters, want none (the 410'd update is not dead-lettered): %+v", len(dead), dead)
	}
	if n := counter(t, g.reg, "e2a_push_gone_total"); n != 1 {
		t.Errorf("e2a_push_gone_total %v, want 1", n)
	}
	logs := e.log.String()
	if !strings.Contains(logs, "410 Gone; config deleted") {
		t.Errorf("the deletion is not logged:\n%s", logs)
	}
	for _, secret := range []string{secretPath, secretQuery, "tok-gone-secret"} {
		if line := firstLine(logs, secret); line != "" {
			t.Errorf("the stage's log holds the config's secret %q: %s", secret, line)
		}
	}
}

// TestNotFoundKeepsConfig: any other 4xx keeps its behaviour: a webhook
// answering 404 gets every update of the task once, each dead-lettered
// at once, and its config stays (listed, its dead letters kept for a
// redelivery); the gone counter stays 0.
func TestNotFoundKeepsConfig(t *testing.T) {
	g := runGoneTask(t, always(http.StatusNotFound), func(base string) string { return base })
	want := len(g.ok.accepted())
	if got := len(g.gone.all()); got != want {
		t.Errorf("the 404 webhook got %d POSTs, want one per update: %d", got, want)
	}
	if _, err := g.e.store.Get(tctx(t), "alice", "t1", g.c.ID); err != nil {
		t.Errorf("Get of the 404 webhook's config: %v, want it kept", err)
	}
	dead, err := push.ListDead(tctx(t), g.e.nc, push.DeadFilter{Principal: "alice", TaskID: "t1", ConfigID: g.c.ID}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != want || dead[0].Status != http.StatusNotFound {
		t.Errorf("%d dead letters (%+v), want %d with status 404", len(dead), dead, want)
	}
	if n := counter(t, g.reg, "e2a_push_gone_total"); n != 0 {
		t.Errorf("e2a_push_gone_total %v, want 0", n)
	}
}

// TestGoneWhileParked: a webhook that failed (503: its config parked,
// backing off, the task's next updates handed to its backlog) and then
// answers the retry 410 Gone: the drain deletes the config and ends
// there: two POSTs of the same update, nothing else, no wake-up left.
func TestGoneWhileParked(t *testing.T) {
	g := runGoneTask(t, func(n int, _ http.ResponseWriter) int {
		if n == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusGone
	}, func(base string) string { return base })
	testkit.Eventually(t, 20*time.Second, "the config deleted, its wake-up settled", func() bool {
		_, err := g.e.store.Get(tctx(t), "alice", "t1", g.c.ID)
		return err == push.ErrNotFound && len(wakeKeys(t, g.e)) == 0
	})
	got := g.gone.all()
	if len(got) != 2 || got[0].eventID != got[1].eventID || got[1].code != http.StatusGone {
		t.Errorf("the webhook got %d POSTs, want the first update twice, answered 503 then 410: %+v", len(got), got)
	}
	if n := counter(t, g.reg, "e2a_push_gone_total"); n != 1 {
		t.Errorf("e2a_push_gone_total %v, want 1", n)
	}
}

// TestRedeliverGone: a redelivery whose webhook answers 410 Gone deletes
// the config as the stage does and drops its dead letters (the
// config's, which no redelivery could deliver), saying so; it posts
// none after the 410. Before, they were kept (a failure like any).
func TestRedeliverGone(t *testing.T) {
	var gone atomic.Bool
	g := runGoneTask(t, func(int, http.ResponseWriter) int {
		if gone.Load() {
			return http.StatusGone
		}
		return http.StatusBadRequest
	}, func(base string) string { return base })
	filter := push.DeadFilter{Principal: "alice", TaskID: "t1", ConfigID: g.c.ID}
	dead, err := push.ListDead(tctx(t), g.e.nc, filter, 100)
	if err != nil || len(dead) < 2 {
		t.Fatalf("dead letters %d, %v; want the task's updates", len(dead), err)
	}
	gone.Store(true)
	posted := len(g.gone.all())
	rep, err := push.Redeliver(tctx(t), g.e.nc, filter, push.WithAllowHosts("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Dropped != len(dead) || rep.Kept != 0 || rep.Delivered != 0 || len(rep.Failures) != 1 ||
		!strings.Contains(rep.Failures[0], "410 Gone; config deleted") {
		t.Errorf("redelivery %+v; want the %d dead letters dropped, the config deleted", rep, len(dead))
	}
	if n := len(g.gone.all()) - posted; n != 1 {
		t.Errorf("the redelivery posted %d updates, want 1 (the one answered 410)", n)
	}
	if _, err := g.e.store.Get(tctx(t), "alice", "t1", g.c.ID); err != push.ErrNotFound {
		t.Errorf("Get after the redelivery's 410: %v, want ErrNotFound", err)
	}
	if left, err := push.ListDead(tctx(t), g.e.nc, filter, 100); err != nil || len(left) != 0 {
		t.Errorf("dead letters left: %d, %v", len(left), err)
	}
}
