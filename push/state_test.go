package push_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestDeliveries: Store.Deliveries shows each of a task's configs to its
// owner: the webhook that accepts everything has handled up to the turn's
// last update (its event id) with nothing failing; the one down past the
// retry window is in dead-letter mode with its dead letters counted. The
// state names the host only: no path, token or credentials. Another
// principal gets nothing for the task, as for a task without configs.
func TestDeliveries(t *testing.T) {
	e := newEnv(t)
	e.startStage(push.WithRetryWindow(300 * time.Millisecond))
	ok := newReceiver(t, nil)
	down := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusServiceUnavailable })
	e.create("alice", push.Config{TaskID: "t1", ID: "a-ok", URL: ok.srv.URL + "/secret-path?k=secret-query", Token: "tok-secret",
		Auth: &push.Auth{Scheme: "Bearer", Credentials: "cred-secret"}})
	e.create("alice", push.Config{TaskID: "t1", ID: "b-down", URL: down.srv.URL + "/hook", Token: "tok-secret"})
	if ds, err := e.store.Deliveries(tctx(t), "alice", "t1"); err != nil || len(ds) != 2 || ds[0].LastEvent != "" || ds[0].DeadLetters != 0 {
		t.Fatalf("before any update: %+v %v", ds, err)
	}
	id := e.turn("alice", "t1", "", "a", 3)
	var ds []push.DeliveryState
	testkit.Eventually(t, 30*time.Second, "the turn handled by both configs", func() bool {
		var err error
		ds, err = e.store.Deliveries(tctx(t), "alice", "t1")
		if err != nil {
			t.Fatal(err)
		}
		last := ""
		if got := ok.accepted(); len(got) > 0 {
			last = got[len(got)-1].eventID
		}
		return len(ds) == 2 && completedCount(t, push.V1, ok.accepted()) == 1 && ds[0].LastEvent == last &&
			ds[1].DeadLetterMode && ds[1].LastEvent == last
	})
	a, b := ds[0], ds[1]
	if a.ConfigID != "a-ok" || a.Host != strings.TrimPrefix(ok.srv.URL, "http://") || !strings.HasPrefix(a.LastEvent, id+":") ||
		a.Attempts != 0 || !a.FailingSince.IsZero() || a.DeadLetterMode || a.DeadLetters != 0 || a.Version != push.V1 {
		t.Errorf("the accepting webhook's state %+v", a)
	}
	updates := map[string]bool{}
	for _, d := range ok.accepted() {
		updates[d.eventID] = true
	}
	if b.ConfigID != "b-down" || b.DeadLetters != uint64(len(updates)) || b.Host != strings.TrimPrefix(down.srv.URL, "http://") {
		t.Errorf("the failing webhook's state %+v: want every update (%d) dead-lettered", b, len(updates))
	}
	raw, _ := json.Marshal(ds)
	for _, secret := range []string{"secret-path", "secret-query", "tok-secret", "cred-secret", "/hook"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the delivery state shows %q: %s", secret, raw)
		}
	}
	if bob, err := e.store.Deliveries(tctx(t), "bob", "t1"); err != nil || len(bob) != 0 {
		t.Errorf("bob's view of alice's task: %+v %v", bob, err)
	}
}
