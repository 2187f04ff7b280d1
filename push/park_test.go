package push_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// wakeKeys lists the parked configs' wake-up keys in E2A_PUSH with their
// revisions.
func wakeKeys(t testing.TB, e *env) map[string]uint64 {
	t.Helper()
	ctx := tctx(t)
	kv, err := e.js.KeyValue(ctx, streams.PushBucket)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range lister.Keys() {
		if !strings.HasPrefix(k, "wake.") {
			continue
		}
		en, err := kv.Get(ctx, k)
		if err == nil {
			out[k] = en.Revision()
		}
	}
	return out
}

// TestParkedConfigDrainedPastBucketTTL: E2A_PUSH keys age out after
// TasksTTL (the task's config and the cursor are written again as the
// task goes on, so they stay); the wake-up key is written once, when the
// config is parked, and again by wakeLater once a third of the TTL old.
// A webhook failing for longer than TasksTTL (retry window 24 h by
// default; docs/capacity.md has E2A_TASKS_TTL set to the hot streams' max
// age) while its task keeps answering: once the webhook is back, every
// turn is delivered, in order (the wake-up aged out before, and the
// config stayed parked for ever).
func TestParkedConfigDrainedPastBucketTTL(t *testing.T) {
	sc := streams.DefaultConfig()
	sc.TasksTTL = 2 * time.Second
	e := newEnv(t, push.WithStreamsConfig(sc))
	e.startStage(push.WithStreamsConfig(sc))
	r, healed := healingReceiver(t)
	e.create("alice", push.Config{TaskID: "ttl", URL: r.srv.URL})
	var turns []string
	after := ""
	next := func() {
		label := fmt.Sprintf("t%d", len(turns))
		after = e.turn("alice", "ttl", after, label, 2)
		turns = append(turns, label)
	}
	next()
	testkit.Eventually(t, 10*time.Second, "the failing config parked (a wake-up key written)", func() bool {
		return len(wakeKeys(t, e)) == 1
	})
	parked, ttl := time.Now(), 2*time.Second
	// The task keeps answering (each turn renews its configs' key) for
	// twice the bucket's TTL while the webhook fails.
	last := time.Now()
	testkit.Eventually(t, 30*time.Second, "the task answered for 2×TasksTTL", func() bool {
		if time.Since(last) > 500*time.Millisecond {
			next()
			last = time.Now()
		}
		return time.Since(parked) > 2*ttl
	})
	if _, err := e.store.Get(tctx(t), "alice", "ttl", mustOnlyConfig(t, e, "alice", "ttl")); err != nil {
		t.Fatalf("the config aged out while its task answered: %v", err)
	}
	healed.Store(true)
	next()
	testkit.Eventually(t, 15*time.Second, fmt.Sprintf("a parked config is drained once its webhook is back, however long it was parked: all %d turns delivered (wake-up keys now: %v)", len(turns), wakeKeys(t, e)), func() bool {
		return completedCount(t, push.V1, r.accepted()) == len(turns)
	})
	ordered(t, push.V1, r.accepted(), turns, expectText(turns, 2))
}

func mustOnlyConfig(t testing.TB, e *env, principal, task string) string {
	t.Helper()
	ds, err := e.store.Deliveries(tctx(t), principal, task)
	if err != nil || len(ds) != 1 {
		t.Fatalf("configs of %s: %v %v", task, ds, err)
	}
	return ds[0].ConfigID
}

