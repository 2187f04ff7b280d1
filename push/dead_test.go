package push_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestDeadLetterAndRedeliver: the webhook is down longer than the retry
// window: the first update is dead-lettered at the window's end and every
// later one follows it, in order, without the token or credentials; the
// next turn too. Once the webhook is back, Redeliver posts them all in
// order with their original ids and the config leaves dead-letter mode:
// a third turn is delivered directly.
func TestDeadLetterAndRedeliver(t *testing.T) {
	e := newEnv(t)
	e.startStage(push.WithRetryWindow(300 * time.Millisecond))
	var up atomic.Bool
	r := newReceiver(t, func(int, http.ResponseWriter) int {
		if up.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	c := e.create("alice", push.Config{TaskID: "t1", URL: r.srv.URL, Token: "tok-secret",
		Auth: &push.Auth{Scheme: "Bearer", Credentials: "cred-secret"}})
	filter := push.DeadFilter{Principal: "alice", TaskID: "t1"}
	first := e.turn("alice", "t1", "", "a", 5)
	second := e.turn("alice", "t1", first, "b", 5)
	var dead []push.DeadLetter
	testkit.Eventually(t, 30*time.Second, "both turns dead-lettered", func() bool {
		var err error
		dead, err = push.ListDead(context.Background(), e.nc, filter, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return len(dead) > 0 && strings.HasPrefix(dead[len(dead)-1].EventID, second) && strings.Contains(string(dead[len(dead)-1].Body), "COMPLETED")
	})
	if dead[0].Attempts < 2 || dead[0].Failing.IsZero() || dead[0].ConfigID != c.ID || dead[0].Reason != "status 503" {
		t.Errorf("first dead letter %+v: want the retried update with its attempts and reason", dead[0])
	}
	// Nothing of the config's secrets is in the dead-letter stream.
	for _, d := range streamData(t, e, streams.PushDeadStream) {
		if strings.Contains(d, "tok-secret") || strings.Contains(d, "cred-secret") {
			t.Fatalf("a secret in E2A_PUSH_DEAD: %s", d)
		}
	}
	if n, err := push.ListDead(tctx(t), e.nc, push.DeadFilter{Principal: "bob", TaskID: "t1"}, 10); err != nil || len(n) != 0 {
		t.Errorf("bob lists %d of alice's dead letters (%v)", len(n), err)
	}
	calls := len(r.all())
	up.Store(true)
	rep, err := push.Redeliver(tctx(t), e.nc, filter, push.WithAllowHosts("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Delivered != len(dead) || rep.Kept != 0 || rep.Dropped != 0 {
		t.Errorf("redelivery %+v, want %d delivered", rep, len(dead))
	}
	redelivered := r.all()[calls:]
	for i, d := range redelivered {
		if d.eventID != dead[i].EventID || d.token != "tok-secret" || d.auth != "Bearer cred-secret" {
			t.Fatalf("redelivered %d: id %s token %q auth %q, want %s with the config's token and auth", i, d.eventID, d.token, d.auth, dead[i].EventID)
		}
	}
	ordered(t, push.V1, redelivered, []string{"a", "b"}, expectText([]string{"a", "b"}, 5))
	if left, _ := push.ListDead(tctx(t), e.nc, filter, 10); len(left) != 0 {
		t.Errorf("%d dead letters left after the redelivery", len(left))
	}
	e.turn("alice", "t1", second, "c", 3)
	testkit.Eventually(t, 20*time.Second, "third turn delivered", func() bool {
		return completedCount(t, push.V1, r.all()[calls:]) == 3
	})
	ordered(t, push.V1, r.all()[calls:], []string{"a", "b", "c"}, expectText([]string{"a", "b"}, 5)+expectText([]string{"c"}, 3))
}

// TestRedeliverKeepsOrder: a webhook still failing keeps every update of
// its config dead-lettered; a deleted config's updates are dropped.
func TestRedeliverKeepsOrder(t *testing.T) {
	e := newEnv(t)
	e.startStage(push.WithRetryWindow(100 * time.Millisecond))
	r := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusBadGateway })
	gone := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusBadGateway })
	e.create("alice", push.Config{TaskID: "t1", URL: r.srv.URL})
	cg := e.create("alice", push.Config{TaskID: "t1", ID: "gone", URL: gone.srv.URL})
	e.turn("alice", "t1", "", "", 3)
	filter := push.DeadFilter{Principal: "alice", TaskID: "t1"}
	var n int
	testkit.Eventually(t, 30*time.Second, "dead-lettered", func() bool {
		d, err := push.ListDead(context.Background(), e.nc, filter, 1000)
		n = len(d)
		return err == nil && n > 0 && n%2 == 0 && completedIn(d) == 2
	})
	if err := e.store.Delete(tctx(t), "alice", "t1", cg.ID); err != nil {
		t.Fatal(err)
	}
	rep, err := push.Redeliver(tctx(t), e.nc, filter, push.WithAllowHosts("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Delivered != 0 || rep.Dropped != n/2 || rep.Kept != n/2 || len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0], "status 502") {
		t.Errorf("redelivery %+v: want %d kept (first failure stops), %d dropped", rep, n/2, n/2)
	}
	if left, _ := push.ListDead(tctx(t), e.nc, filter, 1000); len(left) != n/2 {
		t.Errorf("%d left, want %d", len(left), n/2)
	}
}

func completedIn(ds []push.DeadLetter) int {
	n := 0
	for _, d := range ds {
		if strings.Contains(string(d.Body), "TASK_STATE_COMPLETED") {
			n++
		}
	}
	return n
}

// streamData reads every message of a stream.
func streamData(t testing.TB, e *env, stream string) []string {
	t.Helper()
	var out []string
	for raw, err := range streams.DirectGetSeq(tctx(t), e.nc, stream, ">", 0, 256) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(raw.Header.Get("Nats-Msg-Id"))+string(raw.Data))
	}
	return out
}

