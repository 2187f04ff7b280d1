package ingress_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// queuedTurn is runningTurn with the task's second message ("second",
// answered "reply two") queued behind its first turn.
func queuedTurn(t *testing.T, begin string) (ctx context.Context, p *pipeline, c *a2aclient.Client, task *a2a.Task, release func()) {
	t.Helper()
	ctx, p, c, task, release = runningTurn(t, begin)
	sendSecond(ctx, t, c, task)
	return ctx, p, c, task, release
}

// sendSecond sends the task's second message, "second" (answered "reply
// two"), returning at once.
func sendSecond(ctx context.Context, t *testing.T, c *a2aclient.Client, task *a2a.Task) {
	t.Helper()
	now := &a2a.SendMessageConfig{ReturnImmediately: true}
	if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("second")), Config: now}); err != nil {
		t.Fatalf("second SendMessage: %v", err)
	}
}

// runningTurn starts a task whose first turn ("first") runs until release
// is called, having written begin as its first chunk when begin is not
// empty (stored before runningTurn returns), then writes "reply one" and
// completes; a later message of the task is answered "reply two". release
// is called at the end of the test if the test did not.
func runningTurn(t *testing.T, begin string) (ctx context.Context, p *pipeline, c *a2aclient.Client, task *a2a.Task, release func()) {
	t.Helper()
	pp := pipetest.Start(t)
	started := make(chan struct{}, 1)
	released := make(chan struct{})
	pp.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if demo.Text(env) == "first" {
			if begin != "" {
				if err := w.Chunk(e2a.DeltaText, begin); err != nil {
					return err
				}
			}
			started <- struct{}{}
			select {
			case <-released:
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := w.Chunk(e2a.DeltaText, "reply one"); err != nil {
				return err
			}
			return w.Complete(nil)
		}
		if err := w.Chunk(e2a.DeltaText, "reply two"); err != nil {
			return err
		}
		return w.Complete(nil)
	}))
	var once bool
	release = func() {
		if !once {
			once = true
			close(released)
		}
	}
	t.Cleanup(release)
	p = &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	_, c = v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	now := &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("first")), Config: now})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("first SendMessage result %T", res)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the first turn did not start")
	}
	if begin != "" {
		testkit.Eventually(t, 10*time.Second, "the first turn's chunk stored", func() bool {
			g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			return err == nil && g.Status.State == a2a.TaskStateWorking
		})
	}
	return ctx, p, c, task, release
}

// TestSubscribeDuringQueuedTurn: a task's first turn runs while the
// client's second message waits behind it (a queued turn: turns of a task
// run one after another). SubscribeToTask follows the task from where it
// stands: the task in the running turn's state (submitted while that turn
// has written nothing, else working: not the queued turn's submitted),
// then the running turn's events from its first frame (the chunk it wrote
// before the subscription too: TestSubscribeMidTurnHasTheWholeAnswer) to
// its end, then the queued turn's
// (a2a.Answers.A2ASubscription follows every turn that has not ended, not
// the newest alone). The running turn's end is not a terminal state: the
// task goes on with the queued turn, submitted (as GetTask shows it then).
func TestSubscribeDuringQueuedTurn(t *testing.T) {
	for _, c := range []struct {
		name, begin, want string
	}{
		{"nothing written", "", "task:TASK_STATE_SUBMITTED | artifact:reply one | status:TASK_STATE_SUBMITTED | " +
			"artifact:reply two | status:TASK_STATE_COMPLETED"},
		{"a chunk written", "reply one begins, ", "task:TASK_STATE_WORKING | artifact:reply one begins,  | artifact:reply one | status:TASK_STATE_SUBMITTED | " +
			"artifact:reply two | status:TASK_STATE_COMPLETED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, _, cl, task, release := queuedTurn(t, c.begin)
			var seen []string
			for ev, err := range cl.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
				if err != nil {
					t.Fatalf("SubscribeToTask: %v (after %v)", err, seen)
				}
				seen = append(seen, v1EventLine(ev))
				release() // the running turn goes on once the subscriber has the task
			}
			if got := strings.Join(seen, " | "); got != c.want {
				t.Fatalf("SubscribeToTask during a queued turn:\n%s\nwant the running turn's state and reply one, then reply two:\n%s", got, c.want)
			}
		})
	}
}