// TestDeletedParkedConfigLeavesNoWake: a config deleted while it is
// parked: the drain that finds it gone acks its wake-up and deletes its
// key (it stayed in E2A_PUSH until E2A_TASKS_TTL; for ever with 0).
func TestDeletedParkedConfigLeavesNoWake(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	r := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusServiceUnavailable })
	c := e.create("alice", push.Config{TaskID: "del", URL: r.srv.URL})
	e.turn("alice", "del", "", "", 3)
	testkit.Eventually(t, 10*time.Second, "the failing config parked", func() bool {
		return len(wakeKeys(t, e)) == 1 && r.started() > 1
	})
	if err := e.store.Delete(tctx(t), "alice", "del", c.ID); err != nil {
		t.Fatal(err)
	}
	// The drain runs again (its wake-up is nak'd for the 5..50 ms backoff)
	// and finds the config gone.
	testkit.Eventually(t, 10*time.Second, "the wake-up consumer has nothing pending (the drain saw the config gone)", func() bool {
		ci, err := e.js.Consumer(context.Background(), "KV_"+streams.PushBucket, push.DefaultConsumer+"-wake")
		if err != nil {
			return false
		}
		info, err := ci.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.NumRedelivered == 0
	})
	if got := wakeKeys(t, e); len(got) != 0 {
		t.Errorf("a deleted config's wake-up key is deleted with it (or by the drain that finds it gone); left: %v", got)
	}
}

// TestParkedBacklogStaysBounded: a parked config's cursor stays the
// same size whatever the number of turns of its task parked (its backlog
// names the first and the last turn, not every one), so every message of
// the task can be handed to it and acked while its webhook is down. When
// the backlog listed every turn (ids up to subjects.MaxIDLength, 1 KiB;
// turns as many as the task has within the retry window, 24 h) the
// cursor outgrew max_payload (1 MiB by default, about a thousand turns of
// 1 KiB ids; 64 KiB here, about sixty): no message of the task could be
// handed to the config, each was nak'd and redelivered for as long as the
// webhook stayed down, and the task's messages filled the consumer's
// MaxAckPending (8 here, as in TestFailingTenantDoesNotStopOthers):
// another tenant's task was not delivered at all.
func TestParkedBacklogStaysBounded(t *testing.T) {
	e := newEnvOn(t, natstest.WithMaxPayload(64<<10))
	e.startStage(push.WithMaxAckPending(8))
	down, healed := healingReceiver(t)
	e.create("alice", push.Config{TaskID: "chatty", URL: down.srv.URL})
	after := ""
	const turnsN = 90
	var ids []string
	for i := range turnsN {
		id := fmt.Sprintf("%s-%04d", strings.Repeat("q", 1000), i)
		storeRequestAfter(t, e, id, "alice", "chatty", after)
		storeFrame(t, e, id, "alice", "chatty", 0, "", true)
		after = id
		ids = append(ids, id)
		if i == 0 {
			testkit.Eventually(t, 10*time.Second, "alice's failing config parked", func() bool {
				return len(wakeKeys(t, e)) == 1
			})
		}
	}
	bob := newReceiver(t, nil)
	e.create("bob", push.Config{TaskID: "quiet", URL: bob.srv.URL})
	storeRequestAfter(t, e, "bob-1", "bob", "quiet", "")
	storeFrame(t, e, "bob-1", "bob", "quiet", 0, "hello;", false)
	storeFrame(t, e, "bob-1", "bob", "quiet", 1, "", true)
	// Bob's task is delivered within seconds when nothing holds the
	// consumer (TestFailingTenantDoesNotStopOthers); given 10.
	deadline := time.Now().Add(10 * time.Second)
	testkit.Eventually(t, 30*time.Second, "bob's task delivered, or 10 s passed", func() bool {
		return completedCount(t, push.V1, bob.accepted()) == 1 || time.Now().After(deadline)
	})
	if completedCount(t, push.V1, bob.accepted()) != 1 {
		c, err := e.js.Consumer(context.Background(), streams.ResponsesStream, push.DefaultConsumer)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("another tenant's task not delivered in 10 s: the consumer has %d messages ack-pending (bound 8), %d "+
			"redelivered, %d not delivered yet; the stage logged %d times \"delivery state unavailable\" (%s)",
			info.NumAckPending, info.NumRedelivered, info.NumPending, strings.Count(e.log.String(), "delivery state unavailable"),
			firstLine(e.log.String(), "delivery state unavailable"))
	}
	// Its webhook back, the parked config gets every turn, in order.
	healed.Store(true)
	testkit.Eventually(t, 60*time.Second, "every turn of alice's task delivered after recovery", func() bool {
		return len(completedBy(t, down)) == turnsN
	})
	var order []string
	for _, d := range down.accepted() {
		if req, _, _ := splitID(d.eventID); len(order) == 0 || order[len(order)-1] != req {
			order = append(order, req)
		}
	}
	if !slices.Equal(order, ids) {
		t.Fatalf("turns delivered out of order: %d deliveries of %d turns", len(order), len(ids))
	}
}

