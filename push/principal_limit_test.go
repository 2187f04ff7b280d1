package push_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// twoReplicas are two Stores, each on its own connection to one server:
// two replicas of a front door.
func twoReplicas(t *testing.T, opts ...push.Option) (a, b *push.Store, nc *nats.Conn) {
	t.Helper()
	srv, nc := natstest.RunServer(t)
	nc2, err := srv.Connect(nats.Name(t.Name() + "-2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc2.Close)
	opts = append([]push.Option{push.WithAllowHosts("127.0.0.1")}, opts...)
	if a, err = push.NewStore(tctx(t), nc, opts...); err != nil {
		t.Fatal(err)
	}
	if b, err = push.NewStore(tctx(t), nc2, opts...); err != nil {
		t.Fatal(err)
	}
	return a, b, nc
}

// createMany creates one config for each of tasks, all at once, half on
// a and half on b; it returns the tasks created and the errors other
// than ErrLimit.
func createMany(ctx context.Context, a, b *push.Store, principal string, tasks []string) (created []string, limited int, other []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, task := range tasks {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Create(ctx, principal, push.Config{TaskID: task, URL: "http://127.0.0.1:1/" + task})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created = append(created, task)
			case errors.Is(err, push.ErrLimit):
				limited++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	return created, limited, other
}

// stored counts the tasks of tasks with configs of principal.
func stored(t *testing.T, s *push.Store, principal string, tasks []string) int {
	t.Helper()
	n := 0
	for _, task := range tasks {
		l, _, err := s.List(tctx(t), principal, task, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(l) > 0 {
			n++
		}
	}
	return n
}

func taskNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// TestPrincipalLimitAcrossReplicas: the tasks with configs of one
// principal are bounded across replicas. 40 creates of new tasks at once,
// half on each of two Stores (two connections, one server), with a limit
// of 10: exactly 10 pass, the 30 others get ErrLimit (the A2A layers'
// limit error), and 10 tasks hold configs. Before, the limit was a count
// of the principal's keys read before the write: creates running together
// all counted the same keys and all passed (40 of 40 here, 30 over the
// limit). Another principal is not counted with alice.
func TestPrincipalLimitAcrossReplicas(t *testing.T) {
	const limit = 10
	a, b, _ := twoReplicas(t, push.WithMaxTasksPerPrincipal(limit))
	ctx := tctx(t)
	tasks := taskNames("t", 40)
	created, limited, other := createMany(ctx, a, b, "alice", tasks)
	if len(other) > 0 {
		t.Fatalf("errors other than ErrLimit: %v", other)
	}
	if len(created) != limit || limited != len(tasks)-limit {
		t.Errorf("%d creates passed and %d got ErrLimit, want %d and %d", len(created), limited, limit, len(tasks)-limit)
	}
	if n := stored(t, a, "alice", tasks); n != limit {
		t.Errorf("alice has %d tasks with configs, want %d", n, limit)
	}
	// A task that has its slot takes more configs; bob has his own limit.
	if _, err := b.Create(ctx, "alice", push.Config{TaskID: created[0], URL: "http://127.0.0.1:1/second"}); err != nil {
		t.Errorf("a second config of a counted task: %v", err)
	}
	if _, err := a.Create(ctx, "bob", push.Config{TaskID: "t000", URL: "http://127.0.0.1:1/bob"}); err != nil {
		t.Errorf("bob's first task: %v", err)
	}
}

// TestPrincipalLimitSlotsGivenBack: deleting a task's last config gives
// its slot back, also while other creates race for it. alice fills her 8
// slots; then 4 of her tasks' configs are deleted while 20 creates of new
// tasks run, on both replicas: the deletes all pass, and when everything
// is done she has exactly 8 tasks with configs (4 kept, 4 of the new).
// Then one more delete and one create: the create passes.
func TestPrincipalLimitSlotsGivenBack(t *testing.T) {
	const limit = 8
	a, b, _ := twoReplicas(t, push.WithMaxTasksPerPrincipal(limit))
	ctx := tctx(t)
	first := taskNames("f", limit)
	created, _, other := createMany(ctx, a, b, "alice", first)
	if len(other) > 0 || len(created) != limit {
		t.Fatalf("filling: %d created, %v", len(created), other)
	}
	ids := map[string]string{}
	for _, task := range first {
		l, _, err := a.List(ctx, "alice", task, 0, "")
		if err != nil || len(l) != 1 {
			t.Fatalf("%s: %d configs, %v", task, len(l), err)
		}
		ids[task] = l[0].ID
	}
	var wg sync.WaitGroup
	delErr := make(chan error, 4)
	for i, task := range first[:4] {
		s := []*push.Store{a, b}[i%2]
		wg.Add(1)
		go func() { defer wg.Done(); delErr <- s.Delete(ctx, "alice", task, ids[task]) }()
	}
	more := taskNames("m", 20)
	_, _, other = createMany(ctx, a, b, "alice", more)
	wg.Wait()
	close(delErr)
	for err := range delErr {
		if err != nil {
			t.Errorf("delete: %v", err)
		}
	}
	if len(other) > 0 {
		t.Fatalf("errors other than ErrLimit: %v", other)
	}
	// The creates that ran before the deletes gave the slots back got
	// ErrLimit; run them again now that the deletes are done.
	_, _, other = createMany(ctx, a, b, "alice", more)
	if len(other) > 0 {
		t.Fatalf("errors other than ErrLimit: %v", other)
	}
	all := append(append([]string{}, first...), more...)
	if n := stored(t, a, "alice", all); n != limit {
		t.Errorf("alice has %d tasks with configs after the deletes and creates, want %d", n, limit)
	}
	if n := stored(t, a, "alice", first[4:]); n != 4 {
		t.Errorf("%d of the 4 kept tasks have configs", n)
	}
	if err := b.Delete(ctx, "alice", first[7], ids[first[7]]); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(ctx, "alice", push.Config{TaskID: "last", URL: "http://127.0.0.1:1/last"}); err != nil {
		t.Errorf("a create after a delete at the limit: %v, want its slot", err)
	}
}

// TestPrincipalLimitNoLeak: a slot without its task key is not lost for
// good. alice holds 3 of her 4 slots; a create dies between taking its
// slot and writing its config (a crash): while the slot is young it is
// taken for a create under way (ErrLimit), once older than the grace the
// next create at the limit recounts and gets it. A task key removed
// behind the store's back (expired with the bucket's TTL) gives its slot
// back the same way. A slots key that is missing (expired, or kept by no
// older version) is rebuilt from the task keys: the limit still holds.
func TestPrincipalLimitNoLeak(t *testing.T) {
	const limit, grace = 4, 300 * time.Millisecond
	a, b, nc := twoReplicas(t, push.WithMaxTasksPerPrincipal(limit))
	push.SetSlotGrace(a, grace)
	push.SetSlotGrace(b, grace)
	ctx := tctx(t)
	for _, task := range []string{"k0", "k1", "k2"} {
		if _, err := a.Create(ctx, "alice", push.Config{TaskID: task, URL: "http://127.0.0.1:1/" + task}); err != nil {
			t.Fatal(err)
		}
	}
	crash := errors.New("crashed")
	push.SetReserved(a, func() error { return crash })
	if _, err := a.Create(ctx, "alice", push.Config{TaskID: "dies", URL: "http://127.0.0.1:1/dies"}); !errors.Is(err, crash) {
		t.Fatalf("premise: the create did not die after its slot: %v", err)
	}
	push.SetReserved(a, nil)
	if _, err := b.Create(ctx, "alice", push.Config{TaskID: "k3", URL: "http://127.0.0.1:1/k3"}); !errors.Is(err, push.ErrLimit) {
		t.Fatalf("a create while the dead one's slot is young: %v, want ErrLimit", err)
	}
	start := time.Now()
	testkit.Eventually(t, 10*time.Second, "a create once the dead one's slot is older than the grace", func() bool {
		_, err := b.Create(ctx, "alice", push.Config{TaskID: "k3", URL: "http://127.0.0.1:1/k3"})
		return err == nil
	})
	if d := time.Since(start); d < grace/2 {
		t.Errorf("the dead create's slot was taken back after %s, before the grace (%s)", d, grace)
	}
	// Expired with the bucket's TTL: the key is gone, no delete ran.
	kv, err := natstest.JetStream(t, nc).KeyValue(ctx, streams.PushBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, push.TaskKey("alice", "k0")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "a create after a task key expired", func() bool {
		_, err := a.Create(ctx, "alice", push.Config{TaskID: "k4", URL: "http://127.0.0.1:1/k4"})
		return err == nil
	})
	// The slots key expired: rebuilt from the 4 task keys.
	if err := kv.Purge(ctx, push.SlotsKey("alice")); err != nil {
		t.Fatal(err)
	}
	created, limited, other := createMany(ctx, a, b, "alice", taskNames("n", 6))
	if len(created) != 0 || limited != 6 || len(other) > 0 {
		t.Errorf("after the slots key expired: %d created, %d ErrLimit, %v; want 0 and 6", len(created), limited, other)
	}
	if err := a.Delete(ctx, "alice", "k1", mustOnly(t, a, "alice", "k1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "alice", push.Config{TaskID: "n000", URL: "http://127.0.0.1:1/n000"}); err != nil {
		t.Errorf("a create after a delete of an adopted slot: %v", err)
	}
	if n := stored(t, a, "alice", append([]string{"k0", "k1", "k2", "k3", "k4", "dies"}, taskNames("n", 6)...)); n != limit {
		t.Errorf("alice has %d tasks with configs, want %d", n, limit)
	}
}

// mustOnly is the id of principal's task's one config.
func mustOnly(t *testing.T, s *push.Store, principal, task string) string {
	t.Helper()
	l, _, err := s.List(tctx(t), principal, task, 0, "")
	if err != nil || len(l) != 1 {
		t.Fatalf("%s: %d configs, %v", task, len(l), err)
	}
	return l[0].ID
}

// TestPrincipalLimitSameTaskRaces: creates and deletes of the same tasks
// racing on two replicas give every slot back once the tasks' configs
// are deleted: 6 workers, 3 on each replica, create a config of one of 3
// shared tasks and delete it, 25 times each; then every config left is
// deleted, and alice (limit 5) gets 5 new tasks at once, with the default
// grace (a minute: no recount frees anything in the test's time).
func TestPrincipalLimitSameTaskRaces(t *testing.T) {
	const limit = 5
	a, b, _ := twoReplicas(t, push.WithMaxTasksPerPrincipal(limit))
	ctx := tctx(t)
	shared := []string{"s0", "s1", "s2"}
	var wg sync.WaitGroup
	errs := make(chan error, 6*25)
	for w := range 6 {
		s := []*push.Store{a, b}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				task := shared[(w+i)%len(shared)]
				c, err := s.Create(ctx, "alice", push.Config{TaskID: task, URL: "http://127.0.0.1:1/" + task})
				if err != nil {
					errs <- err
					continue
				}
				if err := s.Delete(ctx, "alice", task, c.ID); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("create or delete: %v", err)
	}
	for _, task := range shared {
		l, _, err := a.List(ctx, "alice", task, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range l {
			if err := b.Delete(ctx, "alice", task, c.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	created, limited, other := createMany(ctx, a, b, "alice", taskNames("x", limit))
	if len(created) != limit || len(other) > 0 {
		t.Errorf("after the races: %d of %d new tasks created (%d ErrLimit, %v)", len(created), limit, limited, other)
	}
}

// TestPrincipalLimitSameTaskHandOver: two creates of one new task race:
// B takes the task's slot, then A takes it again (its own reservation),
// then B writes the task key and A, finding the key there, adds its
// config to it. Deleting both configs gives the slot back at once: with
// a limit of 1 another task can be created. Before, the slot kept A's
// reservation while the key had B's, and the delete took it for a
// create still under way: ErrLimit for a minute (the grace).
func TestPrincipalLimitSameTaskHandOver(t *testing.T) {
	a, b, _ := twoReplicas(t, push.WithMaxTasksPerPrincipal(1))
	ctx := tctx(t)
	bHeld, bGo := make(chan struct{}), make(chan struct{})
	aHeld, aGo := make(chan struct{}), make(chan struct{})
	push.SetReserved(b, func() error { close(bHeld); <-bGo; return nil })
	push.SetReserved(a, func() error { close(aHeld); <-aGo; return nil })
	type res struct {
		c   push.Config
		err error
	}
	bDone, aDone := make(chan res, 1), make(chan res, 1)
	go func() {
		c, err := b.Create(ctx, "alice", push.Config{TaskID: "same", URL: "http://127.0.0.1:1/b"})
		bDone <- res{c, err}
	}()
	<-bHeld
	go func() {
		c, err := a.Create(ctx, "alice", push.Config{TaskID: "same", URL: "http://127.0.0.1:1/a"})
		aDone <- res{c, err}
	}()
	<-aHeld
	close(bGo)
	rb := <-bDone
	push.SetReserved(b, nil)
	push.SetReserved(a, nil) // its retry finds the key
	close(aGo)
	ra := <-aDone
	if rb.err != nil || ra.err != nil {
		t.Fatalf("creates: %v, %v", rb.err, ra.err)
	}
	if l, _, err := a.List(ctx, "alice", "same", 0, ""); err != nil || len(l) != 2 {
		t.Fatalf("premise: the task has %d configs (%v), want both", len(l), err)
	}
	for _, c := range []push.Config{ra.c, rb.c} {
		if err := a.Delete(ctx, "alice", "same", c.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Create(ctx, "alice", push.Config{TaskID: "other", URL: "http://127.0.0.1:1/o"}); err != nil {
		t.Errorf("a create after both configs were deleted: %v, want the slot", err)
	}
}
