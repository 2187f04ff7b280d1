package a2a_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
)

// TestBatchSendCounted: a blocking A2A v0.3 message/send inside a
// JSON-RPC batch, answered as a value (no writer to render into), is one
// response of egress's metrics like the same call alone (operations.md:
// e2a_egress_streams_total, frames_written_total, format a2a_json): it
// was counted nowhere.
func TestBatchSendCounted(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("demo")))
	p.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "echo"); err != nil {
			return err
		}
		return w.Complete(map[string]any{"content": "echo"})
	}))
	value := func(name string, labels map[string]string) float64 {
		sum := 0.0
	next:
		for _, s := range testkit.Series(t, p.Registry, name) {
			for k, v := range labels {
				if s.Labels[k] != v {
					continue next
				}
			}
			sum += s.Value
		}
		return sum
	}
	final := func() float64 {
		return value("e2a_egress_streams_total", map[string]string{"format": a2aproto.SendFormat, "outcome": "final"})
	}
	frames := func() float64 {
		return value("e2a_egress_frames_written_total", map[string]string{"format": a2aproto.SendFormat})
	}
	send := `{"jsonrpc":"2.0","id":"s","method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"MID","parts":[{"kind":"text","text":"hi"}]}}}`
	post := func(body string) string {
		t.Helper()
		resp, err := http.Post(p.URL+"/a2a", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %v", body, resp.StatusCode, err)
		}
		if !strings.Contains(string(out), `"echo"`) {
			t.Fatalf("POST %s: %s, want the agent's answer", body, out)
		}
		return string(out)
	}
	for _, c := range []struct{ name, body string }{
		{"alone", strings.Replace(send, "MID", "m1", 1)},
		{"in a batch", "[" + strings.Replace(send, "MID", "m2", 1) + "]"},
	} {
		before, fbefore := final(), frames()
		post(c.body)
		// Alone, the answer is counted once written: after the client
		// has it.
		testkit.Eventually(t, 5*time.Second, "message/send "+c.name+" counted: streams_total{format=a2a_json,outcome=final} +1, "+
			"frames_written_total{format=a2a_json} +2, streams_open{format=a2a_json} 0", func() bool {
			return final()-before == 1 && frames()-fbefore == 2 &&
				value("e2a_egress_streams_open", map[string]string{"format": a2aproto.SendFormat}) == 0
		})
	}
}
