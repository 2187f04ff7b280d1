package a2abridge_test

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/jsupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

const slowChunks = 100

// takeover is a request served by worker A, whose connection is closed
// (as a killed process's is) once the client saw a few chunks; worker B
// then gets the request redelivered.
type takeover struct {
	p      *pipetest.Pipeline
	events chan a2a.Event
	errs   chan error
	stopA  func()
}

// startTakeover starts worker A on url and an A2A v1.0 stream of
// "slow: x" through the pool, and kills A after three artifact events.
func startTakeover(t *testing.T, url string) *takeover {
	t.Helper()
	p := pipetest.Start(t)
	tk := &takeover{p: p, events: make(chan a2a.Event, 1024), errs: make(chan error, 1)}
	tk.stopA = tk.worker(t, url)
	c := v1Client(t, p, "agent")
	go func() {
		defer close(tk.events)
		for ev, err := range c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: userMessage("slow: x")}) {
			if err != nil {
				tk.errs <- err
				return
			}
			tk.events <- ev
		}
	}()
	return tk
}

// worker runs a bridge worker on a connection of its own; the returned
// func closes the connection and waits for the worker to stop.
func (tk *takeover) worker(t *testing.T, url string) func() {
	t.Helper()
	return tk.serve(t, newHandler(t, tk.p, "agent", url))
}

// serve runs h as a bridge worker on a connection of its own; the
// returned func closes the connection and waits for the worker to stop.
func (tk *takeover) serve(t *testing.T, h agent.Handler) func() {
	t.Helper()
	nc, err := nats.Connect(tk.p.NC.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, nc, "agent", h, agent.WithAckWait(time.Second), agent.WithHeartbeat(200*time.Millisecond))
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			nc.Close()
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	name, _ := streams.AgentConsumerName("agent")
	testkit.Eventually(t, 30*time.Second, "the pool's consumer", func() bool {
		_, err := tk.p.JS.Consumer(testCtx(t), streams.RequestsStream, name)
		return err == nil
	})
	return stop
}

// killAfter folds the client's events until n artifact events came, then
// kills worker A.
func (tk *takeover) killAfter(t *testing.T, turn *up.Turn, n int) {
	t.Helper()
	for seen := 0; seen < n; {
		ev, ok := <-tk.events
		if !ok {
			t.Fatalf("the stream ended before the kill: %v", <-tk.errs)
		}
		turn.Add(ev)
		if _, art := ev.(*a2a.TaskArtifactUpdateEvent); art {
			seen++
		}
	}
	tk.stopA()
}

// finish folds the rest of the client's stream.
func (tk *takeover) finish(t *testing.T, turn *up.Turn) {
	t.Helper()
	for ev := range tk.events {
		turn.Add(ev)
	}
	select {
	case err := <-tk.errs:
		t.Fatalf("the client's stream: %v", err)
	default:
	}
}

func slowText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(up.SlowChunk(i))
	}
	return b.String()
}

// TestWorkerKilledMidStream: the worker streaming an agent's long task
// loses its connection mid-stream; the request is redelivered to another
// worker, which subscribes to the agent's task (or, without streaming,
// reads it with GetTask and polls) and writes only what the stored frames
// do not hold: the A2A client's stream, open throughout, completes with
// every chunk of the agent exactly once, in order, and the stored frames
// follow one another without gap.
func TestWorkerKilledMidStream(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name  string
		start func(*testing.T) (string, func(*testing.T) []string)
	}{
		{"go-jsonrpc", goSlow(up.Options{Binding: up.JSONRPC})},
		{"go-rest", goSlow(up.Options{Binding: up.HTTPJSON})},
		{"go-grpc", goSlow(up.Options{Binding: up.GRPC})},
		{"go-nostream", goSlow(up.Options{Binding: up.JSONRPC, NoStreaming: true})},
		{"go-v03-jsonrpc", goSlow(up.Options{Binding: up.JSONRPC, V03: true})},
		{"js", jsSlow(jsupstream.Options{})},
		{"js-v03", jsSlow(jsupstream.Options{V03: true})},
		{"js-rest", jsSlow(jsupstream.Options{Binding: up.HTTPJSON})},
		{"js-grpc", jsSlow(jsupstream.Options{Binding: up.GRPC})},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			url, methods := v.start(t)
			tk := startTakeover(t, url)
			turn := up.NewTurn()
			tk.killAfter(t, turn, 3)
			tk.worker(t, url)
			tk.finish(t, turn)
			if got := turn.Text(up.SlowArtifact); got != slowText(slowChunks) || turn.State() != a2a.TaskStateCompleted {
				t.Errorf("after the takeover: %s\n got %q\nwant %q", turn.State(), got, slowText(slowChunks))
			}
			// The takeover came while the task ran (it streams for 3 s, the
			// redelivery comes after 1 s): worker B subscribed to it, or,
			// without streaming, read it and polled.
			calls := methods(t)
			want := []string{"SubscribeToTask", "tasks/resubscribe"}
			if strings.Contains(v.name, "nostream") {
				want = []string{"GetTask"}
			}
			if !slices.ContainsFunc(calls, func(m string) bool { return slices.Contains(want, m) }) {
				t.Errorf("no %v call reached the agent: %v", want, calls)
			}
			a := stored(t, tk.p)
			if len(a.Frames) == 0 || a.Text(e2a.DeltaText) != slowText(slowChunks) {
				t.Errorf("stored text %q", a.Text(e2a.DeltaText))
			}
			for i, f := range a.Frames {
				if f.Sequence != int64(i) {
					t.Fatalf("stored frame %d has sequence %d", i, f.Sequence)
				}
			}
		})
	}
}

