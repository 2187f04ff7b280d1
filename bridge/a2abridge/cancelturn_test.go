package a2abridge_test

import (
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/jsupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestCancelInterrupted: CancelTask on a pipeline task whose turn ended
// input-required or auth-required reaches the upstream agent (a2a-go/v2 over JSON-RPC and
// gRPC, @a2a-js/sdk 1.3 in Node over its three bindings): the agent receives CancelTask for its
// own task, and the pipeline's task ends canceled. An agent that refuses
// (its task was cancelled directly, so it is terminal) still leaves ours
// canceled, and the cancel turn's final frame records the refusal. Each
// request writes its conversation record once (the bucket's stream
// grows by one message per request: the stream, the question, the
// answer, each cancel turn).
func TestCancelInterrupted(t *testing.T) {
	t.Parallel()
	for _, u := range []upstreamKind{
		{"go-jsonrpc", goAgent(up.Options{Binding: up.JSONRPC})},
		{"go-grpc", goAgent(up.Options{Binding: up.GRPC})},
		{"js", jsAgent(jsupstream.Options{})},
		{"js-rest", jsAgent(jsupstream.Options{Binding: up.HTTPJSON})},
		{"js-grpc", jsAgent(jsupstream.Options{Binding: up.GRPC})},
	} {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			a, p := u.bridged(t)
			c := v1Door(a2a.TransportProtocolJSONRPC, true)(t, p, "agent").(*v1Conv)
			writes := recordWrites(t, p)

			if s := c.send(t, "stream: "+u.name); s.state != "completed" {
				t.Fatalf("stream: %s", s.state)
			}
			writes.check(t, "a streamed request", 1)
			ask := "ask: " + u.name
			s := c.send(t, ask)
			if s.state != "input-required" {
				t.Fatalf("ask: %s", s.state)
			}
			writes.check(t, "a request that asks", 1)
			if s = c.send(t, "Ada"); s.state != "completed" {
				t.Fatalf("answer: %s", s.state)
			}
			writes.check(t, "the answer", 1)

			// Cancelled while it asks (for input, for credentials): the
			// agent's task is cancelled.
			for _, ask := range []string{"ask: again, " + u.name, "auth: " + u.name} {
				upTask := askAndCancel(t, c, a, ask)
				if !slices.Contains(a.cancels(t), upTask) {
					t.Errorf("%s: the agent's cancels %v lack its task %s", ask, a.cancels(t), upTask)
				}
				writes.check(t, ask+": the question and the cancel turn", 2)
			}
			if f := cancelTurnFinal(t, p, "refused"); f != nil {
				t.Errorf("a cancel the agent took recorded as refused: %+v", f)
			}
			// Refused: the agent's task was answered straight at the
			// agent, so it is completed and not cancelable.
			ask = "ask: answered upstream, " + u.name
			c.taskID, c.contextID = "", ""
			s = c.send(t, ask)
			upTask, _ := a.task(t, ask)
			answer := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Bob"))
			answer.TaskID = a2a.TaskID(upTask)
			if _, err := upstreamClient(t, a.url).SendMessage(testCtx(t), &a2a.SendMessageRequest{Message: answer}); err != nil {
				t.Fatalf("the answer at the agent: %v", err)
			}
			task, err := c.c.CancelTask(testCtx(t), &a2a.CancelTaskRequest{ID: a2a.TaskID(s.taskID)})
			if err != nil || task.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("CancelTask after the agent's own cancel: %+v, %v", task, err)
			}
			f := cancelTurnFinal(t, p, "refused")
			if f == nil {
				t.Fatal("no cancel turn records the agent's refusal")
			}
			if e, _ := f.Error(); e.Code != e2a.ErrCodeCancelled || e.Details["handler_cancel_error"] == "" {
				t.Errorf("the refused cancel turn's final frame: %+v", e)
			}
		})
	}
}

