package ingress_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestKeeperTakesOverWhenItsReplicaStops: the replica that publishes a
// turn keeps its task's record, its context's claim and its push
// configs while it runs (TestRunningTurnKeepsItsTask), in its memory: a
// turn running when that replica stopped (a restart, a deploy) was kept
// by no one, and the three keys expired a TTL (4 s here) after their
// last write. Now the replica lists the turn in E2A_TASKS (keep.<request
// id>) at its first look that finds it running, and a replica that
// finds the key older than two renewal periods takes the turn over.
// Three replicas on one NATS server: alice's task answered through A
// (its turn A1 held running), A's connection closed; the record, the
// claim and the push config are written again, each within the TTL of
// its write before, for three TTLs past the close, by exactly one of the
// two others (the looks each made), and alice still reads the task and
// her config. Cancelled, the turn is kept no more and its key is gone.
func TestKeeperTakesOverWhenItsReplicaStops(t *testing.T) {
	const ttl = 4 * time.Second
	const aliceKey = "ak_keep_alice_0123456789"
	cfg := natstest.Config()
	cfg.TasksTTL = ttl
	ns, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	makePushBucket(t, nc, cfg)
	auth := func() ingress.Option {
		return ingress.WithAuth(pipetest.KeyAuth(t, map[string]string{"alice": aliceKey}, nil))
	}
	pp := pipetest.Start(t, pipetest.WithConn(nc), pipetest.WithPush("127.0.0.1"), pipetest.WithIngress(auth()))
	g := newAnswerGate()
	pp.Pool("demo", agent.HandlerFunc(g.serve))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	replica := func() (*nats.Conn, *pipeline) {
		rc, err := ns.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		store, err := push.NewStore(ctx, rc, push.WithAllowHosts("127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		f := pipetest.ServeFront(t, rc, nil, auth(), ingress.WithPushStore(store))
		return rc, &pipeline{url: f.URL, nc: rc, in: f.Ingress}
	}
	ncA, a := replica()
	_, b := replica()
	s0 := &pipeline{url: pp.URL, nc: nc, in: pp.Ingress}
	var looks [2]atomic.Int64 // s0's, b's
	for i, s := range []*ingress.Server{s0.in, b.in} {
		ingress.SetKeptLookHook(s, func(string) { looks[i].Add(1) })
		t.Cleanup(func() { ingress.SetKeptLookHook(s, nil) })
	}
	task := newInputTask(ctx, t, keyClient(t, s0, a2a.TransportProtocolJSONRPC, aliceKey))
	ca := keyClient(t, a, a2a.TransportProtocolJSONRPC, aliceKey)
	r := pushtest.NewReceiver(t)
	if _, err := ca.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "v1", URL: r.URL + "/v1"}); err != nil {
		t.Fatalf("CreateTaskPushConfig: %v", err)
	}
	a1 := sendAnswer(ctx, ca, task, "A1", true)
	held := testkit.Receive(t, g.started, 15*time.Second, "A1 to start")
	accepted(t, a1, "A1")
	tasks, err := pp.JS.KeyValue(ctx, streams.TasksBucket)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "A1 in the keeper list", func() bool {
		_, err := keepListEntry(ctx, tasks, held.requestID)
		return err == nil
	})
	if n := ingress.KeptTurns(a.in); n != 1 {
		t.Fatalf("replica A, which published A1, keeps %d turns, want 1", n)
	}
	ncA.Close()
	recordKey, claimKey := kvKey(t, ingress.KindTask, string(task.ID)), kvKey(t, ingress.KindContext, task.ContextID)
	keptWithin(t, ttl, 3*ttl, map[string]jetstream.KeyWatcher{
		"the task's record":   kvWatch(t, ctx, pp.JS, streams.TasksBucket, recordKey),
		"its context claim":   kvWatch(t, ctx, pp.JS, streams.TasksBucket, claimKey),
		"alice's push config": kvWatch(t, ctx, pp.JS, streams.PushBucket, "cfg.>"),
	})
	cb := keyClient(t, b, a2a.TransportProtocolJSONRPC, aliceKey)
	if got, err := cb.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || got.Status.State != a2a.TaskStateSubmitted {
		t.Errorf("GetTask %v after A stopped, A1 running: %+v %v, want submitted", 3*ttl, got, err)
	}
	configs, err := cb.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || !slices.ContainsFunc(configs, func(c *a2a.PushConfig) bool { return c.ID == "v1" }) {
		t.Errorf("alice's push configs %v after A stopped: %+v %v, want v1", 3*ttl, configs, err)
	}
	n0, nb := looks[0].Load(), looks[1].Load()
	if (n0 == 0) == (nb == 0) || ingress.KeptTurns(s0.in)+ingress.KeptTurns(b.in) != 1 {
		t.Errorf("looks at A1 since A stopped: %d by the first replica, %d by B; turns kept %d and %d; want one of them keeping it",
			n0, nb, ingress.KeptTurns(s0.in), ingress.KeptTurns(b.in))
	}
	if got, err := cb.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}); err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %+v %v, want canceled", got, err)
	}
	testkit.Receive(t, held.ctx.Done(), 15*time.Second, "A1 cancelled")
	r.Await(t, 20*time.Second, "/v1", string(a2a.TaskStateCanceled))
	keptNoMore(t, ctx, tasks, s0.in, b.in)
}

