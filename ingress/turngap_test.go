package ingress_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// gapTask is an A2A v1.0 task of the pool demo whose first turn A ("first")
// runs until released (release) or cancelled (reported on aEnded), with a
// turn B written in its record (as ingress writes a turn before its
// publish) and never published: the gap. Any other turn answers at once.
type gapTask struct {
	p *pipeline
	c interface {
		SendMessage(context.Context, *a2a.SendMessageRequest) (a2a.SendMessageResult, error)
		GetTask(context.Context, *a2a.GetTaskRequest) (*a2a.Task, error)
		CancelTask(context.Context, *a2a.CancelTaskRequest) (*a2a.Task, error)
	}
	task    *a2a.Task
	release chan struct{}
	aEnded  chan error
	gap     string
}

// gapHandler serves the gap tests' pool: turn A ("first") writes "A
// works", says it started, and runs until release (then writes replyA,
// when set, and completes; reported nil on aEnded) or until cancelled
// (reported on aEnded); any other turn answers "reply of <text>" at once.
func gapHandler(release <-chan struct{}, aEnded chan<- error, started chan<- struct{}, replyA string) agent.Handler {
	return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if demo.Text(env) != "first" {
			if err := w.Chunk(e2a.DeltaText, "reply of "+demo.Text(env)); err != nil {
				return err
			}
			return w.Complete(nil)
		}
		if err := w.Chunk(e2a.DeltaText, "A works"); err != nil {
			return err
		}
		started <- struct{}{}
		select {
		case <-release:
			aEnded <- nil
			if replyA != "" {
				if err := w.Chunk(e2a.DeltaText, replyA); err != nil {
					return err
				}
			}
			return w.Complete(nil)
		case <-ctx.Done():
			aEnded <- ctx.Err()
			return ctx.Err()
		}
	})
}

// startGapTask starts the task; without the gap when gap is false (a
// control: the same task, every turn published).
func startGapTask(t *testing.T, ctx context.Context, gap bool) *gapTask {
	t.Helper()
	pp := pipetest.Start(t)
	g := &gapTask{release: make(chan struct{}), aEnded: make(chan error, 1), gap: "gap-b"}
	started := make(chan struct{}, 1)
	pp.Pool("demo", gapHandler(g.release, g.aEnded, started, " reply of A"))
	g.p = &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	_, c := v1Client(t, g.p, a2a.TransportProtocolJSONRPC)
	g.c = c
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("first")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	g.task = res.(*a2a.Task)
	testkit.Receive(t, started, 30*time.Second, "turn A did not start")
	if !gap {
		return g
	}
	// B: recorded as ingress records a turn before its publish, never
	// published (its publish failed, and so did its removal; or ingress
	// died in between).
	store, err := ingress.NewTaskStore(ctx, pp.JS)
	if err != nil {
		t.Fatal(err)
	}
	base := ingress.TaskRecord{ID: string(g.task.ID), ContextID: g.task.ContextID, Protocol: "a2a", Pool: "demo", Principal: ingress.DefaultAnonymousPrincipal}
	rec, err := store.Append(ctx, ingress.KindTask, base, g.gap, tenant.Principal{ID: ingress.DefaultAnonymousPrincipal, Open: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rec.RequestIDs); n != 2 || rec.RequestIDs[1] != g.gap {
		t.Fatalf("the record lists %v, want A then %s", rec.RequestIDs, g.gap)
	}
	return g
}

// send sends the task's next message C, returning at once.
func (g *gapTask) send(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	msg.TaskID, msg.ContextID = g.task.ID, g.task.ContextID
	if _, err := g.c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}); err != nil {
		t.Fatalf("turn %s: %v", text, err)
	}
}

// gapHistory is the task's history as "role: text" lines.
func gapHistory(task *a2a.Task) []string {
	var said []string
	for _, m := range task.History {
		said = append(said, string(m.Role)+": "+v1Text(m.Parts))
	}
	return said
}