// TestResubscribeV03DuringQueuedTurn: as TestSubscribeDuringQueuedTurn,
// with A2A v0.3 tasks/resubscribe: one stream follows the running turn,
// then the queued one (a2a.Answers.FollowedTurns, not the newest turn
// alone), and ends after the last turn's final status, the one event
// written final:true.
func TestResubscribeV03DuringQueuedTurn(t *testing.T) {
	_, p, _, task, release := queuedTurn(t, "")
	resp := p.post(t, "/a2a", "text/event-stream", `{"jsonrpc":"2.0","id":7,"method":"tasks/resubscribe","params":{"id":"`+string(task.ID)+`"}}`)
	release()
	var lines []string
	for _, e := range readSSE(t, resp.Body) {
		lines = append(lines, string(e.data))
	}
	got := strings.Join(lines, "\n")
	one, two := strings.Index(got, "reply one"), strings.Index(got, "reply two")
	if one < 0 || two < one {
		t.Fatalf("tasks/resubscribe during a queued turn, want the running turn's reply one, then reply two:\n%s", got)
	}
	if n := strings.Count(got, `"final":true`); n != 1 || !strings.Contains(lines[len(lines)-1], `"final":true`) ||
		!strings.Contains(lines[len(lines)-1], `"completed"`) {
		t.Fatalf("tasks/resubscribe: %d final events, want one, the last turn's completed status last:\n%s", n, got)
	}
}

// TestResubscribeV03ReconnectAcrossTurns: tasks/resubscribe during a
// queued turn streams turn one's events, then turn two's, in one SSE
// stream (serveTurns), each event id naming its turn
// ("<requestID>:<seq>": the sequences restart at 0 with each turn). A
// client whose connection drops after turn one's first event reconnects,
// as SSE clients do, with that Last-Event-ID. By then turn one has ended
// and turn two has run: the resumed stream starts in turn one, after that
// event (its tail, "reply one", then its end, final:false), then follows
// turn two ("reply two", final:true, once). With plain sequences for ids
// (found by review) the resumed stream applied the id to turn two and
// lost its first frame.
func TestResubscribeV03ReconnectAcrossTurns(t *testing.T) {
	ctx, p, c, task, release := queuedTurn(t, "reply one begins, ")
	body, resp, lastID := resubscribeFirstEvent(t, p, task)
	if !strings.HasSuffix(lastID, ":0") {
		t.Errorf("the first event id of a stream of two turns is %q, want the turn's request id, then :0", lastID)
	}
	resp.Body.Close() // the connection drops
	release()
	testkit.Eventually(t, 10*time.Second, "both turns ended", func() bool {
		g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		return err == nil && g.Status.State == a2a.TaskStateCompleted && len(g.Artifacts) == 1 &&
			v1Text(g.Artifacts[0].Parts) == "reply two"
	})
	again := testkit.Open(t, "POST", p.url+"/a2a", body, "Accept", "text/event-stream", "Last-Event-ID", lastID,
		"Content-Type", "application/json")
	t.Cleanup(func() { again.Body.Close() })
	var lines []string
	for _, e := range readSSE(t, again.Body) {
		lines = append(lines, string(e.data))
	}
	got := strings.Join(lines, "\n")
	one, two := strings.Index(got, `"reply one"`), strings.Index(got, `"reply two"`)
	if one < 0 || two < one || strings.Contains(got, "reply one begins") {
		t.Fatalf("reconnected with Last-Event-ID %s (turn one's first event): want turn one's tail, then turn two's reply:\n%s", lastID, got)
	}
	if n := strings.Count(got, `"final":true`); n != 1 || !strings.Contains(lines[len(lines)-1], `"final":true`) {
		t.Fatalf("reconnected: %d final events, want one, the last:\n%s", n, got)
	}
}

