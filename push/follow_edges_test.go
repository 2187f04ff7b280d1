package push_test

// The follow of a queued turn (WithTaskTurns) at its edges: what reads
// the record, an interrupted turn, a parked config drained by another
// replica, a record that does not decode.

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// reviewPool is the pool of reviewAgent.
const reviewPool = "pushreview"

// reviewAgent runs on e's server, in reviewPool, a handler that, for a
// request with params.ask, waits for params.gate (when set) without
// writing, then ends its turn input-required; any other request is
// writeChunks'.
func reviewAgent(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, e.nc, reviewPool, agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			if _, ok := env.Params["ask"]; !ok {
				return writeChunks(ctx, env, w)
			}
			if g, ok := env.Params["gate"].(string); ok {
				ch, _ := gates.LoadOrStore(g, make(chan struct{}))
				select {
				case <-ch.(chan struct{}):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		}), agent.WithConcurrency(8))
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// reviewTurn publishes alice's request of task (after after) to
// reviewPool with params, and returns its id.
func reviewTurn(t *testing.T, e *env, task, after, label string, chunks int, params map[string]any) string {
	t.Helper()
	id := uuid.NewString()
	en := &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "message/stream", IsStream: true,
		UserID: "alice", TaskID: task, ContextID: "ctx-" + task, Channel: "test",
		Params:     map[string]any{"chunks": float64(chunks), "turn": label},
		Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}
	for k, v := range params {
		en.Params[k] = v
	}
	if _, err := e.pub.PublishAfter(tctx(t), reviewPool, en, after); err != nil {
		t.Fatal(err)
	}
	return id
}

// taskTurns is ingress.NewTaskTurns on e's connection.
func (e *env) taskTurns() *ingress.TaskTurns {
	e.t.Helper()
	tt, err := ingress.NewTaskTurns(e.nc)
	if err != nil {
		e.t.Fatal(err)
	}
	return tt
}

// countingTurns is a push.TaskTurns counting its reads of a record.
type countingTurns struct {
	inner push.TaskTurns
	n     atomic.Int64
}

func (c *countingTurns) LaterTurn(ctx context.Context, taskID, after string) (string, error) {
	c.n.Add(1)
	return c.inner.LaterTurn(ctx, taskID, after)
}

// recordTurn appends request id to alice's record of task (ingress, as
// it records a turn before it publishes it).
func recordTurn(t *testing.T, ts *ingress.TaskStore, task, id string) {
	t.Helper()
	base := ingress.TaskRecord{ID: task, Protocol: "a2a", Pool: reviewPool, Principal: "alice"}
	if _, err := ts.Append(tctx(t), ingress.KindTask, base, id, tenant.Principal{ID: "alice"}); err != nil {
		t.Fatal(err)
	}
}

// distinctStates is the states of r's accepted updates of version, one
// per event id, in arrival order ("" for an update without a state).
func distinctStates(t *testing.T, version string, r *receiver) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, d := range r.accepted() {
		if !seen[d.eventID] {
			seen[d.eventID] = true
			out = append(out, decode(t, version, d).state)
		}
	}
	return out
}

// TestFollowUndecodableRecordPostsEnd: a task whose record in E2A_TASKS
// does not decode (a corrupt or foreign value under its key). The stage
// reads the record at the turn's final frame; a record it cannot read
// lists no later turn for it (as for a turn's stream): the webhook gets
// the task's end as the frame says, with a warning logged. The render
// failed instead, and the message was looked at again for ever: the
// webhook got the turn's chunks and never the task's end, and the stage
// logged a retry every WithOrderWait.
func TestFollowUndecodableRecordPostsEnd(t *testing.T) {
	e := newEnv(t)
	if _, err := ingress.NewTaskStore(tctx(t), e.js); err != nil { // makes E2A_TASKS
		t.Fatal(err)
	}
	kv, err := e.js.KeyValue(tctx(t), streams.TasksBucket)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := subjects.EncodeID("corrupt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(tctx(t), ingress.KindTask+"."+tok, []byte(`{"id":`)); err != nil {
		t.Fatal(err)
	}
	e.startStage(push.WithTaskTurns(e.taskTurns()))
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "corrupt", URL: r.srv.URL + "/hook", Version: push.V1})
	e.turn("alice", "corrupt", "", "a", 2)
	ok := testkit.Until(10*time.Second, func() bool { return completedCount(t, push.V1, r.accepted()) == 1 })
	if !ok {
		t.Errorf("the webhook never got the task's end (states %q); the stage logged %d retries, e.g. %s",
			distinctStates(t, push.V1, r), strings.Count(e.log.String(), "cannot read a response message"),
			firstLine(e.log.String(), "cannot read a response message"))
	}
}

