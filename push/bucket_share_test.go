package push_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestOnePrincipalCannotFillTheBucket: a principal creating configs with
// the largest fields the rules admit, of characters JSON escapes, in
// every task it may have, is refused at its tasks' byte bound (ErrLimit:
// a task's configs take at most 8 KiB each on average), and its configs
// stay within WithMaxTasksPerPrincipal times that bound, so another
// principal still stores its config and is delivered. A config took up
// to 89 KB in the bucket (14.6 KB of fields, '<' and '&' stored as
// \u003c and \u0026): 1,000 tasks of 10 such configs, 890 MB, filled the
// 256 MiB E2A_PUSH 3.5 times over, after which every principal's creates
// and delivery cursors were refused (maximum bytes exceeded).
func TestOnePrincipalCannotFillTheBucket(t *testing.T) {
	sc := streams.DefaultConfig()
	sc.KeyValueMaxBytes = 4 << 20 // above 40 tasks' bound, 40 × 80 KiB
	const tasks = 40
	e := newEnv(t, push.WithStreamsConfig(sc), push.WithMaxTasksPerPrincipal(tasks))
	e.startStage(push.WithStreamsConfig(sc))
	const prefix = "http://127.0.0.1/?"
	url := prefix + strings.Repeat("&", 2048-len(prefix))
	token, cred := strings.Repeat("<", 4096), strings.Repeat("<", 8192)
	limited := 0
	for i := range tasks {
		for j := range 10 {
			_, err := e.store.Create(tctx(t), "alice", push.Config{TaskID: fmt.Sprint("a", i), ID: fmt.Sprint(strings.Repeat(">", 250), j),
				URL: url, Token: token, Auth: &push.Auth{Scheme: push.SchemeBearer, Credentials: cred}})
			if errors.Is(err, push.ErrLimit) {
				limited++
				break
			}
			if err != nil {
				t.Fatalf("alice's config %d of task %d: %v; want it stored, or ErrLimit", j, i, err)
			}
		}
	}
	if limited != tasks {
		t.Errorf("%d of alice's %d tasks met their byte bound", limited, tasks)
	}
	// One config with every field at its limit, of characters JSON
	// escapes as two bytes, fits a task of one config.
	one, err := push.NewStore(tctx(t), e.nc, push.WithAllowHosts("127.0.0.1"), push.WithMaxPerTask(1), push.WithStreamsConfig(sc))
	if err != nil {
		t.Fatal(err)
	}
	q := func(n int) string { return strings.Repeat(`"`, n) }
	if _, err := one.Create(tctx(t), "carol", push.Config{TaskID: q(subjects.MaxIDLength), ID: q(256), URL: prefix + q(2048-len(prefix)),
		Token: q(4096), Auth: &push.Auth{Scheme: push.SchemeBearer, Credentials: q(8192)}}); err != nil {
		t.Fatalf("the largest config of a task of one: %v", err)
	}
	r := newReceiver(t, nil)
	e.create("bob", push.Config{TaskID: "b1", URL: r.srv.URL})
	e.turn("bob", "b1", "", "", 3)
	testkit.Eventually(t, 20*time.Second, "bob's task delivered", func() bool { return completedCount(t, push.V1, r.accepted()) == 1 })
}