// TestResubscribeV03ReconnectAfterTurnEnd: a client that saw turn one's
// last event (its end, final:false and submitted, the task going on with
// turn two, in a stream of two turns) and reconnects with its id after both turns ended gets turn two
// alone: a working status, "reply two", its completed status final:true
// (serveTurns goes on with the next turn when the named one's final
// frame is before the resume point). An id naming no turn of the task is
// not an error: the task is followed as without a resume point.
func TestResubscribeV03ReconnectAfterTurnEnd(t *testing.T) {
	_, p, _, task, release := queuedTurn(t, "")
	body := `{"jsonrpc":"2.0","id":7,"method":"tasks/resubscribe","params":{"id":"` + string(task.ID) + `"}}`
	resp := p.post(t, "/a2a", "text/event-stream", body)
	release()
	endOne := ""
	for _, e := range readSSE(t, resp.Body) {
		if endOne == "" && strings.Contains(string(e.data), `"submitted"`) && strings.Contains(string(e.data), `"final":false`) {
			endOne = e.id
		}
	}
	if !strings.Contains(endOne, ":") {
		t.Fatalf("turn one's end (submitted, final:false) has the id %q, want one naming its turn", endOne)
	}
	for _, c := range []struct{ name, lastID, want string }{
		{"after turn one's end", endOne, `"reply two"`},
		{"a turn not the task's", "nope:3", `"reply two"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			again := testkit.Open(t, "POST", p.url+"/a2a", body, "Accept", "text/event-stream", "Last-Event-ID", c.lastID,
				"Content-Type", "application/json")
			t.Cleanup(func() { again.Body.Close() })
			if again.StatusCode != 200 {
				t.Fatalf("status %d, want 200", again.StatusCode)
			}
			var lines []string
			for _, e := range readSSE(t, again.Body) {
				lines = append(lines, string(e.data))
			}
			got := strings.Join(lines, "\n")
			if !strings.Contains(got, c.want) || strings.Contains(got, `"reply one"`) || strings.Contains(got, "error") ||
				strings.Count(got, `"final":true`) != 1 || !strings.Contains(lines[len(lines)-1], `"final":true`) {
				t.Fatalf("reconnected with Last-Event-ID %s: want turn two alone, final:true once, last:\n%s", c.lastID, got)
			}
		})
	}
}

// TestResubscribeV03SingleTurnIDAfterNextTurn: every tasks/resubscribe
// stream's event ids name their turn, one turn's too (found by review of
// 48415de, where a single-turn stream kept plain sequences). The client's
// connection drops after turn one's first chunk. Meanwhile turn one ends
// and the client's second message runs and ends. The client reconnects
// with that event's id as Last-Event-ID, as SSE clients do: it gets turn
// one's tail ("reply one") and then turn two's reply ("reply two"). A
// plain id named no turn and was applied to the turn followed now, turn
// two: both were lost.
func TestResubscribeV03SingleTurnIDAfterNextTurn(t *testing.T) {
	ctx, p, c, task, release := runningTurn(t, "reply one begins, ")

	// One turn: its stream's ids name it all the same.
	body, resp, lastID := resubscribeFirstEvent(t, p, task)
	resp.Body.Close() // the connection drops

	// Meanwhile: the second message, and both turns end.
	sendSecond(ctx, t, c, task)
	release()
	testkit.Eventually(t, 10*time.Second, "both turns ended", func() bool {
		g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		return err == nil && g.Status.State == a2a.TaskStateCompleted && len(g.Artifacts) > 0 &&
			strings.Contains(v1Text(g.Artifacts[len(g.Artifacts)-1].Parts), "reply two")
	})

	again := testkit.Open(t, "POST", p.url+"/a2a", body, "Accept", "text/event-stream", "Last-Event-ID", lastID,
		"Content-Type", "application/json")
	t.Cleanup(func() { again.Body.Close() })
	var lines []string
	for _, e := range readSSE(t, again.Body) {
		lines = append(lines, e.id+" "+string(e.data))
	}
	got := strings.Join(lines, "\n")
	if !strings.Contains(got, `"reply one"`) || !strings.Contains(got, `"reply two"`) {
		t.Fatalf("reconnected with Last-Event-ID %q (turn one's first event, a single-turn stream's id) after turn two ran: "+
			"want turn one's tail (\"reply one\") and then turn two's reply (\"reply two\"):\n%s", lastID, got)
	}
}

// resubscribeFirstEvent calls v0.3 tasks/resubscribe of task and reads
// its answer to the first event id: the call's body, the open answer
// (the caller closes it) and that id.
func resubscribeFirstEvent(t *testing.T, p *pipeline, task *a2a.Task) (body string, resp *http.Response, id string) {
	t.Helper()
	body = `{"jsonrpc":"2.0","id":7,"method":"tasks/resubscribe","params":{"id":"` + string(task.ID) + `"}}`
	resp = p.post(t, "/a2a", "text/event-stream", body)
	sc := bufio.NewScanner(resp.Body)
	for id == "" && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			id = v
		}
	}
	if id == "" {
		t.Fatalf("the first stream ended without an event id (%v)", sc.Err())
	}
	return body, resp, id
}

// v1EventLine is a line for an A2A v1.0 stream's event: its kind and
// state, or its text.
func v1EventLine(ev a2a.Event) string {
	switch e := ev.(type) {
	case *a2a.Task:
		return "task:" + string(e.Status.State)
	case *a2a.TaskStatusUpdateEvent:
		return "status:" + string(e.Status.State)
	case *a2a.TaskArtifactUpdateEvent:
		return "artifact:" + v1Text(e.Artifact.Parts)
	case *a2a.Message:
		return "message:" + v1Text(e.Parts)
	}
	return fmt.Sprintf("%T", ev)
}