// unparkedAndSettled waits until the webhook's config is no longer parked
// (no wake-up key), the push consumer has nothing pending and the
// receiver got want's completed status: what a drain leaves when it
// un-parks the config.
func unparkedAndSettled(t *testing.T, e *env, r *receiver, want string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "the parked config drained and un-parked, the consumer idle", func() bool {
		return completedBy(t, r)[want] && len(wakeKeys(t, e)) == 0 && consumerIdle(t, e)
	})
}

// TestTurnAfterAnUnpublishedTurn: a task's turn whose publish failed and
// whose removal from the task record failed too (ingress/unpublished.go
// retries it in the background; until it lands, the agent runtime runs
// the next turn after a grace period) leaves the next turn C naming a turn B
// that was never stored. Not parked, the stage delivers A then C
// (turnOver: nothing of B is stored). Parked (its webhook down on A), the
// config gets the same once its webhook is back: C, handed to it after a
// gap, is a chain of the backlog's own after A's (Ends), not taken for a
// turn older than A (which the drain, following the turns back from A,
// never met: C's updates were lost).
func TestTurnAfterAnUnpublishedTurn(t *testing.T) {
	for _, parked := range []bool{false, true} {
		t.Run(fmt.Sprintf("parked=%v", parked), func(t *testing.T) {
			e := newEnvOn(t)
			e.startStage()
			r, healed := healingReceiver(t)
			healed.Store(!parked)
			e.create("alice", push.Config{TaskID: "gap", URL: r.srv.URL})
			storeTurn(t, e, "gap-A", "gap", "", "a;")
			if parked {
				testkit.Eventually(t, 10*time.Second, "the failing config parked", func() bool {
					return len(wakeKeys(t, e)) == 1
				})
			}
			// Turn B was appended to the record and never stored; C names it.
			storeTurn(t, e, "gap-C", "gap", "gap-B", "c;")
			testkit.Eventually(t, 10*time.Second, "C's messages handled (acked)", func() bool { return consumerIdle(t, e) })
			healed.Store(true)
			unparkedAndSettled(t, e, r, "gap-A")
			testkit.Eventually(t, 10*time.Second, "turn C delivered", func() bool { return completedBy(t, r)["gap-C"] })
			var order []string
			for _, d := range r.accepted() {
				order = append(order, d.eventID)
			}
			if want := []string{"gap-A:0:0", "gap-A:1:0", "gap-C:0:0", "gap-C:1:0"}; !slices.Equal(order, want) {
				t.Fatalf("delivered %v, want %v", order, want)
			}
		})
	}
}

// storeLongTurn stores alice's request id of task after the turn after
// ("" for the first) with a short Nats-Msg-Id, and its two frames: text,
// then the final one.
func storeLongTurn(t *testing.T, e *env, id, task, after, text string) {
	t.Helper()
	h := []string{subjects.HeaderMsgID, id[len(id)-8:], subjects.HeaderRequestID, "r"}
	if after != "" {
		h = append(h, subjects.HeaderAfterRequest, after)
	}
	natstest.PublishRequest(t, e.js, "noagent", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id,
		Method: "message/stream", IsStream: true, UserID: "alice", TaskID: task, ContextID: ctxOf("alice", task), Channel: "test",
		Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}, h...)
	storeFrame(t, e, id, "alice", task, 0, text, false)
	storeFrame(t, e, id, "alice", task, 1, "", true)
}