// keptWithin follows the writes of the keys watches watch (each one's
// current value first), named by their key, until each was written span
// after all were first seen, and fails the test when one goes ttl without
// a write (it expired), by the times the server stored them: a write's
// notification may reach the test up to notifyLag late on a loaded
// machine without the key having expired.
func keptWithin(t *testing.T, ttl, span time.Duration, watches map[string]jetstream.KeyWatcher) {
	t.Helper()
	const notifyLag = 2 * time.Second
	type write struct {
		name string
		at   time.Time
	}
	writes := make(chan write)
	done := make(chan struct{})
	defer close(done)
	for name, w := range watches {
		go func() {
			for {
				select {
				case e := <-w.Updates():
					if e == nil {
						continue
					}
					select {
					case writes <- write{name, e.Created()}:
					case <-done:
						return
					}
				case <-done:
					return
				}
			}
		}()
	}
	last := map[string]time.Time{}
	var from time.Time
	for {
		wait := ttl
		if len(last) == len(watches) {
			if from.IsZero() {
				from = time.Now()
			}
			oldest := slices.MinFunc(slices.Collect(maps.Values(last)), func(a, b time.Time) int { return a.Compare(b) })
			if oldest.Sub(from) >= span {
				return
			}
			wait = time.Until(oldest.Add(ttl))
		}
		select {
		case w := <-writes:
			if prev, ok := last[w.name]; ok && w.at.Sub(prev) > ttl {
				t.Fatalf("%s written %v after its write before (the TTL %v): it expired", w.name, w.at.Sub(prev), ttl)
			}
			last[w.name] = w.at
		case <-time.After(wait + notifyLag):
			t.Fatalf("%v after the watches started, the keys last written at %v (the TTL %v): one expired", time.Since(from), last, ttl)
		}
	}
}

// kvKey is the key of E2A_TASKS of the record kind/id.
func kvKey(t *testing.T, kind, id string) string {
	t.Helper()
	tok, err := subjects.EncodeID(id)
	if err != nil {
		t.Fatal(err)
	}
	return kind + "." + tok
}

// keepListEntry is requestID's key of the keeper list in tasks
// (E2A_TASKS).
func keepListEntry(ctx context.Context, tasks jetstream.KeyValue, requestID string) (jetstream.KeyValueEntry, error) {
	tok, err := subjects.EncodeID(requestID)
	if err != nil {
		return nil, err
	}
	return tasks.Get(ctx, "keep."+tok)
}

// keptNoMore waits until none of servers keeps a turn and the keeper
// list of tasks (E2A_TASKS) holds no key.
func keptNoMore(t *testing.T, ctx context.Context, tasks jetstream.KeyValue, servers ...*ingress.Server) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, "the ended turns dropped, their keys of the keeper list deleted", func() bool {
		for _, s := range servers {
			if ingress.KeptTurns(s) != 0 {
				return false
			}
		}
		l, err := tasks.ListKeysFiltered(ctx, "keep.>")
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return true
		}
		if err != nil {
			return false
		}
		defer func() { _ = l.Stop() }()
		for range l.Keys() {
			return false
		}
		return true
	})
}
