package ingress_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestRunningTurnKeepsItsContextAndPushConfigs: the replica that
// publishes a turn writes its task's record again while the turn runs
// (TestRunningTurnKeepsItsTask), and what lives beside the record under
// the same TTL (E2A_TASKS_TTL, 4 s here) expired meanwhile: the task's
// push configs in E2A_PUSH (the push stage writes them at the first
// message of a turn only), so the final status of a turn longer than the
// TTL was delivered to nobody, and the claim of a one-turn task's A2A
// context (a task of one turn has no record to keep it), so that another
// principal could take alice's context once her turn had run that long.
// Alice's one-turn task runs here for twice the TTL, her v1.0 push config
// made on it: both keys are written again, each within the TTL of its
// write before; bob's message in her context is then refused, she still
// lists her config, and her webhook gets the task completed once the
// turn ends; the replica then keeps the turn no more.
func TestRunningTurnKeepsItsContextAndPushConfigs(t *testing.T) {
	const ttl = 4 * time.Second
	k := startKeptPushPipeline(t, ttl)
	pp, alice, bob, release := k.pp, k.alice, k.bob, k.release
	ctx, task := k.ctx, k.startTask(t)
	r := pushtest.NewReceiver(t)
	if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "v1", URL: r.URL + "/v1", Token: "tok-v1"}); err != nil {
		t.Fatalf("CreateTaskPushConfig: %v", err)
	}
	claims := kvWatch(t, ctx, pp.JS, streams.TasksBucket, "context.>")
	configs := kvWatch(t, ctx, pp.JS, streams.PushBucket, "cfg.>")
	// Both keys' writes for twice the TTL, each within the TTL of the one
	// before (the watches start with the keys' current values).
	keptWithin(t, ttl, 2*ttl, map[string]jetstream.KeyWatcher{"her context's claim": claims, "her push config": configs})
	in := userMessage("mine now")
	in.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	in.Message.ContextID = task.ContextID
	if res, err := bob.SendMessage(ctx, in); err == nil {
		t.Errorf("bob's message in alice's context %s after her turn ran %v: %T %+v, want refused", task.ContextID, 2*ttl, res, res)
	}
	list, err := alice.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || !slices.ContainsFunc(list, func(c *a2a.PushConfig) bool { return c.ID == "v1" }) {
		t.Errorf("alice's push configs of her running task: %+v %v, want v1", list, err)
	}
	close(release)
	r.Await(t, 20*time.Second, "/v1", string(a2a.TaskStateCompleted))
	tasks, err := pp.JS.KeyValue(ctx, streams.TasksBucket)
	if err != nil {
		t.Fatal(err)
	}
	keptNoMore(t, ctx, tasks, pp.Ingress)
}

// kvWatch watches the keys of bucket that match keys, their current
// values first, until the test ends.
func kvWatch(t *testing.T, ctx context.Context, js jetstream.JetStream, bucket, keys string) jetstream.KeyWatcher {
	t.Helper()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

// makePushBucket makes E2A_PUSH on nc with cfg's TTL (TasksTTL), as
// streams apply does: the push store of a pipeline makes it with the
// default config when it does not exist, which natstest.RunServer does
// not apply.
func makePushBucket(t *testing.T, nc *nats.Conn, cfg streams.Config) {
	t.Helper()
	if _, err := natstest.JetStream(t, nc).CreateKeyValue(context.Background(), cfg.PushBucketConfig()); err != nil {
		t.Fatal(err)
	}
}

// keptPushPipeline is a pipeline with auth (alice and bob), push and a
// demo pool whose turns hold until release is closed, its E2A_TASKS TTL
// ttl (startKeptPushPipeline).
type keptPushPipeline struct {
	pp         *pipetest.Pipeline
	alice, bob *a2aclient.Client
	started    chan struct{}
	release    chan struct{}
	ctx        context.Context
}

func startKeptPushPipeline(t *testing.T, ttl time.Duration) *keptPushPipeline {
	t.Helper()
	const aliceKey, bobKey = "ak_keep_alice_0123456789", "ak_keep_bob_00123456789"
	cfg := natstest.Config()
	cfg.TasksTTL = ttl
	_, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	makePushBucket(t, nc, cfg)
	pp := pipetest.Start(t, pipetest.WithConn(nc), pipetest.WithPush("127.0.0.1"),
		pipetest.WithIngress(ingress.WithAuth(pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "bob": bobKey}, nil))))
	k := &keptPushPipeline{pp: pp, started: make(chan struct{}, 2), release: make(chan struct{})}
	pp.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "thinking"); err != nil {
			return err
		}
		if err := w.Sync(); err != nil {
			return err
		}
		k.started <- struct{}{}
		select {
		case <-k.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return w.Chunk(e2a.DeltaText, " done")
	}))
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	k.ctx = ctx
	k.alice, k.bob = keyClient(t, p, a2a.TransportProtocolJSONRPC, aliceKey), keyClient(t, p, a2a.TransportProtocolJSONRPC, bobKey)
	return k
}

// startTask has alice start a task of one turn, answered at once, and
// waits for its turn to run.
func (k *keptPushPipeline) startTask(t *testing.T) *a2a.Task {
	t.Helper()
	req := userMessage("hello")
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := k.alice.SendMessage(k.ctx, req)
	task, ok := res.(*a2a.Task)
	if err != nil || !ok || task.ContextID == "" {
		t.Fatalf("alice's SendMessage: %T %+v %v", res, res, err)
	}
	testkit.Receive(t, k.started, 20*time.Second, "alice's turn to start")
	return task
}

// TestOneTurnTaskKeptOnlyWithAPushConfig: the records' keeper keeps a
// task of one turn (its push configs and its context's claim) only once a
// push config of it is stored: keeping every one cost a keeper entry and
// a read a minute later for each A2A message that starts a task. Alice's
// task is kept by no one after her message, and by the replica that
// stored her config once she makes one; dropped once its turn ends.
func TestOneTurnTaskKeptOnlyWithAPushConfig(t *testing.T) {
	k := startKeptPushPipeline(t, time.Hour)
	task := k.startTask(t)
	if n := ingress.KeptTurns(k.pp.Ingress); n != 0 {
		t.Fatalf("alice's task of one turn, no push config: %d turns kept, want none", n)
	}
	r := pushtest.NewReceiver(t)
	if _, err := k.alice.CreateTaskPushConfig(k.ctx, &a2a.PushConfig{TaskID: task.ID, ID: "v1", URL: r.URL + "/v1", Token: "tok-v1"}); err != nil {
		t.Fatalf("CreateTaskPushConfig: %v", err)
	}
	if n := ingress.KeptTurns(k.pp.Ingress); n != 1 {
		t.Fatalf("alice's task with a push config: %d turns kept, want 1", n)
	}
	close(k.release)
	r.Await(t, 20*time.Second, "/v1", string(a2a.TaskStateCompleted))
}