// TestUnwritableStateInADrain: request ids of 1,000 bytes
// (subjects.MaxIDLength is 1 KiB), a webhook down on turn A (the config
// parked with A, then B handed to it: backlog A, B), then back. The
// drain's cursor past A's first update names A (its position) and the
// backlog's A and B. With a max_payload of 3,800 bytes it is written (it
// stores no request id twice: its event id is kept as its part after the
// request's) and both turns are delivered. With 3,000 bytes, which every
// envelope, frame and parked cursor of the test fits, it cannot be
// written: the config is skipped as on the consumer's path (its backlog
// dropped, an error logged and counted in e2a_push_skipped_total), and
// A's first update is posted once, not again and again (a drain that
// took the write's error for a transient one drained the config again:
// the same update posted for ever, the config never moving).
func TestUnwritableStateInADrain(t *testing.T) {
	for _, maxPayload := range []int{3800, 3000} {
		t.Run(fmt.Sprint(maxPayload), func(t *testing.T) {
			e := newEnvOn(t, natstest.WithMaxPayload(int32(maxPayload)))
			reg := prometheus.NewRegistry()
			e.startStage(push.WithRegisterer(reg))
			r, healed := healingReceiver(t)
			e.create("alice", push.Config{TaskID: "big", URL: r.srv.URL})
			id := func(s string) string { return strings.Repeat("q", 998) + "-" + s }
			storeLongTurn(t, e, id("A"), "big", "", "a;")
			testkit.Eventually(t, 10*time.Second, "the failing config parked", func() bool {
				return len(wakeKeys(t, e)) == 1
			})
			storeLongTurn(t, e, id("B"), "big", id("A"), "b;")
			testkit.Eventually(t, 10*time.Second, "B's messages handed to the parked config", func() bool { return consumerIdle(t, e) })
			healed.Store(true)
			first := id("A") + ":0:0"
			posts := func() int {
				n := 0
				for _, d := range r.accepted() {
					if d.eventID == first {
						n++
					}
				}
				return n
			}
			const drainSkip = "a parked config's delivery state cannot be written"
			skipped := func() float64 { return counter(t, reg, "e2a_push_skipped_total") }
			testkit.Eventually(t, 30*time.Second, "the config un-parked, or A's first update accepted 5 times", func() bool {
				return len(wakeKeys(t, e)) == 0 && (completedBy(t, r)[id("B")] || skipped() > 0) || posts() >= 5
			})
			if n := posts(); n != 1 {
				t.Fatalf("the receiver accepted update %s…%s %d times; the stage logged %d \"cannot drain a parked config\"",
					first[:8], first[len(first)-8:], n, strings.Count(e.log.String(), "cannot drain a parked config"))
			}
			delivered := completedBy(t, r)[id("B")]
			switch {
			case maxPayload == 3800 && (!delivered || skipped() != 0):
				t.Fatalf("B delivered %v, %v skipped: the drain's cursor was not written", delivered, skipped())
			case maxPayload == 3000 && (delivered || skipped() != 1 || !strings.Contains(e.log.String(), drainSkip)):
				t.Fatalf("B delivered %v, %v skipped; logged: %s", delivered, skipped(), firstLine(e.log.String(), "cannot be written"))
			}
		})
	}
}

