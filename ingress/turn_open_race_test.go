package ingress_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// Correctness of the stages run as several replicas on one JetStream (the
// deployment the README describes): two serve replicas, each ingress and
// egress on its own HTTP server and NATS connection (rvReplicaOn), one
// embedded server, one agent pool.

// turnGate is an agent whose n-th turn (from 0) starts (started), then waits
// for holds[n] to close before it writes its answer.
type turnGate struct {
	started chan string
	holds   []chan struct{}
	n       atomic.Int32
}

func (g *turnGate) serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	i := int(g.n.Add(1)) - 1
	g.started <- env.RequestID
	if i < len(g.holds) {
		select {
		case <-g.holds[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := w.Chunk(e2a.DeltaText, "reply "+env.RequestID); err != nil {
		return err
	}
	return w.Complete(map[string]any{"content": "reply " + env.RequestID})
}

func twoReplicasHeld(t *testing.T, held int) (a, b *rvReplica, g *turnGate) {
	t.Helper()
	g = &turnGate{started: make(chan string, 16)}
	for range held {
		g.holds = append(g.holds, make(chan struct{}))
	}
	a, b, _ = twoReplicasWithPool(t, g.serve)
	t.Cleanup(func() {
		for _, h := range g.holds {
			select {
			case <-h:
			default:
				close(h)
			}
		}
	})
	return a, b, g
}

// twoReplicasWithPool starts two serve replicas (rvReplicaOn) on one
// embedded server, and the demo pool answered by h until the test ends;
// it returns them once the pool's consumer is there, with the test's
// connection.
func twoReplicasWithPool(t *testing.T, h agent.HandlerFunc) (a, b *rvReplica, nc *nats.Conn) {
	t.Helper()
	srv, nc := natstest.RunServer(t)
	a, b = rvReplicaOn(t, srv.ClientURL(), "replica-a"), rvReplicaOn(t, srv.ClientURL(), "replica-b")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(ctx, nc, "demo", h, agent.WithMetrics(prometheus.NewRegistry()))
	}()
	t.Cleanup(func() { cancel(); <-done })
	testkit.Eventually(t, 10*time.Second, "the demo pool's consumer", func() bool {
		m, err := b.in.Pools(ctx)
		return err == nil && m["demo"] != ""
	})
	return a, b, nc
}

// TestA2AMessageCheckedOpenThenAppendedAfterTaskCompleted: a client
// streams the first turn of an A2A v1.0 task from replica A; a second
// message naming the task reaches replica B while that turn runs. B checks
// the task open (CheckTaskOpen: the running turn has no final frame) and
// is held, as a busy replica is, before it appends the turn to the task's
// record (ingress.SetAppendHook). Meanwhile the first turn ends: A's stream
// reads the record, finds no later turn and ends the task "completed"
// (final). Then B appends and publishes the second turn: the message is
// accepted as a turn of a task every client was told had completed, and
// GetTask takes the terminal state back (working / submitted again).
// README ("Tasks and turns"): "one naming a finished task is refused
// (UnsupportedOperation) ... A task never shows a terminal state its queued
// turn takes back". The terminal check (ingress/owner.go:341 taskOpen,
// called from protocols/a2av1/handler.go:149) is made before the append
// and never again: appendAfter's turnCond.open (ingress/tasks.go:440)
// refuses only a cancel turn, not a turn whose predecessor ended in the
// meantime.
func TestA2AMessageCheckedOpenThenAppendedAfterTaskCompleted(t *testing.T) {
	a, b, g := twoReplicasHeld(t, 2)
	ca, cb := a2aupstream.Client(t, a.url, a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}})), a2aupstream.Client(t, b.url, a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Turn 1, streamed from replica A.
	type streamEnd struct {
		events []a2a.Event
		err    error
	}
	ended := make(chan streamEnd, 1)
	go func() {
		var evs []a2a.Event
		for ev, err := range ca.SendStreamingMessage(ctx, userMessage("first")) {
			if err != nil {
				ended <- streamEnd{evs, err}
				return
			}
			evs = append(evs, ev)
		}
		ended <- streamEnd{evs, nil}
	}()
	taskID := testkit.Receive(t, g.started, 15*time.Second, "turn 1 to start") // a new task is named by its first request

	// Turn 2 reaches replica B, which is held between its check and its append.
	reached, proceed := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	ingress.SetAppendHook(b.in, func(kind, id, _ string) {
		if kind == ingress.KindTask && id == taskID && once.CompareAndSwap(false, true) {
			close(reached)
			<-proceed
		}
	})
	t.Cleanup(func() { ingress.SetAppendHook(b.in, nil) })
	type sendRes struct {
		res a2a.SendMessageResult
		err error
	}
	sent := make(chan sendRes, 1)
	go func() {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("second"))
		m.TaskID = a2a.TaskID(taskID)
		res, err := cb.SendMessage(ctx, &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
		sent <- sendRes{res, err}
	}()
	testkit.Receive(t, reached, 15*time.Second, "replica B to check the task open and reach its append")

	// Turn 1 ends; replica A's stream ends the task.
	close(g.holds[0])
	end := testkit.Receive(t, ended, 15*time.Second, "the first turn's stream to end")
	if end.err != nil {
		t.Fatalf("stream of turn 1: %v", end.err)
	}
	last, _ := end.events[len(end.events)-1].(*a2a.TaskStatusUpdateEvent)
	if last == nil {
		t.Fatalf("stream of turn 1 ended with %T", end.events[len(end.events)-1])
	}
	streamedTerminal := last.Status.State.Terminal()

	// Replica B goes on.
	close(proceed)
	r := testkit.Receive(t, sent, 15*time.Second, "the second message's answer")
	accepted := r.err == nil
	if streamedTerminal && accepted {
		state := taskStateOf(ctx, ca, taskID)
		t.Errorf("task %s: replica A's stream ended it %s (final), then replica B accepted a message as its next turn "+
			"(it checked the task open before the first turn ended, and appended the turn after); GetTask now says %s. "+
			"Want either the message refused as to a finished task, or the stream to go on with the queued turn (submitted, not terminal)",
			taskID, last.Status.State, state)
	}
}

// taskStateOf is the state GetTask gives task id through c, "?" when it
// answers an error.
func taskStateOf(ctx context.Context, c *a2aclient.Client, id string) string {
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
	if err != nil {
		return "?"
	}
	return string(got.Status.State)
}
