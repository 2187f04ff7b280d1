package push_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/agent/tck"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// v03Turn is one message of a task: its text, message id prefix (the TCK
// agent's scenario) and metadata.
type v03Turn struct {
	text, idPrefix string
	meta           map[string]any
}

// TestV03BodiesMatchRebuild: tasks of the demo and TCK agents with an A2A
// v0.3 config (the a2a-go v0.3 client's inline
// configuration.pushNotificationConfig), single turns and tasks of two and
// three turns after input- and auth-required ones, every TCK scenario
// (artifacts text, file, data, chunked with append and lastChunk, a direct
// message, rejected): every body the receiver gets is byte for byte the
// one the stage made before its task builder (the task rebuilt by
// a2amap.BuildTask from every stored frame at each update), and every
// update arrives. A replica that takes the request over at any of its
// stored messages (reading the earlier turns and catching up, then
// rendering the next messages incrementally) renders the same bodies.
func TestV03BodiesMatchRebuild(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithPush("127.0.0.1"))
	p.Pool(demo.Pool, demo.New())
	ta, err := tck.New()
	if err != nil {
		t.Fatal(err)
	}
	p.Pool(tck.Pool, ta)
	r := pushtest.NewReceiver(t)
	tasks := []struct {
		name, pool string
		turns      []v03Turn
	}{
		// delay_ms: the demo's frames are stored one message each, so that
		// a replica can take the request over between them.
		{"demo", demo.Pool, []v03Turn{{text: "tell me about the sea", meta: map[string]any{"frames": 40, "delay_ms": 2}}}},
		{"demo-input", demo.Pool, []v03Turn{{text: "ask:input the weather", meta: map[string]any{"delay_ms": 2}},
			{text: "Paris", meta: map[string]any{"frames": 12, "delay_ms": 2}}}},
		{"demo-three", demo.Pool, []v03Turn{{text: "ask:input the weather", meta: map[string]any{"delay_ms": 2}},
			{text: "ask:auth the forecast", meta: map[string]any{"delay_ms": 2}}, {text: "yes", meta: map[string]any{"delay_ms": 2}}}},
		{"tck-chunked-after-input", tck.Pool, []v03Turn{{idPrefix: "tck-input-required"}, {idPrefix: "tck-stream-artifact-chunked"}}},
	}
	for _, sc := range []string{"tck-complete-task", "tck-artifact-text", "tck-artifact-file", "tck-artifact-file-url",
		"tck-artifact-data", "tck-message-response", "tck-reject-task", "tck-stream-001", "tck-stream-003",
		"tck-stream-artifact-file", "tck-stream-artifact-chunked"} {
		tasks = append(tasks, struct {
			name, pool string
			turns      []v03Turn
		}{sc, tck.Pool, []v03Turn{{idPrefix: sc}}})
	}
	clients := map[string]*a2aclient.Client{demo.Pool: v03Client(t, p, demo.Pool), tck.Pool: v03Client(t, p, tck.Pool)}
	for _, tc := range tasks {
		t.Run(tc.name, func(t *testing.T) {
			path := "/" + tc.name
			ids := sendTurns(t, clients[tc.pool], r, path, tc.turns)
			for _, id := range ids {
				checkV03Bodies(t, p, r, path, id)
			}
		})
	}
}

// v03Client is the a2a-go v0.3 client of pool's card.
func v03Client(t *testing.T, p *pipetest.Pipeline, pool string) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(nil).Resolve(ctx, p.URL+"/pools/"+pool)
	if err != nil {
		t.Fatalf("resolve %s's card: %v", pool, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(http.DefaultClient))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// sendTurns sends turns as one task, the first with a v0.3 config for
// r's path, and returns the request ids of its turns (from the updates
// delivered: each turn has some).
func sendTurns(t *testing.T, c *a2aclient.Client, r *pushtest.Receiver, path string, turns []v03Turn) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var taskID a2a03.TaskID
	var contextID string
	for i, tu := range turns {
		m := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: tu.text + " "})
		m.Metadata = tu.meta
		if tu.idPrefix != "" {
			m.ID = tu.idPrefix + "-" + uuid.NewString()
		}
		params := &a2a03.MessageSendParams{Message: m}
		if i == 0 {
			params.Config = &a2a03.MessageSendConfig{PushConfig: &a2a03.PushConfig{URL: r.URL + path, Token: "tok"}}
		} else {
			m.TaskID, m.ContextID = taskID, contextID
		}
		res, err := c.SendMessage(ctx, params)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		switch v := res.(type) {
		case *a2a03.Task:
			taskID, contextID = v.ID, v.ContextID
		case *a2a03.Message:
			taskID, contextID = v.TaskID, v.ContextID
		}
		if i < len(turns)-1 && taskID == "" {
			t.Fatalf("turn %d answered %T without a task", i, res)
		}
	}
	var ids []string
	testkit.Eventually(t, 30*time.Second, "updates of every turn", func() bool {
		ids = ids[:0]
		for _, d := range r.Of(path) {
			id, _, _ := strings.Cut(d.EventID, ":")
			if len(ids) == 0 || ids[len(ids)-1] != id {
				ids = append(ids, id)
			}
		}
		return len(ids) == len(turns)
	})
	return ids
}