// TestFollowReadsRecordOnlyAtTerminalEnd: the record is read
// only for a task with configs, and only at a final frame that ends the
// task: never for a task without configs, once for a turn that
// completes, never for a turn that ends input-required (not terminal).
func TestFollowReadsRecordOnlyAtTerminalEnd(t *testing.T) {
	e := newEnv(t)
	reviewAgent(t, e)
	ct := &countingTurns{inner: e.taskTurns()}
	e.startStage(push.WithTaskTurns(ct))

	e.turn("alice", "no-configs", "", "a", 3)
	testkit.Eventually(t, 20*time.Second, "the turn of a task without configs handled", func() bool {
		return consumerIdle(t, e)
	})
	if n := ct.n.Load(); n != 0 {
		t.Errorf("%d record reads for a task without configs, want 0", n)
	}

	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "with-config", URL: r.srv.URL + "/hook", Version: push.V1})
	e.turn("alice", "with-config", "", "a", 3)
	e.handled("alice", "with-config", r)
	if n := ct.n.Load(); n != 1 {
		t.Errorf("%d record reads for a turn that completes, want 1", n)
	}

	ra := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "asks", URL: ra.srv.URL + "/hook", Version: push.V1})
	reviewTurn(t, e, "asks", "", "q", 0, map[string]any{"ask": true})
	testkit.Eventually(t, 20*time.Second, "input-required posted", func() bool {
		s := distinctStates(t, push.V1, ra)
		return len(s) > 0 && s[len(s)-1] == "TASK_STATE_INPUT_REQUIRED"
	})
	if n := ct.n.Load(); n != 1 {
		t.Errorf("%d record reads after an interrupted turn, want still 1", n)
	}
}

// TestFollowInterruptedTurnNotRewritten: alice's turn
// that asks (it ends input-required) has her answer queued behind it in
// the record before it ends. Its end is posted input-required (v1.0 and
// v0.3), not rewritten submitted (an interrupted turn does not end the
// task); then the answer's updates, to the task completed, once.
func TestFollowInterruptedTurnNotRewritten(t *testing.T) {
	e := newEnv(t)
	reviewAgent(t, e)
	ts, err := ingress.NewTaskStore(tctx(t), e.js)
	if err != nil {
		t.Fatal(err)
	}
	e.startStage(push.WithTaskTurns(e.taskTurns()))
	hooks := map[string]*receiver{}
	for _, v := range []string{push.V1, push.V03} {
		hooks[v] = newReceiver(t, nil)
		e.create("alice", push.Config{TaskID: "ask-q", URL: hooks[v].srv.URL + "/hook", Version: v})
	}
	gate := uuid.NewString()
	ask := reviewTurn(t, e, "ask-q", "", "q", 0, map[string]any{"ask": true, "gate": gate})
	recordTurn(t, ts, "ask-q", ask)
	recordTurn(t, ts, "ask-q", reviewTurn(t, e, "ask-q", ask, "b", 2, nil))
	openGate(gate)
	for v, want := range map[string][]string{
		push.V1:  {"TASK_STATE_INPUT_REQUIRED", "", "", "TASK_STATE_COMPLETED"},
		push.V03: {"input-required", "working", "working", "completed"},
	} {
		awaitCompleted(t, v, hooks[v], 1)
		if got := distinctStates(t, v, hooks[v]); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: states %q, want %q (the asking turn's end input-required, then the answer's)", v, got, want)
		}
	}
}

// TestFollowParkedDrainAfterRestart: alice's configs
// (v1.0, v0.3) fail while her turn "a" ends with "b" queued behind it:
// they are parked. The stage that rendered "a" crashes (its rendered
// cache gone); a new one drains the backlogs once the webhooks are back,
// rendering with its own mappers (park.go drainMessage): the follow is
// applied there too, "a"'s end posted submitted, one completed at the
// task's end, and every POST of an event id carries the same body.
func TestFollowParkedDrainAfterRestart(t *testing.T) {
	e := newEnv(t)
	ts, err := ingress.NewTaskStore(tctx(t), e.js)
	if err != nil {
		t.Fatal(err)
	}
	opts := []push.Option{push.WithTaskTurns(e.taskTurns())}
	first := e.startStage(opts...)
	hooks, heals := map[string]*receiver{}, map[string]*atomic.Bool{}
	for _, v := range []string{push.V1, push.V03} {
		hooks[v], heals[v] = healingReceiver(t)
		e.create("alice", push.Config{TaskID: "parked", URL: hooks[v].srv.URL + "/hook", Version: v})
	}
	gate := uuid.NewString()
	a := e.turnWith("alice", "parked", "", "a", 2, map[string]any{"gate": gate})
	recordTurn(t, ts, "parked", a)
	recordTurn(t, ts, "parked", e.turn("alice", "parked", a, "b", 2))
	openGate(gate)
	testkit.Eventually(t, 20*time.Second, "both configs parked, every message handed off", func() bool {
		return len(wakeKeys(t, e)) == 2 && consumerIdle(t, e)
	})
	first.crash()
	first.stop()
	e.startStage(opts...)
	for _, v := range []string{push.V1, push.V03} {
		heals[v].Store(true)
	}
	for v, want := range map[string][]string{
		push.V1:  {"", "", "TASK_STATE_SUBMITTED", "", "", "TASK_STATE_COMPLETED"},
		push.V03: {"working", "working", "submitted", "working", "working", "completed"},
	} {
		awaitCompleted(t, v, hooks[v], 1)
		if got := distinctStates(t, v, hooks[v]); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s after a drain: states %q, want %q", v, got, want)
		}
		bodies := map[string]string{}
		for _, d := range hooks[v].all() {
			if b, ok := bodies[d.eventID]; ok && b != string(d.body) {
				t.Errorf("%s: event %s posted with two bodies:\n%s\n%s", v, d.eventID, b, d.body)
			}
			bodies[d.eventID] = string(d.body)
		}
	}
}
