package ingress_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// holdGate is an agent whose turns start (started) and then wait for the
// hold current when they started (nil: none).
type holdGate struct {
	started chan string
	hold    atomic.Pointer[chan struct{}]
}

func (g *holdGate) serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	h := g.hold.Load()
	select {
	case g.started <- env.RequestID:
	default:
	}
	if h != nil {
		select {
		case <-*h:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return w.Complete(map[string]any{"content": "reply " + env.RequestID})
}

// TestLateMessageAppendedBehindRefusedTurnRefused: the fix
// of 72cfc88 (stillOpen) checks, once a continuing message's turn is
// recorded, that the turn *just before it* has not ended the task. Two
// messages M1 (replica B) and M2 (replica A) continue task T while its
// first turn R1 runs; both check the task open and are held before their
// append (a busy replica). R1 completes; A's stream tells its client the
// task completed (final). M1 is recorded after R1, finds R1 terminal and
// is taken out of the record again (stillOpen's Remove). M2, recorded
// while M1 is still listed, checks only M1 (ingress/turns.go:151,
// prev[0]): M1 was never published, has no frames, so Continuable says
// "open" (egress/protocols.go:229), and M2 is accepted and published
// after R1: a turn of a task every client was told had completed. The
// README: "one naming a finished task is refused (UnsupportedOperation)
// ... A task never shows a terminal state its queued turn takes back".
// M2's append must land between M1's append and M1's removal; the test
// releases M2 when a watch of the record sees M1 in it, and tries up to
// 20 tasks.
func TestLateMessageAppendedBehindRefusedTurnRefused(t *testing.T) {
	g := &holdGate{started: make(chan string, 64)}
	a, b, nc := twoReplicasWithPool(t, g.serve)
	js := natstest.JetStream(t, nc)
	kv, err := js.KeyValue(context.Background(), streams.TasksBucket)
	if err != nil {
		t.Fatal(err)
	}
	cfg := a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}})
	ca, cb := a2aupstream.Client(t, a.url, cfg), a2aupstream.Client(t, b.url, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() { ingress.SetAppendHook(a.in, nil); ingress.SetAppendHook(b.in, nil) })

	type sendRes struct {
		res a2a.SendMessageResult
		err error
	}
	send := func(c *a2aclient.Client, taskID, text string) <-chan sendRes {
		out := make(chan sendRes, 1)
		go func() {
			m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
			m.TaskID = a2a.TaskID(taskID)
			res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
			out <- sendRes{res, err}
		}()
		return out
	}
	for round := 0; round < 20; round++ {
		hold := make(chan struct{})
		g.hold.Store(&hold)
		type streamEnd struct {
			last a2a.Event
			err  error
		}
		ended := make(chan streamEnd, 1)
		go func() {
			var last a2a.Event
			for ev, err := range ca.SendStreamingMessage(ctx, userMessage("first")) {
				if err != nil {
					ended <- streamEnd{last, err}
					return
				}
				last = ev
			}
			ended <- streamEnd{last, nil}
		}()
		taskID := testkit.Receive(t, g.started, 15*time.Second, "turn 1 to start")
		g.hold.Store(nil)

		hookOn := func(s *ingress.Server) (reached chan string, proceed chan struct{}) {
			reached, proceed = make(chan string, 1), make(chan struct{})
			var once atomic.Bool
			ingress.SetAppendHook(s, func(kind, id, requestID string) {
				if kind == ingress.KindTask && id == taskID && once.CompareAndSwap(false, true) {
					reached <- requestID
					<-proceed
				}
			})
			return reached, proceed
		}
		reachedB, proceedB := hookOn(b.in)
		reachedA, proceedA := hookOn(a.in)
		sent1 := send(cb, taskID, "second")
		m1 := testkit.Receive(t, reachedB, 15*time.Second, "M1 to reach its append on replica B")
		sent2 := send(ca, taskID, "third")
		m2 := testkit.Receive(t, reachedA, 15*time.Second, "M2 to reach its append on replica A")

		// R1 ends; A's stream ends the task.
		close(hold)
		end := testkit.Receive(t, ended, 15*time.Second, "the first turn's stream to end")
		if end.err != nil {
			t.Fatalf("stream of turn 1: %v", end.err)
		}
		last, _ := end.last.(*a2a.TaskStatusUpdateEvent)
		if last == nil || !last.Status.State.Terminal() {
			t.Fatalf("stream of turn 1 ended with %#v; want a terminal status", end.last)
		}

		// M2 goes on as soon as the record lists M1.
		tok, _ := subjects.EncodeID(taskID)
		w, err := kv.Watch(ctx, ingress.KindTask+"."+tok, jetstream.UpdatesOnly())
		if err != nil {
			t.Fatal(err)
		}
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for e := range w.Updates() {
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue
				}
				var rec struct {
					RequestIDs []string `json:"request_ids"`
				}
				if json.Unmarshal(e.Value(), &rec) == nil && slices.Contains(rec.RequestIDs, m1) {
					close(proceedA)
					return
				}
			}
		}()
		close(proceedB)
		r1 := testkit.Receive(t, sent1, 15*time.Second, "M1's answer")
		testkit.Receive(t, watched, 15*time.Second, "the record to list M1")
		_ = w.Stop()
		r2 := testkit.Receive(t, sent2, 15*time.Second, "M2's answer")
		ingress.SetAppendHook(a.in, nil)
		ingress.SetAppendHook(b.in, nil)
		if r1.err == nil {
			t.Fatalf("round %d: M1 (%s), recorded after the task completed, was accepted", round, m1)
		}
		if r2.err == nil {
			state := taskStateOf(ctx, ca, taskID)
			t.Fatalf("round %d, task %s: replica A's stream ended it %s (final); M1 was refused as to a finished task, "+
				"but M2 (%s), recorded behind M1 before M1 was taken out of the record, was accepted as the task's next turn "+
				"(stillOpen checked only M1, never published, so \"open\"); GetTask now says %s. Want M2 refused (UnsupportedOperation)",
				round, taskID, last.Status.State, m2, state)
		}
	}
}
