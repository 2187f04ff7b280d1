package workflow

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// cancelledFrames is a FrameSource whose every submitted execution has
// already run: an operation's function_call at 10:00:00, then the runtime's
// final e2a.error "cancelled" (an A2A tasks/cancel of the executionId) at
// 10:00:02.5, without the executor's duration_ms.
type cancelledFrames struct {
	mu  sync.Mutex
	env *e2a.Envelope
}

func (c *cancelledFrames) Submit(_ context.Context, env *e2a.Envelope) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.env = env
	return nil
}

func (c *cancelledFrames) Frames(_ context.Context, id string) ([]*e2a.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.env == nil || id != c.env.RequestID {
		return nil, nil
	}
	frame := func(seq int64, ts, kind, status string, final bool, body string) *e2a.Response {
		return &e2a.Response{ProtocolVersion: e2a.ProtocolVersion, ResponseID: id + "-" + kind, RequestID: id, UserID: c.env.UserID,
			Method: Method, Sequence: seq, IsFinal: final, Status: status, ResponseKind: kind, Timestamp: ts, Body: json.RawMessage(body)}
	}
	return []*e2a.Response{
		frame(0, "2026-01-01T10:00:00+00:00", e2a.KindChunk, e2a.StatusInProgress, false,
			`{"delta_kind":"tool","delta":{"type":"function_call","id":"wait#1","name":"Wait","args":"{}"}}`),
		frame(1, "2026-01-01T10:00:02.500+00:00", e2a.KindError, e2a.StatusFailed, true,
			`{"code":"cancelled","message":"the request was cancelled","retryable":false}`),
	}, nil
}

// TestCancelledDurationAgrees: an execution ended by the runtime
// (cancelled; also deadline_exceeded, agent_interrupted) after 2.5 s is
// answered by execute with the duration GET /api/v1/executions/{id} gives
// for the same frames (2500 ms). Execute answered 0: it rebuilt its status
// from the final frame alone, whose start is its end.
func TestCancelledDurationAgrees(t *testing.T) {
	src := &cancelledFrames{}
	api := &API{Executor: New(Options{}), Submitter: src, Frames: src}
	call := serveAPI(t, api)
	code, ex := call("", "POST", "/api/v1/workflows/execute", workflowBody(lines(op("wait", `{"Wait":{"duration":5000}}`),
		`{"type":"beginExecution","executionId":"exec-c","operationOrder":["wait"]}`)))
	if code != http.StatusOK || ex["status"] != StatusFailed {
		t.Fatalf("execute: %d %v", code, ex)
	}
	id, _ := ex["request_id"].(string)
	code, got := call("", "GET", "/api/v1/executions/"+id, "")
	if code != http.StatusOK || got["duration_ms"] != float64(2500) {
		t.Fatalf("GET: %d %v", code, got)
	}
	if ex["duration_ms"] != got["duration_ms"] {
		t.Errorf("execute answers duration_ms %v, GET %v for the same execution", ex["duration_ms"], got["duration_ms"])
	}
}
