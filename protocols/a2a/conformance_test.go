package a2a

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestRendererConformance runs the AgentVault renderer (its case is named
// after its format, agentvault_sse) through egress's conformance
// scenarios and compares its output step by step with
// testdata/agentvault_sse/<scenario>.golden (go test -run Conformance
// -update rewrites them).
func TestRendererConformance(t *testing.T) {
	for _, sc := range egress.Scenarios() {
		t.Run(AgentVaultFormat+"/"+sc.Name, func(t *testing.T) {
			run, err := egress.RunConformance(sc, func(o *egress.Output) egress.Renderer {
				return NewAgentVaultStream(o, sc.RequestID(), AgentVaultParams{TaskID: "task-abc-123"})
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := egress.MatchGolden(egress.GoldenPath(AgentVaultFormat, sc.Name), run.Golden, *update); err != nil {
				t.Error(err)
			}
			if run.Started {
				for h, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
					if run.Header.Get(h) != v {
						t.Errorf("%s = %q, want %q", h, run.Header.Get(h), v)
					}
				}
			}
			if len(run.Body) == 0 {
				t.Errorf("nothing written")
			}
			if run.Header.Get("Content-Type") == "text/event-stream" {
				if _, err := egress.SSEData(run.Body); err != nil {
					t.Error(err)
				}
			}
			checkAgentVault(t, sc, run.Body)
		})
	}
}

type sseEvent struct{ event, data string }

// sseEvents reads the events (not the comments) of an SSE body.
func sseEvents(body []byte) []sseEvent {
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" || cur.event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event:"):
			cur.event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			cur.data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
	if cur.data != "" || cur.event != "" {
		out = append(out, cur)
	}
	return out
}

// checkAgentVault: only the profile's events; a finished scenario ends
// with a final task_status, a failed one with an error event.
func checkAgentVault(t *testing.T, sc egress.Scenario, body []byte) {
	t.Helper()
	evs := sseEvents(body)
	for _, ev := range evs {
		switch ev.event {
		case "task_status", "task_message", "task_artifact", "error":
		default:
			t.Errorf("event %q", ev.event)
		}
	}
	if sc.Final {
		var st AVStatusEvent
		last := evs[len(evs)-1]
		if err := json.Unmarshal([]byte(last.data), &st); err != nil || last.event != "task_status" ||
			(st.State != AVCompleted && st.State != AVFailed && st.State != AVCanceled) {
			t.Errorf("last event %+v", last)
		}
	}
	var endErr error
	for _, st := range sc.Steps {
		if st.Kind == egress.StepEnd {
			endErr = st.Err
		}
	}
	if endErr != nil && evs[len(evs)-1].event != "error" {
		t.Errorf("no error event")
	}
}

// TestAgentVaultTaskGolden: the AgentVault view of the task of every
// finished scenario, as tasks/get answers it, against
// testdata/agentvault_task/<scenario>.golden (-update rewrites them).
func TestAgentVaultTaskGolden(t *testing.T) {
	for _, sc := range egress.Scenarios() {
		if !sc.Final || sc.From > 0 {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			env := &e2a.Envelope{RequestID: sc.RequestID(), Params: map[string]any{"text": "question"}}
			task := egress.BuildA2ATask("task-002", "ctx-001", []egress.A2ARequest{{Envelope: env, Frames: sc.Frames}}, nil)
			b, err := json.MarshalIndent(AgentVaultTask(task, "2025-01-23T10:30:00Z"), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, '\n')
			if err := egress.MatchGolden(egress.GoldenPath("agentvault_task", sc.Name), b, *update); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestAgentVaultTaskMessages: the AgentVault view of a finished task has
// its user and assistant messages, with their text.
func TestAgentVaultTaskMessages(t *testing.T) {
	frame := func(seq int64, kind, status string, final bool, body any) *e2a.Response {
		return &e2a.Response{ProtocolVersion: "1.0", RequestID: "q1", Sequence: seq, IsFinal: final, Status: status,
			ResponseKind: kind, Timestamp: "2026-03-28T14:00:00Z", Body: e2a.MarshalBody(body)}
	}
	env := &e2a.Envelope{RequestID: "q1", Params: map[string]any{"text": "first"}}
	frames := []*e2a.Response{
		frame(0, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "one"}),
		frame(1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: "one"})}
	av := AgentVaultTask(egress.BuildA2ATask("task-1", "", []egress.A2ARequest{{Envelope: env, Frames: frames}}, nil), "2026-03-28T14:00:00Z")
	if len(av.Messages) != 2 || av.Messages[0].Role != "user" || av.Messages[1].Role != "assistant" || av.Messages[1].Parts[0].Content != any("one") {
		t.Fatalf("AgentVault task messages %+v", av.Messages)
	}
}
