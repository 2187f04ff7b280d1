package egress

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// rendererCase is one renderer under the suite: how to build it, and what
// its output must satisfy beyond the golden bytes.
type rendererCase struct {
	name string
	sse  bool
	// format is the output format (Formats) the renderer writes.
	format string
	make   func(o *Output, sc Scenario) Renderer
	check  func(t *testing.T, sc Scenario, status int, body []byte)
}

// ConformanceFormats returns, for each output format, the renderer cases
// of the conformance suite that write it (their golden files are under
// testdata/<case>/): the registry's completeness check reads it.
func ConformanceFormats() map[string][]string {
	out := map[string][]string{}
	for _, rc := range renderers() {
		out[rc.format] = append(out[rc.format], rc.name)
	}
	return out
}

func reqID(sc Scenario) string { return sc.RequestID() }

func renderers() []rendererCase {
	return []rendererCase{
		{name: "e2a_sse", format: FormatE2ASSE, sse: true, make: func(o *Output, sc Scenario) Renderer { return NewE2ASSE(o, 2*time.Second, "") },
			check: checkE2ASSE},
		{name: "e2a_ndjson", format: FormatE2ANDJSON, make: func(o *Output, sc Scenario) Renderer { return NewE2ANDJSON(o) }, check: checkE2ANDJSON},
		{name: "e2a_json", format: FormatE2AJSON, make: func(o *Output, sc Scenario) Renderer {
			return NewE2AJSON(o, reqID(sc), []byte(`{"request_id":"`+reqID(sc)+`","method":"chat.send"}`), sc.Final, sc.From)
		}, check: checkE2AJSON},
		{name: "a2a_stream", format: FormatA2ASSE, sse: true, make: func(o *Output, sc Scenario) Renderer {
			return NewA2AStream(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-002"`), TaskID: "task-002", ContextID: "ctx-001", Submitted: fixedNow, Interaction: true}, sc.From)
		}, check: checkA2AStream},
		{name: "a2a_send", format: FormatA2AJSON, make: func(o *Output, sc Scenario) Renderer {
			return NewA2ASend(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-001"`), Interaction: true})
		}, check: checkA2ASend},
		{name: "a2a_stream_basic", format: FormatA2ASSE, sse: true, make: func(o *Output, sc Scenario) Renderer {
			return NewA2AStream(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-002"`), TaskID: "task-002", ContextID: "ctx-001", Submitted: fixedNow}, sc.From)
		}, check: checkBasic(checkA2AStream)},
		{name: "a2a_send_basic", format: FormatA2AJSON, make: func(o *Output, sc Scenario) Renderer {
			return NewA2ASend(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-001"`)})
		}, check: checkBasic(checkA2ASend)},
		{name: "a2a_stream_text_only", format: FormatA2ASSE, sse: true, make: func(o *Output, sc Scenario) Renderer {
			return NewA2AStream(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-002"`), TaskID: "task-002", ContextID: "ctx-001", Submitted: fixedNow,
				AcceptedOutputModes: []string{"text/plain"}, Interaction: true}, sc.From)
		}, check: checkTextOnly(checkA2AStream)},
		{name: "a2a_send_text_only", format: FormatA2AJSON, make: func(o *Output, sc Scenario) Renderer {
			return NewA2ASend(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-001"`), AcceptedOutputModes: []string{"text/plain"}, Interaction: true})
		}, check: checkTextOnly(checkA2ASend)},
	}
}

// TestRendererConformance runs every renderer through every Scenario,
// compares the output step by step with testdata/<renderer>/<Scenario>.golden
// (go test -run Conformance -update rewrites them), and checks what every
// renderer must do whatever its format.
func TestRendererConformance(t *testing.T) {
	old := now
	now = func() time.Time { return fixedNow }
	defer func() { now = old }()
	for _, rc := range renderers() {
		for _, sc := range Scenarios() {
			t.Run(rc.name+"/"+sc.Name, func(t *testing.T) {
				run, err := RunConformance(sc, func(o *Output) Renderer { return rc.make(o, sc) })
				if err != nil {
					t.Fatal(err)
				}
				if err := MatchGolden(GoldenPath(rc.name, sc.Name), run.Golden, *update); err != nil {
					t.Error(err)
				}
				// Invariants shared by every renderer.
				if run.Started && rc.sse {
					for h, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
						if run.Header.Get(h) != v {
							t.Errorf("%s = %q, want %q", h, run.Header.Get(h), v)
						}
					}
				}
				if len(run.Body) == 0 {
					t.Errorf("nothing written")
				}
				if rc.sse && run.Header.Get("Content-Type") == "text/event-stream" {
					checkSSESyntax(t, run.Body)
				}
				rc.check(t, sc, run.Status, run.Body)
			})
		}
	}
}

// checkTextOnly: with acceptedOutputModes ["text/plain"] no DataPart is
// sent (they are dropped), besides what check requires.
func checkTextOnly(check func(t *testing.T, sc Scenario, status int, body []byte)) func(t *testing.T, sc Scenario, status int, body []byte) {
	return func(t *testing.T, sc Scenario, status int, body []byte) {
		t.Helper()
		if bytes.Contains(body, []byte(`"kind":"data"`)) {
			t.Errorf("a DataPart for a text/plain client:\n%s", body)
		}
		check(t, sc, status, body)
	}
}

// checkBasic: without the interaction-spec extension no thought part and
// no function_call/function_response DataPart is sent.
func checkBasic(check func(t *testing.T, sc Scenario, status int, body []byte)) func(t *testing.T, sc Scenario, status int, body []byte) {
	return func(t *testing.T, sc Scenario, status int, body []byte) {
		t.Helper()
		for _, bad := range []string{`"thought":true`, `"type":"function_call"`, `"type":"function_response"`} {
			if bytes.Contains(body, []byte(bad)) {
				t.Errorf("%s for a basic A2A client:\n%s", bad, body)
			}
		}
		check(t, sc, status, body)
	}
}

// checkSSESyntax: every line is a field we write or a comment, every data:
// is one JSON value, events end with a blank line (SSEData).
func checkSSESyntax(t *testing.T, body []byte) {
	t.Helper()
	if _, err := SSEData(body); err != nil {
		t.Error(err)
	}
}

func sseData(t *testing.T, body []byte) []sseEvent {
	var evs []sseEvent
	for _, ev := range readSSE(t, bytes.NewReader(body)) {
		if !ev.Comment {
			evs = append(evs, ev)
		}
	}
	return evs
}

func ndjsonLines(t *testing.T, body []byte) [][]byte {
	t.Helper()
	out, err := NDJSONLines(body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func wantErr(sc Scenario) error {
	for _, st := range sc.Steps {
		if st.Kind == "end" {
			return st.Err
		}
	}
	return nil
}

func rendered(sc Scenario) []*e2a.Response {
	var out []*e2a.Response
	for _, st := range sc.Steps {
		if st.Kind == "frame" {
			out = append(out, sc.Frames[st.Frame])
		}
	}
	return out
}

func checkE2ASSE(t *testing.T, sc Scenario, status int, body []byte) {
	if err := wantErr(sc); err != nil && len(rendered(sc)) == 0 {
		st, _ := Classify(err)
		if status != st {
			t.Errorf("status %d, want %d", status, st)
		}
		return
	}
	evs := sseData(t, body)
	fr := rendered(sc)
	for i, f := range fr {
		if evs[i].ID != fmt.Sprint(f.Sequence) || evs[i].Event != f.ResponseKind {
			t.Errorf("event %d: %+v", i, evs[i])
		}
	}
	if wantErr(sc) != nil && evs[len(evs)-1].Event != "error" {
		t.Errorf("no error event")
	}
}

func checkE2ANDJSON(t *testing.T, sc Scenario, status int, body []byte) {
	lines := ndjsonLines(t, body)
	fr := rendered(sc)
	for i, f := range fr {
		r, err := e2a.ResponseFromJSON(lines[i])
		if err != nil || r.Sequence != f.Sequence {
			t.Errorf("line %d: %v", i, err)
		}
	}
	if wantErr(sc) != nil && len(lines) != len(fr)+1 {
		t.Errorf("no error line")
	}
}

func checkE2AJSON(t *testing.T, sc Scenario, status int, body []byte) {
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if wantErr(sc) != nil && len(rendered(sc)) == 0 {
		if v["error"] == nil || status != 404 {
			t.Errorf("status %d body %v", status, v)
		}
		return
	}
	var view RequestView
	_ = json.Unmarshal(body, &view)
	if len(view.Frames) != len(rendered(sc)) {
		t.Errorf("%d frames", len(view.Frames))
	}
	if sc.Final != (status == 200) {
		t.Errorf("status %d for final=%v", status, sc.Final)
	}
}

// checkA2AStream: every data: is a JSON-RPC response with the request's id
// whose result decodes as an A2A event; a finished stream ends with a final
// status-update.
func checkA2AStream(t *testing.T, sc Scenario, status int, body []byte) {
	if status != 200 {
		t.Errorf("status %d", status)
	}
	evs := sseData(t, body)
	var last a2a.Event
	for _, ev := range evs {
		var resp struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      string          `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *jsonrpc.Error  `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &resp); err != nil || resp.JSONRPC != "2.0" || resp.ID != "req-002" {
			t.Fatalf("bad JSON-RPC response %s: %v", ev.Data, err)
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
		if !isClosing(last) {
			t.Errorf("stream does not end with a final event: %#v", last)
		}
	}
}

func checkA2ASend(t *testing.T, sc Scenario, status int, body []byte) {
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
	case "spec_12_8", "single_message", "resume_from_3":
		if _, ok := e.(*a2a.Message); !ok {
			t.Errorf("one message must be a Message, got %T", e)
		}
	default:
		if _, ok := e.(*a2a.Task); !ok {
			t.Errorf("several messages must be a Task, got %T", e)
		}
	}
}