// TestOversizedUpdateDeadLettered: an update refused for its size (a v0.3
// Task grows with its answer: four chunks of 300 kB against the default
// WithMaxBody, 1 MiB, and the test server's max_payload, 1 MiB) is
// dead-lettered without its body, which a dead letter could not hold, and
// the config goes on; Redeliver skips and removes it, saying why. Before, the dead
// letter's publish failed (maximum payload exceeded) and the stage
// retried the update for ever: no dead letter, the config stalled.
func TestOversizedUpdateDeadLettered(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "big", URL: r.srv.URL, Version: push.V03})
	e.turnWith("alice", "big", "", "", 4, map[string]any{"pad": 300_000})
	filter := push.DeadFilter{Principal: "alice", TaskID: "big"}
	var dead []push.DeadLetter
	// Frames 0-3 are the chunks, frame 4 the final one (writeChunks).
	testkit.Eventually(t, 30*time.Second, "the oversized updates dead-lettered, the final frame's included", func() bool {
		d, err := push.ListDead(context.Background(), e.nc, filter, 100)
		dead = d
		return err == nil && len(d) > 0 && strings.Contains(d[len(d)-1].EventID, ":4:")
	})
	for _, d := range dead {
		if d.BodyBytes <= 1<<20 || string(d.Body) != "null" || !strings.Contains(d.Reason, "is not kept") {
			t.Errorf("dead letter %s: body_bytes %d, body %.40s, reason %q: want a body over 1 MiB, not kept", d.EventID, d.BodyBytes, d.Body, d.Reason)
		}
	}
	rep, err := push.Redeliver(tctx(t), e.nc, filter, push.WithAllowHosts("127.0.0.1"))
	if err != nil || rep.TooLarge != len(dead) || rep.Dropped != 0 || rep.Delivered != 0 || len(rep.Failures) != len(dead) {
		t.Fatalf("redeliver: %+v, %v; want the %d dead letters dropped", rep, err, len(dead))
	}
	if left, err := push.ListDead(context.Background(), e.nc, filter, 100); err != nil || len(left) != 0 {
		t.Errorf("left after redeliver: %d, %v", len(left), err)
	}
}