// checkV03Bodies compares the bodies r got at path for request id's
// updates, and those of a replica taking the request over at each of its
// stored messages, with the rebuilt ones (push.V03Rebuilt), once every
// update of the request has arrived.
func checkV03Bodies(t *testing.T, p *pipetest.Pipeline, r *pushtest.Receiver, path, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want, msgs, err := push.V03Rebuilt(ctx, p.NC, id)
	if err != nil || len(want) == 0 {
		t.Fatalf("request %s: %d updates rebuilt: %v", id, len(want), err)
	}
	got := map[string][]byte{}
	testkit.Eventually(t, 30*time.Second, "every update of "+id, func() bool {
		for _, d := range r.Of(path) {
			if strings.HasPrefix(d.EventID, id+":") {
				got[d.EventID] = d.Body
			}
		}
		return len(got) >= len(want)
	})
	for _, d := range r.Of(path) {
		if w, ok := want[d.EventID]; strings.HasPrefix(d.EventID, id+":") && (!ok || !bytes.Equal(d.Body, w)) {
			t.Fatalf("update %s delivered\n%s\nrebuilt\n%s", d.EventID, d.Body, w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("request %s: %d updates delivered, %d rebuilt", id, len(got), len(want))
	}
	for from := range msgs {
		bodies, order, err := push.V03Takeover(ctx, p.NC, id, from)
		if err != nil {
			t.Fatalf("taking over at message %d: %v", from, err)
		}
		if from == 0 && len(order) != len(want) {
			t.Fatalf("a replica rendering all %d messages made %d updates, want %d", msgs, len(order), len(want))
		}
		for _, eid := range order {
			if !bytes.Equal(bodies[eid], want[eid]) {
				t.Fatalf("taking over at message %d of %d, update %s\n%s\nrebuilt\n%s", from, msgs, eid, bodies[eid], want[eid])
			}
		}
	}
	t.Logf("request %s: %d updates, %d messages", id, len(want), msgs)
}

// TestV03StageCrash: a task of two turns with a v0.3 config. While the
// second turn runs (its first chunk stored, the rest held back by the
// agent), the replica delivering it is crashed with that turn's first
// update held by the webhook, and a second replica takes over: it reads
// the first turn back, catches up on what the second stored, and goes on.
// Every update of both turns arrives, the held one again, and every body
// is the rebuilt one (push.V03Rebuilt) whichever replica sent it.
func TestV03StageCrash(t *testing.T) {
	e := newEnv(t)
	first := e.startStage()
	r := pushtest.NewReceiver(t)
	e.create("alice", push.Config{TaskID: "t1", URL: r.URL + "/hook", Token: "tok", Version: push.V03})
	a := e.turn("alice", "t1", "", "a", 4)
	r.Await(t, 20*time.Second, "/hook", "completed")
	held, release := r.Hold(t, "/hook")
	g := "v03-crash-" + uuid.NewString()
	b := e.turnWith("alice", "t1", a, "b", 8, map[string]any{"gate": g})
	var h pushtest.Delivery
	h = testkit.Receive(t, held, 20*time.Second, "no update of the second turn")
	if !strings.HasPrefix(h.EventID, b+":") {
		t.Fatalf("held %s, want an update of the second turn %s", h.EventID, b)
	}
	e.startStage()
	first.crash()
	release()
	openGate(g)
	// The second turn's last update is in: every frame is stored.
	testkit.Eventually(t, 60*time.Second, "the second turn completed", func() bool {
		for _, d := range r.Of("/hook") {
			if strings.HasPrefix(d.EventID, b+":") && d.State == "completed" {
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := map[string][]byte{}
	for _, id := range []string{a, b} {
		w, _, err := push.V03Rebuilt(ctx, e.nc, id)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range w {
			want[k] = v
		}
	}
	got := map[string]int{}
	testkit.Eventually(t, 60*time.Second, "every update of both turns", func() bool {
		for _, d := range r.Of("/hook") {
			got[d.EventID]++
		}
		n := len(got)
		clear(got)
		return n >= len(want)
	})
	for _, d := range r.Of("/hook") {
		got[d.EventID]++
		if w, ok := want[d.EventID]; !ok || !bytes.Equal(d.Body, w) {
			t.Fatalf("update %s delivered\n%s\nrebuilt\n%s", d.EventID, d.Body, w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d updates delivered, %d rebuilt", len(got), len(want))
	}
	if got[h.EventID] < 2 {
		t.Errorf("the update held at the crash (%s) was delivered %d times; the new replica must send it again", h.EventID, got[h.EventID])
	}
	if err := <-first.done; !errors.Is(err, nats.ErrConnectionClosed) {
		t.Errorf("the crashed replica's Run returned %v, want nats.ErrConnectionClosed", err)
	}
	first.done = nil
}

// TestV03TaskNotBuiltFromAReplicaBehind: a v0.3 update is the whole
// Task, built over the task's earlier turns, which the stage reads back
// with direct gets (loadTurns: storedTurn) when a turn's first message
// comes. A read that finds nothing, or does not end with the turn's
// final frame, is confirmed by the stream's leader: an absence answered
// by a replica behind was taken for "that turn stored no frame", and the
// Task of every update of the second turn was posted without the first
// turn's answer, under the same event ids a replica reading the leader
// posts with the whole Task.
func TestV03TaskNotBuiltFromAReplicaBehind(t *testing.T) {
	e := newEnv(t)
	behindReplica(t, e)
	r := newReceiver(t, nil)
	const tasks = 16
	all := twoTurnTasks(e, r, "v03-behind", tasks, push.V03)
	e.startStage()
	for _, tr := range all {
		storeTurn(t, e, tr.r1, tr.task, "", "r1;")
	}
	// The first turns are delivered (their final status handled) before
	// the second turns start, as a task's turns follow each other.
	testkit.Eventually(t, 60*time.Second, "every first turn completed at its webhook", func() bool {
		return completedCount(t, push.V03, r.accepted()) == tasks
	})
	for _, tr := range all {
		storeTurn(t, e, tr.r2, tr.task, tr.r1, "r2;")
	}
	testkit.Eventually(t, 60*time.Second, "every second turn completed at its webhook", func() bool {
		return completedCount(t, push.V03, r.accepted()) == 2*tasks
	})
	var bad []string
	for _, d := range r.accepted() {
		req, _, _ := splitID(d.eventID)
		if !strings.HasSuffix(req, "-r2") {
			continue
		}
		if u := decode(t, push.V03, d); !strings.Contains(u.text, "r1;") {
			bad = append(bad, fmt.Sprintf("%s (text %q)", d.eventID, u.text))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d v0.3 updates of second turns posted a Task without the first turn's answer \"r1;\": %s",
			len(bad), strings.Join(bad, ", "))
	}
}

// TestCatchUpNotFedFromAReplicaBehind: a replica of the stage that gets
// a request's messages from the n-th on feeds its mapper the earlier ones
// first (catchUp), read back with direct gets. A read that stops short of
// the message rendered (a replica behind answered) is confirmed by the
// stream's leader, or the render fails and is done again: the updates it
// makes are those of a replica reading the leader, never ones built
// without the earlier frames (a v0.3 Task without the answer so far).
func TestCatchUpNotFedFromAReplicaBehind(t *testing.T) {
	e := newEnvOn(t)
	ctx := tctx(t)
	const id = "catchup-behind"
	storeRequestAfter(t, e, id, "alice", "catchup", "")
	for i, text := range []string{"a;", "b;", "c;"} {
		storeFrame(t, e, id, "alice", "catchup", int64(i), text, false)
	}
	storeFrame(t, e, id, "alice", "catchup", 3, "", true)
	want, order, err := push.V03Takeover(ctx, e.nc, id, 0)
	if err != nil || len(order) < 4 {
		t.Fatalf("rendered from the leader: %d updates, %v", len(order), err)
	}
	behindReplica(t, e)
	rendered, failed := 0, 0
	for range 50 {
		for from := 1; from <= 3; from++ {
			got, order, err := push.V03Takeover(ctx, e.nc, id, from)
			if err != nil {
				if !strings.Contains(err.Error(), "behind its leader") {
					t.Fatalf("taking over at message %d: %v", from, err)
				}
				failed++
				continue
			}
			for _, eid := range order {
				rendered++
				if !bytes.Equal(got[eid], want[eid]) {
					t.Fatalf("taking over at message %d with a replica behind, update %s\n%s\nfrom the leader\n%s", from, eid, got[eid], want[eid])
				}
			}
		}
	}
	if rendered == 0 || failed == 0 {
		t.Fatalf("premise: %d updates rendered, %d renders refused for a replica behind; want both", rendered, failed)
	}
}
