package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	a2av03 "github.com/a2aproject/a2a-go/a2a"
	a2aclientv03 "github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// queuedTask is a pipeline whose pool asks for input on "the weather" and
// holds every other turn until its text's gate is closed; started
// receives each held turn's text as it starts.
type queuedTask struct {
	*pipetest.Pipeline
	started chan string
	gates   map[string]chan struct{}
}

func startQueuedTask(t *testing.T, texts ...string) *queuedTask {
	t.Helper()
	return startQueuedTaskReplying(t, helloReply, texts...)
}

// helloReply is startQueuedTask's reply: "Hello, <text>".
func helloReply(w agent.Writer, text string) error { return w.Chunk(e2a.DeltaText, "Hello, "+text) }

// startQueuedTaskReplying is startQueuedTask whose held turns, once let
// go, answer with reply (then complete).
func startQueuedTaskReplying(t *testing.T, reply func(w agent.Writer, text string) error, texts ...string) *queuedTask {
	t.Helper()
	return startQueuedTaskOn(t, pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithDefaultPool("gated"))), reply, texts...)
}

// startQueuedTaskOn is startQueuedTaskReplying on the pipeline p (its
// default pool "gated").
func startQueuedTaskOn(t *testing.T, p *pipetest.Pipeline, reply func(w agent.Writer, text string) error, texts ...string) *queuedTask {
	t.Helper()
	g := &queuedTask{Pipeline: p, started: make(chan string, 8), gates: map[string]chan struct{}{}}
	for _, s := range texts {
		g.gates[s] = make(chan struct{})
	}
	g.Pool("gated", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		text, _ := env.Params["text"].(string)
		if text == "the weather" {
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		}
		g.started <- text
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-g.gates[text]:
		}
		if err := reply(w, text); err != nil {
			return err
		}
		return w.Complete(nil)
	}))
	return g
}

// answerSeen is what a client's answer to the task was answered: the
// task's state and history ("" when it says none).
type answerSeen struct {
	state   string
	history string
}

// answerSender sends text as an answer to task and returns its answer.
type answerSender func(ctx context.Context, task *a2a.Task, text string) (answerSeen, error)

// v1BlockingAnswer answers by A2A v1.0 SendMessage, blocking.
func v1BlockingAnswer(c *a2aclient.Client) answerSender {
	return func(ctx context.Context, task *a2a.Task, text string) (answerSeen, error) {
		res, err := c.SendMessage(ctx, up.Reply(task, text))
		if err != nil {
			return answerSeen{}, err
		}
		rt, ok := res.(*a2a.Task)
		if !ok {
			return answerSeen{state: fmt.Sprintf("%T", res)}, nil
		}
		return answerSeen{state: string(rt.Status.State), history: v1HistoryText(rt)}, nil
	}
}

// v03BlockingAnswer answers by A2A v0.3 message/send, blocking.
func v03BlockingAnswer(c *a2aclientv03.Client) answerSender {
	return func(ctx context.Context, task *a2a.Task, text string) (answerSeen, error) {
		res, err := c.SendMessage(ctx, answerFor(a2av03.TaskID(task.ID), task.ContextID, text))
		if err != nil {
			return answerSeen{}, err
		}
		rt, ok := res.(*a2av03.Task)
		if !ok {
			return answerSeen{state: fmt.Sprintf("%T", res)}, nil
		}
		return answerSeen{state: string(rt.Status.State), history: v03History(rt.History)}, nil
	}
}

// twoQueuedAnswers asks (A2A v1.0), then answers "Paris" with send in the
// background; once Paris's turn runs, answers "Rome" with send in the
// background, waits for Rome's turn to be in the task's record behind
// Paris's, and lets Paris's turn end. It returns Paris's answer (Rome's
// turn held), and a function that lets Rome's turn end and returns
// Rome's answer.
func twoQueuedAnswers(t *testing.T, ctx context.Context, g *queuedTask, send answerSender) (task *a2a.Task, paris answerSeen, rome func() answerSeen) {
	t.Helper()
	c := up.Client(t, g.URL)
	task = up.Asked(t, ctx, c, up.Msg("the weather"))
	type result struct {
		res answerSeen
		err error
	}
	parisDone, romeDone := make(chan result, 1), make(chan result, 1)
	go func() {
		r, err := send(ctx, task, "Paris")
		parisDone <- result{r, err}
	}()
	if s := <-g.started; s != "Paris" {
		t.Fatalf("started %q", s)
	}
	go func() {
		r, err := send(ctx, task, "Rome")
		romeDone <- result{r, err}
	}()
	testkit.Eventually(t, 10*time.Second, "Rome's turn recorded behind Paris's", func() bool {
		return len(record(t, g.JS, ingress.KindTask, string(task.ID)).RequestIDs) == 3
	})
	close(g.gates["Paris"])
	pr := <-parisDone
	if pr.err != nil {
		t.Fatalf("Paris: %v", pr.err)
	}
	return task, pr.res, func() answerSeen {
		if s := <-g.started; s != "Rome" {
			t.Fatalf("started %q", s)
		}
		close(g.gates["Rome"])
		rr := <-romeDone
		if rr.err != nil {
			t.Fatalf("Rome: %v", rr.err)
		}
		return rr.res
	}
}

