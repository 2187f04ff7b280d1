package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestFailedFinalCountsAsFailure: a request the agent answers with a final
// e2a.error frame (status failed) is a failed request on every protocol
// that renders the failure as a terminal event: E2A's final e2a.error frame
// (here with the expected frame count: the agent's last step fails), A2A
// v0.3's status-update (state failed, final: true) and A2A v1.0's
// TASK_STATE_FAILED. Counted as successes, they would put failed requests'
// latencies in the percentiles and their rate in requests/s.
func TestFailedFinalCountsAsFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a pipeline")
	}
	p := pipetest.Start(t)
	const pool = "failing"
	const frames = 3
	p.Pool(pool, agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for range frames - 1 {
			if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "partial"}, false); err != nil {
				return err
			}
		}
		return w.Fail("upstream_error", "the upstream failed", false)
	}))
	for _, proto := range []string{ProtoE2ASSE, ProtoE2ANDJSON, ProtoA2AStream, ProtoA2AV1Stream, ProtoA2AV1RESTStream} {
		t.Run(proto, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl := &client{base: p.URL + "/pools/" + pool, proto: proto, hc: newHTTPClient(8),
				params: map[string]any{"text": "bench", "frames": frames}, expectFrames: frames, sessions: make(chan string, 8)}
			const n = 6
			ph := closedLoop(ctx, "full", n, 2, &idGen{prefix: "failfinal-" + strings.ReplaceAll(proto, "-", "")}, func(ctx context.Context, id string, start time.Time) result {
				return cl.do(ctx, id, start)
			}, false, false)
			if ph.OK != 0 || ph.Failed != n || len(ph.Errors) != 1 {
				t.Fatalf("%s: every request ended in the agent's e2a.error (status failed), yet the phase counts %d ok, %d failed (errors %v), %.0f requests/s",
					proto, ph.OK, ph.Failed, ph.Errors, ph.RPS)
			}
			for msg := range ph.Errors {
				if !strings.Contains(msg, "upstream_error") {
					t.Errorf("%s: the failure %q does not name the agent's error code", proto, msg)
				}
			}
		})
	}
}

// TestFinalFailure: the final frame's outcome by protocol. A failure is an
// E2A e2a.error or status failed, an A2A v0.3 state failed, canceled or
// rejected, an A2A v1.0 terminal state other than TASK_STATE_COMPLETED;
// the states asking for input or authentication are not failures, nor a
// "status" nested in a successful frame's body.
func TestFinalFailure(t *testing.T) {
	v03 := func(state string) string {
		return `{"jsonrpc":"2.0","id":"r","result":{"kind":"status-update","final":true,"status":{"state":"` + state + `"}}}`
	}
	v1 := func(wrap, state string) string {
		return `{"` + wrap + `":{"status":{"message":{"metadata":{"error":{"code":"boom"}}},"state":"` + state + `"}}}`
	}
	rpc := func(s string) string { return `{"jsonrpc":"2.0","id":"r","result":` + s + `}` }
	for _, c := range []struct {
		proto, msg string
		want       string // "" for success, else a part of the error
	}{
		{ProtoE2ASSE, `{"sequence":2,"is_final":true,"status":"succeeded","response_kind":"e2a.complete","body":{"status":"failed","code":"x"}}`, ""},
		{ProtoE2ASSE, `{"sequence":2,"is_final":true,"status":"failed","response_kind":"e2a.error","body":{"code":"upstream_error"}}`, "upstream_error"},
		{ProtoE2ANDJSON, `{"sequence":2,"is_final":true,"status":"failed","response_kind":"e2a.acp.jsonrpc_error","body":{}}`, "status failed"},
		{ProtoE2ANDJSON, `{"sequence":2,"is_final":true,"status":"succeeded","response_kind":"e2a.complete"}`, ""},
		{ProtoA2AStream, v03("completed"), ""},
		{ProtoA2AStream, v03("input-required"), ""},
		{ProtoA2AStream, v03("auth-required"), ""},
		{ProtoA2AStream, v03("failed"), "final state failed"},
		{ProtoA2AStream, v03("canceled"), "final state canceled"},
		{ProtoA2AStream, v03("rejected"), "final state rejected"},
		{ProtoA2AV1Stream, rpc(v1("statusUpdate", "TASK_STATE_COMPLETED")), ""},
		{ProtoA2AV1Stream, rpc(v1("statusUpdate", "TASK_STATE_INPUT_REQUIRED")), ""},
		{ProtoA2AV1Stream, rpc(v1("statusUpdate", "TASK_STATE_AUTH_REQUIRED")), ""},
		{ProtoA2AV1Stream, rpc(v1("statusUpdate", "TASK_STATE_FAILED")), "TASK_STATE_FAILED, code boom"},
		{ProtoA2AV1Stream, rpc(v1("task", "TASK_STATE_REJECTED")), "TASK_STATE_REJECTED"},
		{ProtoA2AV1RESTStream, v1("statusUpdate", "TASK_STATE_CANCELED"), "TASK_STATE_CANCELED"},
		{ProtoA2AV1RESTStream, v1("task", "TASK_STATE_COMPLETED"), ""},
		{ProtoACP, `{"jsonrpc":"2.0","id":"a","result":{"stopReason":"end_turn"}}`, ""},
		{ProtoOpenAIChat, `[DONE]`, ""},
	} {
		err := finalFailure(c.proto, []byte(c.msg))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v, want success", c.proto, c.msg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: %v, want a failure naming %q", c.proto, c.msg, err, c.want)
		}
	}
}
