package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestAgentAckWaitAndWorkerID: `e2a agent --ack-wait` sets the pool's
// consumer's AckWait (and E2A_AGENT_ACK_WAIT when the flag is absent), and
// E2A_AGENT_WORKER_ID names the worker in its start line and in the
// provenance of the frames it writes.
func TestAgentAckWaitAndWorkerID(t *testing.T) {
	for _, c := range []struct {
		name, pool string
		env        []string
		args       []string
		ackWait    time.Duration
	}{
		{"flag", "demo", []string{"E2A_AGENT_WORKER_ID=pod-a", "E2A_AGENT_ACK_WAIT=9s"}, []string{"--ack-wait", "2s"}, 2 * time.Second},
		{"env", "tck", []string{"E2A_AGENT_WORKER_ID=pod-b", "E2A_AGENT_ACK_WAIT=7s"}, nil, 7 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			emb, nc := natstest.RunServer(t)
			p := pipetest.Start(t, pipetest.WithConn(nc))
			worker := c.env[0][len("E2A_AGENT_WORKER_ID="):]
			_, agentErr := startBin(t, append(joinEnv(emb.ClientURL()), c.env...),
				append([]string{"agent", "--pool", c.pool}, c.args...)...)
			waitLine(t, agentErr, regexp.MustCompile(`"msg":"agent pool running".*"worker":"`+worker+`"`))

			// The start line comes before the worker has provisioned the
			// pool's consumer.
			var cons jetstream.Consumer
			testkit.Eventually(t, 10*time.Second, "the pool's consumer", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				var err error
				cons, err = p.JS.Consumer(ctx, streams.RequestsStream, "agent-"+c.pool)
				return err == nil
			})
			if got := cons.CachedInfo().Config.AckWait; got != c.ackWait {
				t.Errorf("consumer AckWait %v, want %v", got, c.ackWait)
			}
			a := p.Ask(t, c.pool, `{"params":{"text":"hello"}}`)
			if len(a.Frames) == 0 {
				t.Fatalf("no frames: %+v", a)
			}
			for _, f := range a.Frames {
				if got := f.Provenance.Details["worker"]; got != worker {
					t.Errorf("frame %d written by worker %v, want %s", f.Sequence, got, worker)
				}
			}
		})
	}
}

// TestDevAgentAckWait: `e2a dev` runs its pools with E2A_AGENT_ACK_WAIT,
// so that an `e2a agent` of the same pool beside it can use the same.
func TestDevAgentAckWait(t *testing.T) {
	dev := startDev(t, []string{"E2A_AGENT_ACK_WAIT=3s"})
	nc, err := nats.Connect(dev.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js := natstest.JetStream(t, nc)
	for _, pool := range []string{"demo", "workflow"} {
		var cons jetstream.Consumer
		testkit.Eventually(t, 20*time.Second, "the "+pool+" pool's consumer", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			var err error
			cons, err = js.Consumer(ctx, streams.RequestsStream, "agent-"+pool)
			return err == nil
		})
		if got := cons.CachedInfo().Config.AckWait; got != 3*time.Second {
			t.Errorf("pool %s: consumer AckWait %v, want 3s", pool, got)
		}
	}
}

// TestAgentDeadline: E2A_AGENT_DEADLINE bounds every request of the pools
// `e2a dev` runs: a demo answer slower than it ends deadline_exceeded (an
// upstream that hangs mid-stream would otherwise hold its slot until the
// client cancels), a quick one completes.
func TestAgentDeadline(t *testing.T) {
	dev := startDev(t, []string{"E2A_AGENT_DEADLINE=2s"})
	ask := func(params string) string {
		_, b := testkit.Do(t, "POST", dev.base+"/v1/requests?wait=true", `{"params":`+params+`}`)
		return string(b)
	}
	if b := ask(`{"text":"slow","frames":20,"delay_ms":500}`); !strings.Contains(b, e2a.ErrCodeDeadlineExceeded) {
		t.Errorf("a 10 s answer under a 2 s deadline: %s; want %s", b, e2a.ErrCodeDeadlineExceeded)
	}
	if b := ask(`{"text":"quick","frames":1}`); strings.Contains(b, e2a.ErrCodeDeadlineExceeded) || !strings.Contains(b, "succeeded") {
		t.Errorf("a quick answer under a 2 s deadline: %s; want it succeeded", b)
	}
}

