package a2abridge_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacysrv "github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// lateAgent is an agent that takes a while before its first event (a
// model loading, a queue), on a2a-go v0.3.15's server, whose executions
// go on once the client's stream is closed: its execution starts, waits
// for gate, then makes its task and streams chunks until canceled.
// Cancels are recorded.
type lateAgent struct {
	started chan struct{}
	gate    chan struct{}
	cancels chan legacy.TaskID
	emitted *atomic.Int64 // chunks the agent sent
}

func (e lateAgent) Execute(ctx context.Context, rc *legacysrv.RequestContext, q eventqueue.Queue) error {
	close(e.started)
	select {
	case <-e.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := q.Write(ctx, legacy.NewStatusUpdateEvent(rc, legacy.TaskStateSubmitted, nil)); err != nil {
		return err
	}
	if err := q.Write(ctx, legacy.NewStatusUpdateEvent(rc, legacy.TaskStateWorking, nil)); err != nil {
		return err
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 1; i <= 1000; i++ {
		ev := legacy.NewArtifactUpdateEvent(rc, legacy.ArtifactID(up.SlowArtifact), legacy.TextPart{Text: up.SlowChunk(i)})
		ev.Append = i > 1
		if err := q.Write(ctx, ev); err != nil {
			return err
		}
		e.emitted.Add(1)
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := legacy.NewStatusUpdateEvent(rc, legacy.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

func (e lateAgent) Cancel(ctx context.Context, rc *legacysrv.RequestContext, q eventqueue.Queue) error {
	e.cancels <- rc.TaskID
	ev := legacy.NewStatusUpdateEvent(rc, legacy.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// cancelOnceStarted sends text to pool agent of p (E2A, waiting for the
// answer, in a goroutine of its own) and cancels the request once the
// agent has it (started).
func cancelOnceStarted(t *testing.T, p *pipetest.Pipeline, started <-chan struct{}, text string) {
	t.Helper()
	go func() {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, p.URL+"/pools/agent/v1/requests?wait=true",
			strings.NewReader(`{"params":{"text":`+strconv.Quote(text)+`}}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	select {
	case <-started:
	case <-testCtx(t).Done():
		t.Fatal("the agent never got the message")
	}
	if _, err := agent.Cancel(testCtx(t), p.JS, lastStoredID(t, p)); err != nil {
		t.Fatal(err)
	}
}

// TestCancelBeforeTheTaskIsKnown: a request cancelled while the agent has
// its message but has not named its task yet (no event) still has the
// agent's task cancelled: the bridge reads the agent's stream on after
// the cancel (bounded) until the task is named, and cancels it, where it
// used to close the stream at once and leave the task, made a moment
// later, running for nobody.
func TestCancelBeforeTheTaskIsKnown(t *testing.T) {
	t.Parallel()
	exec := lateAgent{started: make(chan struct{}), gate: make(chan struct{}), cancels: make(chan legacy.TaskID, 4), emitted: new(atomic.Int64)}
	url := startV03(t, exec)
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	cancelOnceStarted(t, p, exec.started, "slow: late")
	cancelledBeforeTask(t, p, exec.gate, exec.cancels, exec.emitted)
}

// cancelledBeforeTask checks the end of a request cancelled before the
// agent named its task: the request ended cancelled; once the agent makes
// its task (gate closed), the bridge cancels it (a task id on cancels,
// within 10 s). emitted counts the chunks the agent sent meanwhile. T is
// the task id type of the agent's SDK (v0.3 or v1.0).
func cancelledBeforeTask[T any](t *testing.T, p *pipetest.Pipeline, gate chan struct{}, cancels <-chan T, emitted *atomic.Int64) {
	t.Helper()
	a := stored(t, p)
	if code, _ := a.ErrorCode(); code != e2a.ErrCodeCancelled {
		t.Fatalf("the request ended %s %s, want cancelled", a.Final().ResponseKind, a.Final().Body)
	}
	close(gate) // the agent makes its task now
	select {
	case id := <-cancels:
		t.Logf("the agent's task %v was cancelled", id)
	case <-time.After(10 * time.Second):
		t.Errorf("the request was cancelled, but the agent was never told (no CancelTask): its task runs on for nobody (%d chunks sent since)",
			emitted.Load())
	}
}

// TestDeadlineForwarded: a request past its deadline ends for good
// (deadline_exceeded, no worker takes it over), so the agent's long task
// is cancelled (CancelTask), as for a cancel, instead of streaming on for
// nobody.
func TestDeadlineForwarded(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 30 * time.Millisecond, SlowChunks: 1200})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL(), agent.WithDefaultDeadline(time.Second))
	a := p.Ask(t, "agent", `{"params":{"text":"slow: past its deadline"}}`)
	if code, _ := a.ErrorCode(); code != e2a.ErrCodeDeadlineExceeded {
		t.Fatalf("final %+v, want %s", a.Final(), e2a.ErrCodeDeadlineExceeded)
	}
	execs := srv.Executions()
	if len(execs) != 1 {
		t.Fatalf("the agent ran %d turns", len(execs))
	}
	testkit.Eventually(t, 5*time.Second, "CancelTask of the agent's task "+string(execs[0].TaskID)+" after the deadline", func() bool {
		return slices.Contains(srv.Cancels(), execs[0].TaskID)
	})
}

// TestDeadlineCountedAsCancelled: a request that ends at its own deadline
// is not the upstream's fault: the bridge's call is counted
// e2a_bridge_calls_total{outcome="cancelled"} (and not logged as the
// upstream's failure), not upstream_timeout, which would page an operator
// for an upstream that answered in time.
func TestDeadlineCountedAsCancelled(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 30 * time.Millisecond, SlowChunks: 1200})
	p := pipetest.Start(t)
	client, err := bridge.NewClient(srv.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	conv, err := bridge.OpenConversations(testCtx(t), p.JS, streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	u, err := a2abridge.New(testCtx(t), client, a2abridge.WithConversations("agent", conv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	reg := prometheus.NewRegistry()
	h, err := bridge.New("agent", u, bridge.WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	p.Pool("agent", h, agent.WithDefaultDeadline(time.Second))
	a := p.Ask(t, "agent", `{"params":{"text":"slow: past its deadline"}}`)
	if code, _ := a.ErrorCode(); code != e2a.ErrCodeDeadlineExceeded {
		t.Fatalf("final %+v", a.Final())
	}
	outcomes := map[string]float64{}
	testkit.Eventually(t, 5*time.Second, "the call counted", func() bool {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "e2a_bridge_calls_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" {
						outcomes[l.GetValue()] = m.GetCounter().GetValue()
					}
				}
			}
		}
		return len(outcomes) > 0
	})
	if outcomes["cancelled"] != 1 || len(outcomes) != 1 {
		t.Errorf("a request past its own deadline counted as %v, want cancelled 1", outcomes)
	}
}
