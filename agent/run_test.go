package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// A demo request gets frames 0..n in order with exactly one final frame;
// every frame echoes the request's ids, carries the pipeline's headers and
// provenance.
func TestDemoFramesOrderedWithHeaders(t *testing.T) {
	s := startServer(t)
	reg := prometheus.NewRegistry()
	startWorker(t, s.nc, "demo", demo.New(), agent.WithMetrics(reg))

	env := request("req-headers-1", map[string]any{"text": "hello world", "frames": 4})
	env.JSONRPCID = json.RawMessage(`42`)
	env.SessionID, env.TaskID, env.ContextID, env.MessageID = "s1", "t1", "c1", "m1"
	env.Channel, env.UserID, env.CorrelationID = "web", "u1", "corr1"
	env.Trace = &e2a.TraceContext{Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Tracestate: "k=v"}
	publish(t, s.js, "demo", env)

	fr := waitFinal(t, s.nc, env.RequestID, 10*time.Second)
	if len(fr) != 3+4+1 {
		t.Fatalf("got %d frames, want 8", len(fr))
	}
	_, raw := storedFrames(t, s.nc, env.RequestID)
	for i, f := range fr {
		if f.RequestID != env.RequestID || string(f.JSONRPCID) != "42" || f.SessionID != "s1" || f.TaskID != "t1" ||
			f.ContextID != "c1" || f.MessageID != "m1" || f.Channel != "web" || f.UserID != "u1" ||
			f.Method != "chat.send" || !f.IsStream || f.CorrelationID != "corr1" {
			t.Errorf("frame %d does not echo the request ids: %+v", i, f)
		}
		if f.Provenance.SourceProtocol != e2a.SourceE2A || f.Provenance.Details["pool"] != "demo" {
			t.Errorf("frame %d provenance %+v", i, f.Provenance)
		}
	}
	// Each stored message (one frame, or a burst) carries the headers, its
	// E2A-Sequence being its first frame's.
	next := 0
	for _, m := range raw {
		h := m.Header
		if got := h.Get(subjects.HeaderMsgID); got != "" {
			t.Errorf("frame %d carries Nats-Msg-Id %q: frames are fenced by the expected last subject sequence alone", next, got)
		}
		if h.Get(subjects.HeaderRequestID) != env.RequestID || h.Get(subjects.HeaderSequence) != itoa(next) {
			t.Errorf("frame %d headers %v", next, h)
		}
		if h.Get(subjects.HeaderTraceparent) != env.Trace.Traceparent || h.Get(subjects.HeaderTracestate) != "k=v" {
			t.Errorf("frame %d trace headers %v", next, h)
		}
		next += len(msgFrames(t, h, m.Data))
	}
	// reasoning, tool call, tool response, 4 text chunks, complete
	c0, _ := fr[0].Chunk()
	c1, _ := fr[1].Chunk()
	c2, _ := fr[2].Chunk()
	if c0.DeltaKind != e2a.DeltaReasoning || c1.DeltaKind != e2a.DeltaTool || c2.DeltaKind != e2a.DeltaTool {
		t.Errorf("kinds %s %s %s", c0.DeltaKind, c1.DeltaKind, c2.DeltaKind)
	}
	call := c1.Delta.(map[string]any)
	resp := c2.Delta.(map[string]any)
	if call["type"] != e2a.ToolFunctionCall || resp["type"] != e2a.ToolFunctionResponse || call["id"] != resp["id"] || call["name"] != demo.ToolName {
		t.Errorf("tool deltas %v %v", call, resp)
	}
	done, err := fr[7].Complete()
	if err != nil {
		t.Fatal(err)
	}
	content := done.Result.(map[string]any)["content"]
	if content != "You said: hello world" || text(t, fr) != content {
		t.Errorf("content %q, streamed %q", content, text(t, fr))
	}
	waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"pool": "demo", "outcome": agent.OutcomeSucceeded}, 1)
	if n := metricValue(t, reg, "e2a_agent_frames_published_total", map[string]string{"pool": "demo"}); n != 8 {
		t.Errorf("frames published metric %v, want 8", n)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func waitMetric(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string, want float64) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%s%v = %v", name, labels, want), func() bool {
		return metricValue(t, reg, name, labels) == want
	})
}

var _ = context.Background