// TestAgentDrainTimeout: E2A_AGENT_DRAIN_TIMEOUT bounds how long a stopping
// `e2a agent` (SIGTERM: its context ends) lets its in-flight requests run
// before it hands them back to the pool. It was the runtime's 25 s, which
// no setting changed: a rolling update cut longer answers whatever the
// pods' grace period. A demo answer of 20 s is in flight when the worker
// is stopped under a 300 ms drain: the worker ends within seconds, and the
// request, handed back, is finished by the next worker of the pool.
func TestAgentDrainTimeout(t *testing.T) {
	emb, nc := natstest.RunServer(t)
	p := pipetest.Start(t, pipetest.WithConn(nc))
	cfg := configWith(t, "E2A_NATS_URL="+emb.ClientURL(), "E2A_HTTP_ADDR=127.0.0.1:0", "E2A_LOG_LEVEL=error",
		"E2A_AGENT_DRAIN_TIMEOUT=300ms", "E2A_AGENT_ACK_WAIT=1s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runAgent(ctx, cfg, []string{"--pool", "demo"}) }()

	resp, body := testkit.Do(t, "POST", p.URL+"/pools/demo/v1/requests",
		`{"request_id":"drain-1","params":{"text":"slow","frames":20,"delay_ms":400}}`)
	if resp.StatusCode != 202 {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	testkit.Eventually(t, 20*time.Second, "the answer's first frame stored", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := p.JS.Stream(ctx, streams.ResponsesStream)
		return err == nil && st.CachedInfo().State.Msgs > 0
	})
	stopped := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("e2a agent stopped with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("e2a agent still running 10 s after its stop under E2A_AGENT_DRAIN_TIMEOUT=300ms")
	}
	t.Logf("stopped %v after the stop began", time.Since(stopped).Round(time.Millisecond))

	// Handed back, not lost: another worker of the pool finishes it.
	defer p.Pool("demo", demo.New(), agent.WithAckWait(time.Second))()
	resp, body = testkit.Do(t, "GET", p.URL+"/v1/requests/drain-1?wait=true", "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), "succeeded") {
		t.Fatalf("the handed-back request: %d %s; want it finished by the next worker", resp.StatusCode, body)
	}
}

// TestStreamWaitLimits: E2A_STREAM_IDLE_TIMEOUT bounds an answer's wait
// for a request's next frame. Egress's 10 minutes were fixed: an agent
// silent longer (a long model call, a human's approval) had every answer
// following it (a stream, ?wait=true, an ACP prompt) end with a timeout
// while it ran on, and no setting changed that. A demo answer with 2.5 s
// between frames under a 1 s idle limit ends 504 timeout; the same answer
// under 0 (no limit) is waited for to its end.
func TestStreamWaitLimits(t *testing.T) {
	for _, c := range []struct {
		idle string
		want int
	}{{"1s", http.StatusGatewayTimeout}, {"0", http.StatusOK}} {
		t.Run("E2A_STREAM_IDLE_TIMEOUT="+c.idle, func(t *testing.T) {
			dev := startDev(t, []string{"E2A_STREAM_IDLE_TIMEOUT=" + c.idle})
			resp, b := testkit.Do(t, "POST", dev.base+"/v1/requests?wait=true", `{"params":{"text":"slow","delay_ms":2000}}`)
			if resp.StatusCode != c.want {
				t.Errorf("an answer with 2 s between frames: %d %s; want %d", resp.StatusCode, b, c.want)
			}
		})
	}
}