// TestCancelTaskReachesTurnBeforeUnpublishedTurn: turns A (running), B
// (recorded, never published), C (published naming B, waiting).
// CancelTask must end every turn that has not ended, A too: the task must
// not be answered canceled while A runs on. UnendedTurns (egress) walks
// back from the newest turn past B, not stored, to A.
func TestCancelTaskReachesTurnBeforeUnpublishedTurn(t *testing.T) {
	for _, gap := range []bool{false, true} { // false: the control, which passes
		t.Run(map[bool]string{false: "no gap", true: "gap"}[gap], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			g := startGapTask(t, ctx, gap)
			defer close(g.release)
			g.send(t, ctx, "third")
			got, err := g.c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: g.task.ID})
			if err != nil {
				t.Fatalf("CancelTask: %v", err)
			}
			// A bound on the cancel's reaching A (its handler's context
			// ends at once when it does).
			timer := time.NewTimer(10 * time.Second)
			defer timer.Stop()
			select {
			case err := <-g.aEnded:
				if err == nil {
					t.Errorf("turn A completed instead of being cancelled")
				}
			case <-timer.C:
				now, err := g.c.GetTask(ctx, &a2a.GetTaskRequest{ID: g.task.ID})
				if err != nil {
					t.Fatal(err)
				}
				t.Errorf("turn A (before the unpublished turn B) still runs 10s after CancelTask answered %s; GetTask says %s, history %q",
					got.Status.State, now.Status.State, gapHistory(now))
			}
		})
	}
}

// TestACPCancelReachesPromptBeforeUnpublishedPrompt: the same gap in an ACP
// session: prompt A runs, B is recorded in the session and never
// published, prompt C is published naming B. session/cancel must cancel
// every prompt not ended, A too (protocolHost.CancelTurns reads the
// earlier ones with egress UnendedTurns, which walks past B).
func TestACPCancelReachesPromptBeforeUnpublishedPrompt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pp := pipetest.Start(t)
	release, aEnded, started := make(chan struct{}), make(chan error, 1), make(chan struct{}, 1)
	defer close(release)
	pp.Pool("demo", gapHandler(release, aEnded, started, ""))
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	sid := p.acpSession(t)
	prompt := func(id, text string) {
		_, _, _ = postRPC(ctx, pp.URL+"/acp", `{"jsonrpc":"2.0","id":`+id+`,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"`+text+`"}]}}`)
	}
	go prompt("1", "first")
	testkit.Receive(t, started, 30*time.Second, "prompt A did not start")
	store, err := ingress.NewTaskStore(ctx, pp.JS)
	if err != nil {
		t.Fatal(err)
	}
	base := ingress.TaskRecord{ID: sid, Protocol: "acp", Pool: "demo", Principal: ingress.DefaultAnonymousPrincipal}
	rec, err := store.Append(ctx, ingress.KindSession, base, "gap-acp-b", tenant.Principal{ID: ingress.DefaultAnonymousPrincipal, Open: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rec.RequestIDs); n != 2 {
		t.Fatalf("the session lists %v, want A then the gap", rec.RequestIDs)
	}
	go prompt("3", "third")
	testkit.Eventually(t, 30*time.Second, "prompt C recorded", func() bool {
		r, err := store.Get(ctx, ingress.KindSession, sid)
		return err == nil && len(r.RequestIDs) == 3
	})
	if _, body, err := postRPC(ctx, pp.URL+"/acp", `{"jsonrpc":"2.0","id":9,"method":"session/cancel","params":{"sessionId":"`+sid+`"}}`); err != nil || rpcError(t, body) != nil {
		t.Fatalf("session/cancel: %s %v", body, err)
	}
	// A bound on the cancel's reaching A.
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case err := <-aEnded:
		if err == nil {
			t.Errorf("prompt A completed instead of being cancelled")
		}
	case <-timer.C:
		t.Errorf("prompt A (before the unpublished B) still runs 10s after session/cancel answered")
	}
}