// TestBacklogCycleEnds: the turns a drain follows back from a parked
// backlog's last (E2A-After-Request) may make a cycle, a request id taken
// again naming a later turn as its previous one. The walk meets each turn
// once: the backlog's first turn, then the turns of the cycle once each,
// in their order back from the last. (Without a seen-set the walk went
// round the cycle up to maxBacklogTurns times and never met the first:
// its turn was skipped.)
func TestBacklogCycleEnds(t *testing.T) {
	e := newEnvOn(t)
	e.startStage()
	r, healed := healingReceiver(t)
	e.create("alice", push.Config{TaskID: "cyc", URL: r.srv.URL})
	storeTurn(t, e, "cyc-A", "cyc", "", "a;")
	testkit.Eventually(t, 10*time.Second, "the failing config parked", func() bool { return len(wakeKeys(t, e)) == 1 })
	storeTurn(t, e, "cyc-L", "cyc", "cyc-A", "l;")
	storeTurn(t, e, "cyc-M", "cyc", "cyc-L", "m;")
	testkit.Eventually(t, 10*time.Second, "L's and M's messages handed off", func() bool { return consumerIdle(t, e) })
	// L's id taken again (the same tenant and task), after M.
	natstest.PublishRequest(t, e.js, "noagent", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: "cyc-L",
		Method: "message/stream", IsStream: true, UserID: "alice", TaskID: "cyc", ContextID: ctxOf("alice", "cyc"), Channel: "test",
		Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}, subjects.HeaderMsgID, "cyc-L-again",
		subjects.HeaderAfterRequest, "cyc-M")
	healed.Store(true)
	unparkedAndSettled(t, e, r, "cyc-M")
	var order []string
	for _, d := range r.accepted() {
		if req, _, _ := splitID(d.eventID); len(order) == 0 || order[len(order)-1] != req {
			order = append(order, req)
		}
	}
	if want := []string{"cyc-A", "cyc-L", "cyc-M"}; !slices.Equal(order, want) {
		for _, d := range r.all() {
			t.Logf("call %s %d", d.eventID, d.code)
		}
		t.Fatalf("turns delivered %v, want %v\n%s", order, want, e.log.String())
	}
	if strings.Contains(e.log.String(), "longer than the turns followed") {
		t.Fatalf("the walk went round the cycle: %s", firstLine(e.log.String(), "longer than the turns followed"))
	}
}

// firstDeliveredThenStopped starts a stage with a POST timeout of 5
// minutes, has it deliver the first message of request task-r1 of
// alice's task to config "c", and stops it: the messages stored next are
// the test's to hand out.
func firstDeliveredThenStopped(t *testing.T, task string) (*env, *receiver) {
	t.Helper()
	e := newEnvOn(t)
	st := e.startStage(push.WithTimeout(5 * time.Minute))
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: task, ID: "c", URL: r.srv.URL})
	storeRequestAfter(t, e, task+"-r1", "alice", task, "")
	storeFrame(t, e, task+"-r1", "alice", task, 0, "a;", false)
	testkit.Eventually(t, 20*time.Second, "the first message delivered and acked", func() bool {
		ds, err := e.store.Deliveries(tctx(t), "alice", task)
		return err == nil && len(ds) == 1 && strings.HasPrefix(ds[0].LastEvent, task+"-r1:0:") && consumerIdle(t, e)
	})
	st.stop()
	return e, r
}