// goSlow and jsSlow start an agent whose "slow:" lasts 3 s, and return
// its URL and the methods it was called with.
func goSlow(o up.Options) func(*testing.T) (string, func(*testing.T) []string) {
	return func(t *testing.T) (string, func(*testing.T) []string) {
		o.SlowInterval, o.SlowChunks = 30*time.Millisecond, slowChunks
		srv := up.Start(t, o)
		return srv.BaseURL(), func(*testing.T) []string {
			var out []string
			for _, c := range srv.Calls() {
				out = append(out, c.Method)
			}
			return out
		}
	}
}

func jsSlow(o jsupstream.Options) func(*testing.T) (string, func(*testing.T) []string) {
	return func(t *testing.T) (string, func(*testing.T) []string) {
		o.SlowInterval, o.SlowChunks = 30*time.Millisecond, slowChunks
		srv := jsupstream.Start(t, o)
		return srv.BaseURL(), func(t *testing.T) []string {
			r, err := srv.Record(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, c := range r.Calls {
				out = append(out, c.Method)
			}
			return out
		}
	}
}

// TestTakeoverAfterTheTaskEnded: the agent's task completes while no
// worker holds the request; the worker taking it over finds it ended,
// reads it whole (GetTask) and writes only the chunks the stored frames
// lack, then completes. When the agent no longer knows the task (another
// agent answers at the URL), the request ends upstream_cannot_resume,
// not retryable. The same when the agent answers as the Python SDK does
// (up.WirePython: a subscription to an ended task answered with a plain
// JSON-RPC error, no event stream).
func TestTakeoverAfterTheTaskEnded(t *testing.T) {
	t.Parallel()
	for _, wire := range []up.Wire{up.WireGo, up.WirePython} {
		t.Run(cmp.Or(string(wire), "go"), func(t *testing.T) {
			t.Parallel()
			takeoverAfterTheTaskEnded(t, wire)
		})
	}
}

func takeoverAfterTheTaskEnded(t *testing.T, wire up.Wire) {
	const chunks = 8
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 30 * time.Millisecond, SlowChunks: chunks, Wire: wire})
	tk := startTakeover(t, srv.BaseURL())
	turn := up.NewTurn()
	tk.killAfter(t, turn, 3)
	waitUpstreamState(t, srv, a2a.TaskStateCompleted)
	tk.worker(t, srv.BaseURL())
	tk.finish(t, turn)
	if got := turn.Text(up.SlowArtifact); got != slowText(chunks) || turn.State() != a2a.TaskStateCompleted {
		t.Errorf("after the takeover: %s\n got %q\nwant %q", turn.State(), got, slowText(chunks))
	}

	other := up.Start(t, up.Options{Binding: up.JSONRPC, Wire: wire})
	tk = startTakeover(t, srv.BaseURL())
	turn = up.NewTurn()
	tk.killAfter(t, turn, 2)
	tk.worker(t, other.BaseURL())
	tk.finish(t, turn)
	if turn.State() != a2a.TaskStateFailed || !strings.Contains(turn.Status, "the agent's task is gone") {
		t.Errorf("a task the agent does not know: %s %q", turn.State(), turn.Status)
	}
	a := stored(t, tk.p)
	if code, retryable := a.ErrorCode(); code != bridge.CodeCannotResume || retryable {
		t.Errorf("final error %s (retryable %v), want %s, not retryable", code, retryable, bridge.CodeCannotResume)
	}
}

// waitUpstreamState waits until srv's last task is in state st, asked
// with a2a-go/v2's client (of srv's card as a2a-go writes it, whatever
// srv's Wire).
func waitUpstreamState(t *testing.T, srv *up.Server, st a2a.TaskState) {
	t.Helper()
	ctx := testCtx(t)
	c, err := a2aclient.NewFromCard(ctx, srv.Card())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()
	execs := srv.Executions()
	if len(execs) == 0 {
		t.Fatal("the agent ran nothing")
	}
	id := execs[len(execs)-1].TaskID
	testkit.Eventually(t, 20*time.Second, "the agent's task "+string(id)+" in "+string(st), func() bool {
		task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		return err == nil && task.Status.State == st
	})
}

// lastStoredID is the id of the last request stored for pool "agent".
func lastStoredID(t *testing.T, p *pipetest.Pipeline) string {
	t.Helper()
	s, err := p.JS.Stream(testCtx(t), streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(testCtx(t), "e2a.req.agent.>")
	if err != nil {
		t.Fatal(err)
	}
	env, err := e2a.FromJSON(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return env.RequestID
}

// stored is the E2A answer of the pipeline's last request to the pool.
func stored(t *testing.T, p *pipetest.Pipeline) pipetest.Answer {
	t.Helper()
	id := lastStoredID(t, p)
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, p.URL+"/v1/requests/"+id+"?wait=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a pipetest.Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/requests/%s: %d %v", id, resp.StatusCode, err)
	}
	return a
}

// TestRetryFollowsTheTask: the agent's stream is cut after its first
// event (the task, no frame written yet); the bridge's retry follows that
// task (SubscribeToTask) instead of sending the message again: the answer
// is whole, and the agent ran one turn.
func TestRetryFollowsTheTask(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, Fault: up.Fault{Kind: up.FaultCloseMidEvent, Times: 1}})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL())
	a := p.Ask(t, "agent", `{"params":{"text":"stream: once"}}`)
	if a.Text(e2a.DeltaText) != up.StreamText("once") || a.Final().ResponseKind != e2a.KindComplete {
		t.Errorf("answer %q, final %s", a.Text(e2a.DeltaText), a.Final().Body)
	}
	if n := len(srv.Executions()); n != 1 || len(srv.CallsOf("SubscribeToTask")) != 1 {
		t.Errorf("the agent ran %d turns, was subscribed to %d times; want 1 and 1", n, len(srv.CallsOf("SubscribeToTask")))
	}
}