// TestTurnAfterUnpublishedTurnNamesTheTurnsBefore: the publish of turn C
// names B (E2A-After-Request) and, in E2A-Earlier-Requests, the turns the
// record holds before B (A), so that the agent runtime, finding B never
// stored, waits for A instead of running C beside it (agent's
// TestTurnAfterUnpublishedTurnWaitsForTheOneBefore).
func TestTurnAfterUnpublishedTurnNamesTheTurnsBefore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := startGapTask(t, ctx, true)
	defer close(g.release)
	store, err := ingress.NewTaskStore(ctx, g.p.js)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Get(ctx, ingress.KindTask, string(g.task.ID))
	if err != nil || len(rec.RequestIDs) != 2 {
		t.Fatalf("the task's record: %+v %v", rec, err)
	}
	g.send(t, ctx, "third")
	s, err := g.p.js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, subjects.AllRequests)
	if err != nil {
		t.Fatal(err)
	}
	after, earlier := m.Header.Get(subjects.HeaderAfterRequest), m.Header.Get(subjects.HeaderEarlierRequests)
	if want := `["` + rec.RequestIDs[0] + `"]`; after != g.gap || earlier != want {
		t.Fatalf("turn C published with %s %q and %s %q; want %q and %s", subjects.HeaderAfterRequest, after,
			subjects.HeaderEarlierRequests, earlier, g.gap, want)
	}
}

// TestTurnAfterFailedTurnRunsPromptly: the answer B to an input-required
// task is recorded, then the cluster loses its quorum (two of three nodes
// down, every stream without a leader): B's publish fails, and so does
// its removal from the record, B is answered an error. The nodes come
// back and the next answer C is sent at once: it must start promptly.
// Before, B stayed listed: C's check awaited it (host.AwaitPublish, 6 s)
// and the agent runtime, C naming B, awaited it again (turnGrace, 15 s).
func TestTurnAfterFailedTurnRunsPromptly(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	const up = 0 // the pipeline's connection is to the node kept up
	nc, err := c.Node(up).Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	pp, g, cl, ctx, task := gatedInputTask(t, pipetest.WithConn(nc))
	appended, proceed := make(chan string, 1), make(chan struct{})
	var once sync.Once
	ingress.SetAppendedHook(pp.Ingress, func(_, _, requestID string) {
		once.Do(func() { appended <- requestID; <-proceed })
	})
	b := sendAnswer(ctx, cl, task, "B", false)
	bID := testkit.Receive(t, appended, 30*time.Second, "answer B not recorded")
	tasksKV := streams.KVStream(streams.TasksBucket)
	down := c.Leaderless(streams.RequestsStream, up)
	c.Leaderless(tasksKV, up)
	close(proceed)
	if r := testkit.Receive(t, b, 30*time.Second, "answer B not answered"); r.err == nil {
		t.Fatalf("answer B accepted while no stream had a leader: %+v", r.res)
	}
	c.Restart(down...)
	// The pool's consumer elects its leader apart from the stream's: C's
	// start is timed from when the pool can be pulled from (without this
	// wait it measured the consumer's election, up to 5.2 s, not B's hold).
	demo, err := streams.AgentConsumerName("demo")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the streams' and the pool consumer's leaders", func() bool {
		return c.StreamLeader(streams.RequestsStream) >= 0 && c.StreamLeader(streams.ResponsesStream) >= 0 && c.StreamLeader(tasksKV) >= 0 &&
			c.ConsumerLeader(streams.RequestsStream, demo) >= 0
	})
	from := time.Now()
	answer := sendAnswer(ctx, cl, task, "C", false)
	started := testkit.Receive(t, g.started, 30*time.Second, "answer C did not start")
	took := time.Since(from).Round(time.Millisecond)
	if started.text != "C" || took > 5*time.Second {
		t.Fatalf("turn %q started %v after answer C was sent (B, never stored, left in the task's record?)", started.text, took)
	}
	t.Logf("answer C started %v after it was sent", took)
	g.done("C")
	if r := testkit.Receive(t, answer, 30*time.Second, "answer C not answered"); r.err != nil {
		t.Fatalf("answer C: %v", r.err)
	}
	store, err := ingress.NewTaskStore(ctx, pp.JS)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "B taken out of the task's record", func() bool {
		rec, err := store.Get(ctx, ingress.KindTask, string(task.ID))
		return err == nil && !slices.Contains(rec.RequestIDs, bID)
	})
}
