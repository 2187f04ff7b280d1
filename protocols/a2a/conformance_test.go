package a2a

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// rendererCase is one renderer of the package under the conformance (package protocols/conformance)
// suite: its case name (<format> or <format>_<variant>, the directory of
// its golden files under testdata/), how to build it, and what its output
// must satisfy beyond the golden bytes.
type rendererCase struct {
	name  string
	sse   bool
	make  func(o *render.Output, sc conformance.Scenario) render.Renderer
	check func(t *testing.T, sc conformance.Scenario, status int, body []byte)
}

// rendererCases: A2A's SSE (message/stream) and JSON (message/send)
// renderers for an interaction-spec client, a basic A2A client
// (_basic) and a text/plain client (_text_only); AgentVault's SSE.
func rendererCases() []rendererCase {
	stream := func(p a2amap.Params) func(o *render.Output, sc conformance.Scenario) render.Renderer {
		p.JSONRPCID, p.TaskID, p.ContextID, p.Submitted = json.RawMessage(`"req-002"`), "task-002", "ctx-001", conformance.Time()
		return func(o *render.Output, sc conformance.Scenario) render.Renderer {
			return NewStream(o, sc.RequestID(), p, sc.From)
		}
	}
	send := func(p a2amap.Params) func(o *render.Output, sc conformance.Scenario) render.Renderer {
		p.JSONRPCID = json.RawMessage(`"req-001"`)
		return func(o *render.Output, sc conformance.Scenario) render.Renderer { return NewSend(o, sc.RequestID(), p) }
	}
	textOnly := []string{"text/plain"}
	return []rendererCase{
		{name: StreamFormat, sse: true, make: stream(a2amap.Params{Interaction: true}), check: checkStream},
		{name: SendFormat, make: send(a2amap.Params{Interaction: true}), check: checkSend},
		{name: StreamFormat + "_basic", sse: true, make: stream(a2amap.Params{}), check: checkBasic(checkStream)},
		{name: SendFormat + "_basic", make: send(a2amap.Params{}), check: checkBasic(checkSend)},
		{name: StreamFormat + "_text_only", sse: true, make: stream(a2amap.Params{AcceptedOutputModes: textOnly, Interaction: true}),
			check: checkTextOnly(checkStream)},
		{name: SendFormat + "_text_only", make: send(a2amap.Params{AcceptedOutputModes: textOnly, Interaction: true}),
			check: checkTextOnly(checkSend)},
		{name: AgentVaultFormat, sse: true, make: func(o *render.Output, sc conformance.Scenario) render.Renderer {
			return NewAgentVaultStream(o, sc.RequestID(), AgentVaultParams{TaskID: "task-abc-123"})
		}, check: checkAgentVault},
	}
}

// TestRendererConformance runs every renderer case through the kit's
// suite (conformance.TestRenderers: its output step by step against
// testdata/<case>/<scenario>.golden, which go test -run Conformance
// -update rewrites), then the case's own checks.
func TestRendererConformance(t *testing.T) {
	old := now
	now = conformance.Time
	defer func() { now = old }()
	var cases []conformance.Case
	for _, rc := range rendererCases() {
		cases = append(cases, conformance.Case{Name: rc.name, SSE: rc.sse, New: rc.make,
			Check: func(t *testing.T, sc conformance.Scenario, run *conformance.Result) {
				rc.check(t, sc, run.Status, run.Body)
			}})
	}
	conformance.TestRenderers(t, *update, cases...)
}

// wantErr is the error a scenario ends with, nil when none.
func wantErr(sc conformance.Scenario) error {
	for _, st := range sc.Steps {
		if st.Kind == conformance.StepEnd {
			return st.Err
		}
	}
	return nil
}

// checkTextOnly: with acceptedOutputModes ["text/plain"] no DataPart is
// sent (they are dropped), besides what check requires.
func checkTextOnly(check func(t *testing.T, sc conformance.Scenario, status int, body []byte)) func(t *testing.T, sc conformance.Scenario, status int, body []byte) {
	return func(t *testing.T, sc conformance.Scenario, status int, body []byte) {
		t.Helper()
		if bytes.Contains(body, []byte(`"kind":"data"`)) {
			t.Errorf("a DataPart for a text/plain client:\n%s", body)
		}
		check(t, sc, status, body)
	}
}

