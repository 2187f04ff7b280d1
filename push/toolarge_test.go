package push_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestTooLargeDeadLetteredWithoutBody: an update over the delivery limit
// (WithMaxBody, 4 KiB here; chunks of 8 kB) can never be posted as it
// is: it is dead-lettered without its body, keeping its event id, its
// size and the reason too_large, which the log says too; the updates
// under the limit are delivered. A redelivery posts nothing for it (no
// empty body): it is skipped, counted and named in the report, and
// removed. Before, such an update was dead-lettered with its body (a
// v0.3 Task of 3.5 MB, a hundred times a message, filling E2A_PUSH_DEAD),
// the log said `status=0` and no reason.
func TestTooLargeDeadLetteredWithoutBody(t *testing.T) {
	e := newEnv(t)
	e.startStage(push.WithMaxBody(4 << 10))
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "big", URL: r.srv.URL})
	id := e.turnWith("alice", "big", "", "", 2, map[string]any{"pad": 8000})
	filter := push.DeadFilter{Principal: "alice", TaskID: "big"}
	testkit.Eventually(t, 30*time.Second, "the final update delivered", func() bool {
		return completedCount(t, push.V1, r.all()) == 1
	})
	dead, err := push.ListDead(context.Background(), e.nc, filter, 100)
	if err != nil || len(dead) != 2 {
		t.Fatalf("%d dead letters (%v), want the 2 chunks", len(dead), err)
	}
	for _, d := range dead {
		if !strings.HasPrefix(d.EventID, id+":") || d.BodyBytes <= 8000 || (len(d.Body) != 0 && string(d.Body) != "null") ||
			!strings.HasPrefix(d.Reason, push.ReasonTooLarge) || d.Status != 0 {
			t.Errorf("dead letter %s: body_bytes %d, body %.40s, reason %q, status %d: want its size, no body, reason %s",
				d.EventID, d.BodyBytes, d.Body, d.Reason, d.Status, push.ReasonTooLarge)
		}
	}
	if l := firstLine(e.log.String(), dead[0].EventID); !strings.Contains(l, push.ReasonTooLarge) {
		t.Errorf("log of the dead-lettering %q: want the reason %s", l, push.ReasonTooLarge)
	}
	calls := len(r.all())
	rep, err := push.Redeliver(tctx(t), e.nc, filter, push.WithAllowHosts("127.0.0.1"))
	if err != nil || rep.TooLarge != 2 || rep.Delivered != 0 || rep.Dropped != 0 || rep.Kept != 0 || len(rep.Failures) != 2 ||
		!strings.Contains(rep.Failures[0], push.ReasonTooLarge) {
		t.Fatalf("redeliver: %+v, %v; want the 2 too large updates skipped and named", rep, err)
	}
	if n := len(r.all()); n != calls {
		t.Errorf("the redelivery posted %d updates, want none", n-calls)
	}
	if left, err := push.ListDead(context.Background(), e.nc, filter, 100); err != nil || len(left) != 0 {
		t.Errorf("left after redeliver: %d, %v", len(left), err)
	}
}

// TestURLRefusalNamesNoAddress: a refused webhook host gets one answer
// whether it resolves to a forbidden address or does not resolve, naming
// neither the address nor the resolution (creating a config must not tell
// a client what an internal name resolves to); the detail is logged at
// debug level. IPv6 forms of forbidden IPv4 addresses are refused.
func TestURLRefusalNamesNoAddress(t *testing.T) {
	s, _ := urlRulesStore(t)
	const want = "is not an allowed destination (private, loopback, link-local, reserved or unresolvable)"
	for _, host := range []string{"loop.test", "nowhere.test", "meta.test", "mixed.corp.test", "v6.test", "mapped.test",
		"127.0.0.1", "[::7f00:1]", "[::a9fe:a9fe]", "[::ffff:0:a9fe:a9fe]", "[64:ff9b::a9fe:a9fe]"} {
		_, err := s.Create(tctx(t), "alice", push.Config{TaskID: "t", URL: "https://" + host + "/hook"})
		h := strings.Trim(host, "[]")
		if err == nil || err.Error() != "push: webhook URL refused: host "+h+" "+want {
			t.Errorf("%s: %v, want ErrURLRefused %q", host, err, want)
		}
		for _, leak := range []string{"127.0.0.1", "169.254", "10.1.2.3", "fd00", "does not resolve"} {
			if err != nil && h != leak && strings.Contains(err.Error(), leak) {
				t.Errorf("%s: %v names %q", host, err, leak)
			}
		}
	}
	// The detail, for the operator, at debug level.
	buf := &testkit.Buffer{}
	_, nc := natstest.RunServer(t)
	ls, err := push.NewStore(tctx(t), nc, push.WithResolver(&resolver{m: map[string][]string{"vm": {"127.0.0.1"}}}),
		push.WithLogger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Create(tctx(t), "alice", push.Config{TaskID: "t", URL: "https://vm/hook?secret=s3"}); err == nil {
		t.Fatal("https://vm/ accepted")
	}
	if l := firstLine(buf.String(), "refused"); !strings.Contains(l, "level=DEBUG") || !strings.Contains(l, "127.0.0.1") ||
		!strings.Contains(l, "host=vm") || strings.Contains(l, "s3") {
		t.Errorf("debug log %q: want the host and its address, not the URL's query", l)
	}
}