// TestFirstOfTwoAnswersNotTerminalWhileSecondQueued: two answers to
// an input-required task, the second accepted (queued in the task's
// record) while the first runs. The first's answer (v1.0 SendMessage
// blocking or streamed, v0.3 message/send) must not say the task
// completed while the second turn has not ended: GetTask says it is not
// terminal then, and the client would see the task go completed ->
// working -> completed (A2A: a terminal state is final; design.md "turns
// never overlap": tasks/get shows the task working until its last turn
// ends).
func TestFirstOfTwoAnswersNotTerminalWhileSecondQueued(t *testing.T) {
	for name, sender := range map[string]func(url string) answerSender{
		"v1-blocking":  func(url string) answerSender { return v1BlockingAnswer(up.Client(t, url)) },
		"v03-blocking": func(url string) answerSender { return v03BlockingAnswer(v03ClientAt(t, url)) },
	} {
		t.Run(name, func(t *testing.T) {
			g := startQueuedTask(t, "Paris", "Rome")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			task, paris, rome := twoQueuedAnswers(t, ctx, g, sender(g.URL))
			defer rome()
			now, err := up.Client(t, g.URL).GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			switch paris.state {
			case string(a2a.TaskStateCompleted), string(a2av03.TaskStateCompleted):
				t.Fatalf("Paris's answer says the task %s while Rome's turn (accepted, queued behind it) has not run; GetTask says %s", paris.state, now.Status.State)
			}
			if !strings.Contains(paris.history, "Hello, Paris") || !strings.Contains(paris.history, "Rome") {
				t.Errorf("Paris's answer: history %q, want the task as GetTask shows it (Paris's reply, Rome's message)", paris.history)
			}
		})
	}
}

// TestSecondAnswerResultHoldsFirstReply: the second of two answers,
// queued behind the first, answers (v1.0 SendMessage, v0.3 message/send,
// blocking) the task completed: its history must hold the first answer's
// reply, as GetTask's does then. Today it holds the task's earlier turns
// as they stood when the answer was accepted, Paris's reply not yet
// written (a2av1 handler.submit's A2ATurnTask, the Aggregator's prior).
func TestSecondAnswerResultHoldsFirstReply(t *testing.T) {
	for name, sender := range map[string]func(url string) answerSender{
		"v1":  func(url string) answerSender { return v1BlockingAnswer(up.Client(t, url)) },
		"v03": func(url string) answerSender { return v03BlockingAnswer(v03ClientAt(t, url)) },
	} {
		t.Run(name, func(t *testing.T) {
			// The stale history shows when Rome's answer reads the task
			// (after its turn is recorded, which is all the test can see)
			// before Paris's reply is stored: most runs, not every one.
			// Three runs; any one stale fails.
			for run := range 3 {
				g := startQueuedTask(t, "Paris", "Rome")
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, _, rome := twoQueuedAnswers(t, ctx, g, sender(g.URL))
				r := rome()
				cancel()
				if !strings.Contains(r.history, "Hello, Paris") {
					t.Fatalf("run %d: Rome's answer: the task %s with history %q, without Paris's reply (\"Hello, Paris\")", run+1, r.state, r.history)
				}
			}
		})
	}
}