// checkBasic: without the interaction-spec extension no thought part and
// no function_call/function_response DataPart is sent.
func checkBasic(check func(t *testing.T, sc conformance.Scenario, status int, body []byte)) func(t *testing.T, sc conformance.Scenario, status int, body []byte) {
	return func(t *testing.T, sc conformance.Scenario, status int, body []byte) {
		t.Helper()
		for _, bad := range []string{`"thought":true`, `"type":"function_call"`, `"type":"function_response"`} {
			if bytes.Contains(body, []byte(bad)) {
				t.Errorf("%s for a basic A2A client:\n%s", bad, body)
			}
		}
		check(t, sc, status, body)
	}
}

// checkStream: every data: is a JSON-RPC response with the request's id
// whose result decodes as an A2A event; a finished stream ends with a final
// status-update.
func checkStream(t *testing.T, sc conformance.Scenario, status int, body []byte) {
	if status != 200 {
		t.Errorf("status %d", status)
	}
	var last a2a.Event
	for _, ev := range sseEvents(body) {
		var resp struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      string          `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *jsonrpc.Error  `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.data), &resp); err != nil || resp.JSONRPC != "2.0" || resp.ID != "req-002" {
			t.Fatalf("bad JSON-RPC response %s: %v", ev.data, err)
		}
		if resp.Error != nil {
			if wantErr(sc) == nil {
				t.Errorf("unexpected error %+v", resp.Error)
			}
			continue
		}
		e, err := a2a.UnmarshalEventJSON(resp.Result)
		if err != nil {
			t.Fatalf("result is not an A2A event: %v: %s", err, resp.Result)
		}
		last = e
	}
	if sc.Final {
		if !closingV03(last) {
			t.Errorf("stream does not end with a final event: %#v", last)
		}
	}
}

// closingV03 reports whether ev ends a v0.3 stream by itself: a final
// status-update, a task in a terminal state, a message.
func closingV03(ev a2a.Event) bool {
	switch e := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		return e.Final
	case *a2a.Task:
		return e.Status.State.Terminal()
	case *a2a.Message:
		return true
	}
	return false
}

// checkSend: one JSON-RPC response with the request's id: the error, or a
// Message for one agent message, a Task for several.
func checkSend(t *testing.T, sc conformance.Scenario, status int, body []byte) {
	var resp struct {
		ID     string          `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(body), &resp); err != nil || resp.ID != "req-001" {
		t.Fatalf("bad response %s: %v", body, err)
	}
	if wantErr(sc) != nil {
		if resp.Error == nil {
			t.Errorf("no error")
		}
		return
	}
	e, err := a2a.UnmarshalEventJSON(resp.Result)
	if err != nil {
		t.Fatal(err)
	}
	switch sc.Name {
	case "spec_12_8", "single_message", "resume_from_3", "reasoning_then_text":
		if _, ok := e.(*a2a.Message); !ok {
			t.Errorf("one message must be a Message, got %T", e)
		}
	default:
		if _, ok := e.(*a2a.Task); !ok {
			t.Errorf("several messages must be a Task, got %T", e)
		}
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
func checkAgentVault(t *testing.T, sc conformance.Scenario, _ int, body []byte) {
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
			(st.State != AVCompleted && st.State != AVFailed && st.State != AVCanceled && st.State != AVInputRequired) {
			t.Errorf("last event %+v", last)
		}
	}
	if wantErr(sc) != nil && evs[len(evs)-1].event != "error" {
		t.Errorf("no error event")
	}
}

// TestAgentVaultTaskGolden: the AgentVault view of the task of every
// finished scenario, as tasks/get answers it, against
// testdata/agentvault_task/<scenario>.golden (-update rewrites them).
func TestAgentVaultTaskGolden(t *testing.T) {
	finishedTasks(t, func(t *testing.T, name string, task *a2a.Task) {
		taskGolden(t, "agentvault_task", name, AgentVaultTask(task, "2025-01-23T10:30:00Z"))
	})
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
	av := AgentVaultTask(a2amap.V03Task(a2amap.BuildTask("task-1", "", []a2amap.Request{{Envelope: env, Frames: frames}}, nil)), "2026-03-28T14:00:00Z")
	if len(av.Messages) != 2 || av.Messages[0].Role != "user" || av.Messages[1].Role != "assistant" || av.Messages[1].Parts[0].Content != any("one") {
		t.Fatalf("AgentVault task messages %+v", av.Messages)
	}
}