// askAndCancel sends text (an ask: or auth: scenario) and cancels the
// pipeline's task once it asks; it returns the agent's task.
func askAndCancel(t *testing.T, c *v1Conv, a agentUnderTest, text string) string {
	t.Helper()
	c.taskID, c.contextID = "", ""
	s := c.send(t, text)
	if !e2a.InterruptState(s.state) {
		t.Fatalf("%s: %s", text, s.state)
	}
	task, err := c.c.CancelTask(testCtx(t), &a2a.CancelTaskRequest{ID: a2a.TaskID(s.taskID)})
	if err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask of the interrupted task: %+v, %v", task, err)
	}
	upTask, _ := a.task(t, text)
	if upTask == "" {
		t.Fatalf("the agent ran no turn for %q", text)
	}
	return upTask
}

// upstreamClient is an a2a-go/v2 client of the agent at url, straight.
func upstreamClient(t *testing.T, url string) *a2aclient.Client {
	t.Helper()
	return up.Client(t, url, a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
}

// writes counts the messages the E2A_BRIDGE bucket's stream stored: one
// per write of a conversation record.
type writes struct {
	s    jetstream.Stream
	last uint64
}

func recordWrites(t *testing.T, p *pipetest.Pipeline) *writes {
	t.Helper()
	s, err := p.JS.Stream(testCtx(t), "KV_"+streams.BridgeBucket)
	if err != nil {
		t.Fatal(err)
	}
	return &writes{s: s}
}

func (w *writes) check(t *testing.T, what string, want uint64) {
	t.Helper()
	info, err := w.s.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.LastSeq - w.last; got != want {
		t.Errorf("%s: %d conversation record writes, want %d", what, got, want)
	}
	w.last = info.State.LastSeq
}

// cancelTurnFinal is the final frame of a cancel turn whose handler_cancel
// detail is outcome, nil when there is none.
func cancelTurnFinal(t *testing.T, p *pipetest.Pipeline, outcome string) *e2a.Response {
	t.Helper()
	ctx := testCtx(t)
	cons, err := p.JS.OrderedConsumer(ctx, streams.ResponsesStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.AllResponses}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := int(info.NumPending)
	if n == 0 {
		return nil
	}
	batch, err := cons.FetchNoWait(n)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		frames, err := e2a.BurstResponses(m.Headers().Get(subjects.HeaderFrames), m.Data())
		if err != nil || len(frames) == 0 {
			continue
		}
		f := frames[len(frames)-1]
		if e, err := f.Error(); err == nil && f.IsFinal && e.Details["handler_cancel"] == outcome {
			return f
		}
	}
	return nil
}

// TestCancelInterruptedRacingItsExecution: a2a-go's server fails a
// CancelTask that races the end of the execution which turned the task
// input-required ("cancelation failed: queue is closed", an internal
// error: CI saw it); the task is still input-required, so the bridge sends
// the cancel again and the agent's task is cancelled, not recorded as a
// refusal (up.Server.RaceCancels holds the window open), on JSON-RPC and
// gRPC.
func TestCancelInterruptedRacingItsExecution(t *testing.T) {
	t.Parallel()
	for _, b := range []a2a.TransportProtocol{up.JSONRPC, up.GRPC} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			srv := up.Start(t, up.Options{Binding: b})
			p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("agent")))
			bridgePool(t, p, "agent", srv.BaseURL())
			c := v1Door(a2a.TransportProtocolJSONRPC, true)(t, p, "agent").(*v1Conv)
			ask := "ask: raced, " + string(b)
			if s := c.send(t, ask); s.state != "input-required" {
				t.Fatalf("ask: %s", s.state)
			}
			srv.RaceCancels(1)
			task, err := c.c.CancelTask(testCtx(t), &a2a.CancelTaskRequest{ID: c.taskID})
			if err != nil || task.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("CancelTask of the interrupted task: %+v, %v", task, err)
			}
			upTask, _ := executionOf(srv, ask)
			if !slices.Contains(srv.Cancels(), a2a.TaskID(upTask)) {
				t.Errorf("the agent's cancels %v lack its task %s (CancelTask calls: %d)", srv.Cancels(), upTask, len(srv.CallsOf("CancelTask")))
			}
			if f := cancelTurnFinal(t, p, "refused"); f != nil {
				t.Errorf("a raced cancel recorded as refused: %+v", f)
			}
		})
	}
}