// takeNext takes the push consumer's next message off it, as the replica
// that parks it does (acked), and returns its stream sequence.
func takeNext(t *testing.T, e *env) uint64 {
	t.Helper()
	c, err := e.js.Consumer(tctx(t), streams.ResponsesStream, push.DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	for msg := range batch.Messages() {
		md, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		seq = md.Sequence.Stream
		if err := msg.DoubleAck(tctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if seq == 0 {
		t.Fatalf("premise: no message fetched: %v", batch.Error())
	}
	return seq
}

// TestParkedWithItsNextMessageNoSettle: a config parked with the very
// message its cursor waits for (a lane found it not next while the lane
// of the message before it posted, and that lane wrote its position
// before the park read the cursor) has no POST of another lane to wait
// for: its drain delivers at once. It waited the settle time (the POST
// timeout and a second) before: no lane was left to clear it, the message
// it waited for being the one parked. The stage here is stopped while
// the message is parked, and its POST timeout is 5 minutes: the drain
// waiting for a settle time would not deliver within the test.
func TestParkedWithItsNextMessageNoSettle(t *testing.T) {
	e, r := firstDeliveredThenStopped(t, "next")
	defer e.logOnFailure(t)
	storeFrame(t, e, "next-r1", "alice", "next", 1, "", true)
	// The replica that parks the message acks it: taken off the consumer
	// here.
	seq := takeNext(t, e)
	parked, settle, err := push.ParkMessage(tctx(t), e.nc, "alice", "next", "c", "next-r1", seq, push.WithTimeout(5*time.Minute))
	if err != nil || !parked {
		t.Fatalf("premise: the config not parked (%v)", err)
	}
	if settle {
		t.Errorf("parked with the message its cursor waits for, the config waits a settle time")
	}
	e.startStage(push.WithTimeout(5 * time.Minute))
	testkit.Eventually(t, 20*time.Second, "the parked message delivered by the drain", func() bool {
		return completedBy(t, r)["next-r1"]
	})
}

// TestParkedAwaitingDeletedMessageNoSettle: a config parked with a
// message that is not the one its cursor waits for waits a settle time,
// for a lane's POST of the awaited message begun before the park, or for
// that message to come to a lane (handOff). When the awaited message
// never comes to a lane (deleted, or aged out of E2A_RESPONSES, before
// the consumer delivered it) and no lane holds a message up to the
// backlog's, nothing can be in flight: the drain delivers at once what
// is stored. It waited the whole settle time (the POST timeout and a
// second) before, no lane being left to clear it. The stage here is
// stopped while the config parks, and its POST timeout is 5 minutes:
// the drain waiting for the settle time would not deliver within the
// test.
func TestParkedAwaitingDeletedMessageNoSettle(t *testing.T) {
	e, r := firstDeliveredThenStopped(t, "gone")
	defer e.logOnFailure(t)
	storeFrame(t, e, "gone-r1", "alice", "gone", 1, "b;", false) // the message the cursor waits for
	storeFrame(t, e, "gone-r1", "alice", "gone", 2, "", true)
	ctx := tctx(t)
	s, err := e.js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := subjects.Response("gone-r1")
	last, err := s.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		t.Fatal(err)
	}
	awaited := last.Sequence - 1
	if m, err := s.GetMsg(ctx, awaited); err != nil || m.Subject != subj {
		t.Fatalf("premise: the message before the last is not the request's (%v)", err)
	}
	// A replica's lane takes the last message while the one before it
	// is not delivered yet: not the config's next, parked.
	parked, settle, err := push.ParkMessage(ctx, e.nc, "alice", "gone", "c", "gone-r1", last.Sequence,
		push.WithTimeout(5*time.Minute))
	if err != nil || !parked || !settle {
		t.Fatalf("premise: the config not parked with a settle time (parked %v, settle %v, %v)", parked, settle, err)
	}
	// The awaited message is deleted before the consumer delivers it:
	// it skips it, and the message parked is acked by its replica.
	if err := s.DeleteMsg(ctx, awaited); err != nil {
		t.Fatal(err)
	}
	if seq := takeNext(t, e); seq != last.Sequence {
		t.Fatalf("premise: the consumer delivered %d, not the parked message %d", seq, last.Sequence)
	}
	e.startStage(push.WithTimeout(5 * time.Minute))
	testkit.Eventually(t, 20*time.Second, "the parked message delivered by the drain", func() bool {
		return completedBy(t, r)["gone-r1"] && len(wakeKeys(t, e)) == 0
	})
	for _, d := range r.all() {
		if strings.HasPrefix(d.eventID, "gone-r1:1:") {
			t.Errorf("the deleted message's update %s was posted", d.eventID)
		}
	}
}
