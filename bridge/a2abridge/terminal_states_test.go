package a2abridge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// goKinds are the a2a-go/v2 upstreams of upstreamKinds named names.
func goKinds(names ...string) []upstreamKind {
	var out []upstreamKind
	for _, u := range upstreamKinds {
		if slices.Contains(names, u.name) {
			out = append(out, u)
		}
	}
	return out
}

// doorsNamed are the front doors of doors named names.
func doorsNamed(names ...string) []door {
	var out []door
	for _, d := range doors {
		if slices.Contains(names, d.name) {
			out = append(out, d)
		}
	}
	return out
}

// TestAgentRejectsOrCancels: an upstream task the agent ends rejected, or
// canceled on its own (no cancel of the request), ends the pipeline's
// task so: A2A v1.0 clients (streamed, sent, and tasks/get) and v0.3
// see TASK_STATE_REJECTED / TASK_STATE_CANCELED with the agent's status
// message, not failed; ACP's prompt ends with stopReason refusal /
// cancelled; the E2A read API answers the request whole, its final frame
// the agent's own final status-update (its outcome rejected / canceled
// with the agent's message), not an error.
func TestAgentRejectsOrCancels(t *testing.T) {
	t.Parallel()
	ends := []struct {
		prefix string
		state  a2a.TaskState
		text   func(string) string
		acp    string // what the ACP prompt ends with (doors_test: acpConv.prompt)
	}{
		{up.Reject, a2a.TaskStateRejected, up.RejectText, "stop refusal"},
		{up.AgentCancel, a2a.TaskStateCanceled, up.AgentCancelText, "canceled"},
	}
	for _, u := range goKinds("go-jsonrpc", "go-jsonrpc-nostream", "go-v03-jsonrpc") {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			_, p := u.bridged(t)
			for _, e := range ends {
				for _, d := range doorsNamed("a2a-v1-jsonrpc", "a2a-v1-rest", "a2a-v03", "acp-stdio") {
					tag := u.name + "/" + d.name
					c := d.open(t, p, "agent")
					s := c.send(t, e.prefix+": "+tag)
					want := e.text(tag)
					if d.name == "acp-stdio" {
						// The agent's status message is the prompt's
						// last words.
						if s.state != e.acp || !strings.Contains(s.text, want) {
							t.Errorf("%s %s: %s, text %q; want %s with %q", e.prefix, d.name, s.state, s.text, e.acp, want)
						}
						continue
					}
					if s.state != v03State(e.state) || s.message != want {
						t.Errorf("%s %s: %s %q, want %s %q", e.prefix, d.name, s.state, s.message, v03State(e.state), want)
					}
					if v, ok := c.(*v1Conv); ok {
						checkEndedTask(t, v, s.taskID, e.state, want)
					}
				}
				checkE2AEnd(t, p, fmt.Sprintf("%s-%s", u.name, e.prefix), e.prefix+": "+u.name, e.state, e.text(u.name))
			}
		})
	}
}

// checkEndedTask checks the pipeline's task id as tasks/get shows it:
// state, the agent's status message, and the status message's error
// metadata (when it has one) not retryable.
func checkEndedTask(t *testing.T, v *v1Conv, id string, state a2a.TaskState, text string) {
	t.Helper()
	task, err := v.c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
	if err != nil {
		t.Fatalf("GetTask %s: %v", id, err)
	}
	_, status := taskText(task)
	if task.Status.State != state || status != text {
		t.Errorf("GetTask %s: %s %q, want %s %q", id, task.Status.State, status, state, text)
	}
	if m := task.Status.Message; m != nil {
		if em, ok := m.Metadata["error"].(map[string]any); ok && em["retryable"] != false {
			t.Errorf("GetTask %s: status message error metadata %v, want retryable false", id, em)
		}
	}
}

// checkE2AEnd sends text as E2A request id and reads it back with GET
// /v1/requests/{id}: answered whole (200, state succeeded: a final frame
// that is not an error), its final frame the agent's final status-update
// in state with the agent's message text.
func checkE2AEnd(t *testing.T, p *pipetest.Pipeline, id, text string, state a2a.TaskState, want string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"request_id": id, "params": map[string]any{"text": text}})
	a := p.Ask(t, "agent", string(body))
	status, view, err := pipetest.GetRequestView(t, p.URL, id)
	if err != nil || status != http.StatusOK || view.State != a.State || len(view.Frames) != len(a.Frames) {
		t.Fatalf("GET /v1/requests/%s: %d %v, state %q and %d frames (the wait answered %q and %d)", id, status, err,
			view.State, len(view.Frames), a.State, len(a.Frames))
	}
	if a.State != "succeeded" {
		t.Errorf("E2A %s: state %q, want succeeded (the agent answered; its final frame says how)", id, a.State)
	}
	f := a.Final()
	if o := a2amap.FinalOutcome(f); f.ResponseKind != e2a.KindA2AStreamEvent || o.State != state || o.Message != want {
		t.Errorf("E2A %s: final %s %s, outcome %+v; want the agent's %s %q", id, f.ResponseKind, f.Body, o, state, want)
	}
}
