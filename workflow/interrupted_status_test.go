package workflow

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestInterruptedCallListedInStatus: an execution cut while an ApiCall's
// request is at the API, by its worker's death (the redelivery closes it
// with agent_interrupted, retryable) or by a cancel (the runtime writes
// cancelled; the handler's later frames are refused). Its status (GET
// /api/v1/executions/{id}, the execute answer) listed the operations that
// ended and left the POST out, as if it had never started: a client
// trusting it runs the workflow again and the POST is sent twice. The
// POST is listed, failed, with an error saying it may have acted; the
// operation never started (last) is still left out. The client's
// executionId (workflow_execution_id, from the plan) was lost too: the
// runtime's error frame has none.
func TestInterruptedCallListedInStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		code string
		cut  func(t *testing.T, n *natsEnv, worker *nats.Conn, exec *Executor, opts []agent.Option)
	}{
		{"worker killed", e2a.ErrCodeAgentInterrupted, func(t *testing.T, n *natsEnv, worker *nats.Conn, exec *Executor, opts []agent.Option) {
			worker.Close()                          // abrupt: no drain, no ack
			runPool(t, n.connect(t), exec, opts...) // takes the redelivery
		}},
		{"cancelled", "cancelled", func(t *testing.T, n *natsEnv, _ *nats.Conn, _ *Executor, _ []agent.Option) {
			if _, err := agent.Cancel(tctx(t), n.js, "cut-1"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNATS(t)
			api, held := newTestAPI(t), testkit.NewHeld(t)
			exec := New(Options{Policy: examplePolicy(t, "127.0.0.1")})
			opts := []agent.Option{agent.WithAckWait(time.Second), agent.WithHeartbeat(200 * time.Millisecond)}
			worker := n.connect(t)
			runPool(t, worker, exec, opts...)
			wf := lines(
				op("fetch", `{"ApiCall":{"method":"GET","url":"`+api.URL+`/users","outputPath":"/workflow/users"}}`),
				op("post", `{"ApiCall":{"method":"POST","url":"`+held.URL+`/orders","body":{"n":1},"outputPath":"/workflow/p"}}`),
				op("last", `{"Wait":{"duration":1}}`),
				begin("fetch", "post", "last"))
			env := &e2a.Envelope{ProtocolVersion: "1.0", RequestID: "cut-1", Method: Method, UserID: "agent-1",
				Params: map[string]any{"workflow": wf}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2E}}
			if err := (jsSubmitter{n.js}).Submit(tctx(t), env); err != nil {
				t.Fatal(err)
			}
			testkit.Receive(t, held.Arrived, 10*time.Second, "the POST did not reach the API")
			tc.cut(t, n, worker, exec, opts) // the POST still at the API

			src := &StreamFrames{Conn: n.nc}
			final, err := (&API{Frames: src}).waitFinal(tctx(t), "cut-1")
			if err != nil {
				t.Fatal(err)
			}
			if eb, _ := final.Error(); eb.Code != tc.code {
				t.Fatalf("final: %s; want %s", final.Body, tc.code)
			}
			frames, _ := src.Frames(context.Background(), "cut-1")
			st := StatusFromFrames(frames)
			if st.WorkflowExecutionID != "e1" {
				t.Errorf("workflow_execution_id %q, want the plan's e1 (the runtime's error frame has none)", st.WorkflowExecutionID)
			}
			if st.Status != StatusFailed || len(st.Operations) != 2 || st.Operations[0].OperationID != "fetch" || st.Operations[0].Status != StatusSuccess {
				t.Fatalf("status: %+v; want fetch succeeded, then post", st)
			}
			post := st.Operations[1]
			if post.OperationID != "post" || post.Type != OpApiCall || post.Status != StatusFailed || !strings.Contains(string(post.Error), cutActedMessage) {
				t.Errorf("post: %+v error %s; want failed, saying it may have acted", post, post.Error)
			}
		})
	}
}