// TestAnswerWaitsForQueuedTurnsPublish: ingress records a turn in its
// task's record before it publishes it. Paris's blocking answer is read
// when its turn ends; Rome's turn, recorded by then, is stored only once
// that read has looked for it twice (its publish under way, held here by
// the test, which does what publishTurn does, one step at a time). The
// answer must wait for it: it says the task as GetTask shows it once Rome
// is stored (not completed, Rome's message last); it said completed,
// without Rome (the turn skipped as not stored), which failed
// TestFirstOfTwoAnswersNotTerminalWhileSecondQueued now and then in CI.
func TestAnswerWaitsForQueuedTurnsPublish(t *testing.T) {
	g := startQueuedTask(t, "Paris", "Rome")
	defer close(g.gates["Rome"])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := up.Client(t, g.URL)
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	type result struct {
		res answerSeen
		err error
	}
	parisDone := make(chan result, 1)
	go func() {
		r, err := v1BlockingAnswer(c)(ctx, task, "Paris")
		parisDone <- result{r, err}
	}()
	if s := <-g.started; s != "Paris" {
		t.Fatalf("started %q", s)
	}

	rome := uuid.Must(uuid.NewV7()).String()
	lookup, _ := subjects.RequestAnyPool(rome)
	lookups := lookupsOf(t, g.NC, "$JS.API.DIRECT.GET."+streams.RequestsStream, lookup)
	recordTurn(t, ctx, g, task, rome)
	close(g.gates["Paris"])
	for seen := 0; ; {
		select {
		case <-lookups:
			if seen++; seen == 2 {
				subj, _ := subjects.Request("gated", rome)
				env := fmt.Sprintf(`{"request_id":%q,"task_id":%q,"context_id":%q,"method":"message/send","params":{"text":"Rome"},`+
					`"provenance":{"source_protocol":"a2a"}}`, rome, task.ID, task.ContextID)
				if _, err := g.JS.Publish(ctx, subj, []byte(env)); err != nil {
					t.Fatal(err)
				}
			}
		case pr := <-parisDone:
			if pr.err != nil {
				t.Fatalf("Paris: %v", pr.err)
			}
			if pr.res.state == string(a2a.TaskStateCompleted) || !strings.HasSuffix(pr.res.history, "Rome") {
				t.Fatalf("Paris's answer (Rome's turn recorded, stored after %d lookups of it were seen): the task %s, history %q; want it not completed, Rome's message last",
					seen, pr.res.state, pr.res.history)
			}
			return
		}
	}
}

// TestTurnStreamFollowsQueuedTurn: Paris's answer to an input-required
// task is streamed (A2A v1.0 SendStreamingMessage over JSON-RPC, REST and
// gRPC, v0.3 message/stream, AgentVault tasks/sendSubscribe); Rome's is
// accepted while Paris's turn runs.
// Paris's stream is the task's: it must never say the task completed while
// Rome's turn waits (A2A: a terminal state is final; GetTask shows the
// task not terminal then), and it goes on with Rome's turn to the task's
// end, the only final event. It ended with Paris's turn, completed (v0.3:
// final), the task then submitted and working again.
func TestTurnStreamFollowsQueuedTurn(t *testing.T) {
	v1 := func(tr a2a.TransportProtocol) func(ctx context.Context, url string, task *a2a.Task) iter.Seq[string] {
		return func(ctx context.Context, url string, task *a2a.Task) iter.Seq[string] {
			_, sc := v1Client(t, &pipeline{url: url}, tr)
			return func(yield func(string) bool) {
				for ev, err := range sc.SendStreamingMessage(ctx, up.Reply(task, "Paris")) {
					if err != nil {
						yield("error:" + err.Error())
						return
					}
					if !yield(v1EventLine(ev)) {
						return
					}
				}
			}
		}
	}
	v03 := func(ctx context.Context, url string, task *a2a.Task) iter.Seq[string] {
		c := v03ClientAt(t, url)
		return func(yield func(string) bool) {
			for ev, err := range c.SendStreamingMessage(ctx, answerFor(a2av03.TaskID(task.ID), task.ContextID, "Paris")) {
				if !yield(v03EventLine(ev, err)) || err != nil {
					return
				}
			}
		}
	}
	av := func(ctx context.Context, url string, task *a2a.Task) iter.Seq[string] {
		return func(yield func(string) bool) {
			resp := (&pipeline{url: url}).post(t, "/a2a", "text/event-stream", `{"jsonrpc":"2.0","id":"av","method":"tasks/sendSubscribe","params":{"id":"`+
				string(task.ID)+`","message":{"role":"user","parts":[{"type":"text","content":"Paris"}]}}}`)
			defer resp.Body.Close()
			for _, e := range readSSE(t, resp.Body) {
				var ev struct {
					State   string
					Message struct{ Parts []struct{ Content string } }
				}
				_ = json.Unmarshal(e.data, &ev)
				line := e.event + ":" + string(e.data)
				switch e.event {
				case "task_status":
					line = "status:TASK_STATE_" + ev.State
				case "task_message":
					line = "artifact:" // the profile's text: messages
					for _, p := range ev.Message.Parts {
						line += p.Content
					}
				}
				if !yield(line) {
					return
				}
			}
		}
	}
	for name, stream := range map[string]func(ctx context.Context, url string, task *a2a.Task) iter.Seq[string]{
		"agentvault": av,
		"v1-" + string(a2a.TransportProtocolJSONRPC):  v1(a2a.TransportProtocolJSONRPC),
		"v1-" + string(a2a.TransportProtocolHTTPJSON): v1(a2a.TransportProtocolHTTPJSON),
		"v1-" + string(a2a.TransportProtocolGRPC):     v1(a2a.TransportProtocolGRPC),
		"v03": v03,
	} {
		t.Run(name, func(t *testing.T) {
			g, ctx, c, task := askedParisRome(t)
			lines := make(chan []string, 1)
			go func() {
				lines <- slices.Collect(stream(ctx, g.URL, task))
			}()
			if s := <-g.started; s != "Paris" {
				t.Fatalf("started %q", s)
			}
			queueRome(t, ctx, g, c, task)
			followedRome(t, "Paris's stream", <-lines)
		})
	}
}

// v03EventLine is v1EventLine for an A2A v0.3 stream's event (err: the
// stream's error): the states named as v1.0 names them, a final status
// marked " final".
func v03EventLine(ev a2av03.Event, err error) string {
	if err != nil {
		return "error:" + err.Error()
	}
	switch e := ev.(type) {
	case *a2av03.TaskStatusUpdateEvent:
		line := "status:TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(string(e.Status.State), "-", "_"))
		if e.Final {
			line += " final"
		}
		return line
	case *a2av03.TaskArtifactUpdateEvent:
		return "artifact:" + textOf(e.Artifact.Parts)
	}
	return fmt.Sprintf("%T", ev)
}

// TestResubscribeFollowsTurnQueuedSince: a subscription to a task whose
// turn runs (A2A v0.3 tasks/resubscribe, v1.0 SubscribeToTask), opened
// before the client's next message is accepted: once that turn ends, the
// subscription goes on with the turn queued since (read from the task's
// record at the running turn's end), never saying the task completed
// before it. v0.3's followed only the turns recorded when it opened: it
// ended final with the first turn's completed status.
func TestResubscribeFollowsTurnQueuedSince(t *testing.T) {
	for name, subscribe := range taskSubscribers(t) {
		t.Run(name, func(t *testing.T) {
			g, ctx, c, task := askedParisRome(t)
			parisDone := make(chan error, 1)
			go func() {
				_, err := v1BlockingAnswer(c)(ctx, task, "Paris")
				parisDone <- err
			}()
			if s := <-g.started; s != "Paris" {
				t.Fatalf("started %q", s)
			}
			lines := subscribed(ctx, subscribe(ctx, g.URL, task))
			queueRome(t, ctx, g, c, task)
			if err := <-parisDone; err != nil {
				t.Fatal(err)
			}
			followedRome(t, "the subscription", <-lines)
		})
	}
}

// subscribed reads the subscription events in a goroutine, returning
// once the first has come (the turns it follows are read then); the
// channel gets every line once it ends.
func subscribed(ctx context.Context, events iter.Seq[string]) <-chan []string {
	lines, opened := make(chan []string, 1), make(chan struct{})
	go func() {
		var seen []string
		for l := range events {
			if seen = append(seen, l); len(seen) == 1 {
				close(opened)
			}
		}
		if len(seen) == 0 {
			close(opened)
		}
		lines <- seen
	}()
	select {
	case <-opened:
	case <-ctx.Done():
	}
	return lines
}

// taskSubscribers are the subscriptions to a task, by name: A2A v0.3
// tasks/resubscribe (a2a-go v0.3's client) and v1.0 SubscribeToTask
// (a2a-go/v2's), each event a line (v03EventLine, v1EventLine).
func taskSubscribers(t *testing.T) map[string]func(ctx context.Context, url string, task *a2a.Task) iter.Seq[string] {
	return map[string]func(ctx context.Context, url string, task *a2a.Task) iter.Seq[string]{
		"v03": func(ctx context.Context, url string, task *a2a.Task) iter.Seq[string] {
			c := v03ClientAt(t, url)
			return func(yield func(string) bool) {
				for ev, err := range c.ResubscribeToTask(ctx, &a2av03.TaskIDParams{ID: a2av03.TaskID(task.ID)}) {
					if !yield(v03EventLine(ev, err)) || err != nil {
						return
					}
				}
			}
		},
		"v1": func(ctx context.Context, url string, task *a2a.Task) iter.Seq[string] {
			c := up.Client(t, url)
			return func(yield func(string) bool) {
				for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
					line := v1EventLine(ev)
					if err != nil {
						line = "error:" + err.Error()
					}
					if !yield(line) || err != nil {
						return
					}
				}
			}
		},
	}
}

// queueRome answers task "Rome" (A2A v1.0, blocking) while Paris's turn
// runs, waits for Rome's turn to be recorded behind it, then lets both
// turns end, and returns once Rome's answer is in.
func queueRome(t *testing.T, ctx context.Context, g *queuedTask, c *a2aclient.Client, task *a2a.Task) {
	t.Helper()
	romeDone := make(chan error, 1)
	go func() {
		_, err := v1BlockingAnswer(c)(ctx, task, "Rome")
		romeDone <- err
	}()
	testkit.Eventually(t, 10*time.Second, "Rome's turn recorded behind Paris's", func() bool {
		return len(record(t, g.JS, ingress.KindTask, string(task.ID)).RequestIDs) == 3
	})
	close(g.gates["Paris"])
	if s := <-g.started; s != "Rome" {
		t.Fatalf("started %q", s)
	}
	close(g.gates["Rome"])
	if err := <-romeDone; err != nil {
		t.Fatalf("Rome: %v", err)
	}
}

// followedRome checks the lines (v1EventLine, v03EventLine) of what (a
// stream or subscription of Paris's turn, Rome's queued behind it): no
// terminal state before the last, which is the task completed, and both
// replies.
func followedRome(t *testing.T, what string, seen []string) {
	t.Helper()
	got := strings.Join(seen, " | ")
	completed := "status:" + string(a2a.TaskStateCompleted)
	for i, l := range seen[:max(len(seen)-1, 0)] {
		if strings.HasPrefix(l, completed) || strings.HasSuffix(l, " final") {
			t.Fatalf("%s says the task ended at event %d, before Rome's turn ran:\n%s", what, i+1, got)
		}
	}
	if !strings.Contains(got, "artifact:Hello, Paris") || !strings.Contains(got, "artifact:Hello, Rome") ||
		len(seen) == 0 || !strings.HasPrefix(seen[len(seen)-1], completed) {
		t.Fatalf("%s:\n%s\nwant Paris's reply, then Rome's, then the task completed", what, got)
	}
}

// askedParisRome is a queuedTask holding "Paris" and "Rome", its task
// asked (input-required), an A2A v1.0 client and the call's context
// (ended at the test's end).
func askedParisRome(t *testing.T) (*queuedTask, context.Context, *a2aclient.Client, *a2a.Task) {
	t.Helper()
	g := startQueuedTask(t, "Paris", "Rome")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c := up.Client(t, g.URL)
	return g, ctx, c, up.Asked(t, ctx, c, up.Msg("the weather"))
}

// lookupsOf notes in the channel it returns (up to 64 pending) each
// JetStream API request on apiSubj (a wildcard allowed) whose subject or
// body holds match, until the test ends.
func lookupsOf(t *testing.T, nc *nats.Conn, apiSubj, match string) <-chan struct{} {
	t.Helper()
	lookups := make(chan struct{}, 64)
	sub, err := nc.Subscribe(apiSubj, func(m *nats.Msg) {
		if strings.Contains(m.Subject, match) || bytes.Contains(m.Data, []byte(match)) {
			select {
			case lookups <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return lookups
}

// recordTurn appends the turn id to task's record, as ingress records a
// turn before it publishes it, and does not publish it; it returns the
// task's newest request before it.
func recordTurn(t *testing.T, ctx context.Context, g *queuedTask, task *a2a.Task, id string) string {
	t.Helper()
	ts, err := ingress.NewTaskStore(ctx, g.JS)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, g.JS, ingress.KindTask, string(task.ID))
	if _, err := ts.Append(ctx, ingress.KindTask, *rec, id, tenant.Principal{Open: true}); err != nil {
		t.Fatal(err)
	}
	return rec.RequestIDs[len(rec.RequestIDs)-1]
}
