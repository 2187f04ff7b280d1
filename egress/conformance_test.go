package egress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// step is one call of the driver on a renderer.
type step struct {
	kind  string // start, frame, heartbeat, end
	frame int
	err   error
}

// scenario is a sequence of frames built from the specification examples,
// and the driver calls that render it.
type scenario struct {
	name   string
	frames []*e2a.Response
	from   int64
	steps  []step
	final  bool // the steps include the final frame
}

var fixedNow = time.Date(2025, 1, 23, 10, 30, 0, 0, time.UTC)

func frameAt(id string, seq int64, kind, status string, final bool, body any, meta map[string]any) *e2a.Response {
	return &e2a.Response{
		ProtocolVersion: "1.0", ResponseID: fmt.Sprintf("rsp-%s-%d", id, seq), RequestID: id,
		Sequence: seq, IsFinal: final, Status: status, ResponseKind: kind,
		Timestamp:  e2a.FormatTime(fixedNow.Add(time.Duration(seq) * time.Second)),
		Provenance: e2a.Provenance{SourceProtocol: e2a.SourceA2A},
		Body:       e2a.MarshalBody(body), Metadata: meta,
		TaskID: "task-002", ContextID: "ctx-001", SessionID: "s1", JSONRPCID: json.RawMessage(`"req-002"`),
	}
}

func chunkFrame(id string, seq int64, dk string, delta any, llm string) *e2a.Response {
	var meta map[string]any
	if llm != "" {
		meta = map[string]any{MetaLLMResponseID: llm}
	}
	return frameAt(id, seq, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: dk, Delta: delta}, meta)
}

// toolCallFrames is the streaming example of a2a-interaction-spec-trpc.md
// (weather in Beijing) as E2A frames, with a reasoning chunk first.
func toolCallFrames() []*e2a.Response {
	id := "req_weather"
	return []*e2a.Response{
		chunkFrame(id, 0, e2a.DeltaReasoning, "Let me check the weather.", "chatcmpl-abc123"),
		chunkFrame(id, 1, e2a.DeltaTool, map[string]any{"type": "function_call", "id": "call_001", "name": "get_weather", "args": `{"city":"Beijing"}`}, "chatcmpl-abc123"),
		chunkFrame(id, 2, e2a.DeltaTool, map[string]any{"type": "function_response", "id": "call_001", "name": "get_weather", "response": `{"temp":"20°C"}`}, "chatcmpl-abc123"),
		chunkFrame(id, 3, e2a.DeltaText, "The current", "chatcmpl-def456"),
		chunkFrame(id, 4, e2a.DeltaText, " temperature in Beijing is 20°C, sunny.", "chatcmpl-def456"),
		frameAt(id, 5, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "The current temperature in Beijing is 20°C, sunny."}}, nil),
	}
}

// specFrames are the three lines of e2a-protocol.md §12.8, verbatim.
func specFrames(t testing.TB) []*e2a.Response {
	lines := []string{
		`{"protocol_version":"1.0","response_id":"r1","request_id":"req_1","sequence":0,"is_final":false,"status":"in_progress","response_kind":"e2a.chunk","timestamp":"2026-03-29T12:00:00+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":"Hello"}}`,
		`{"protocol_version":"1.0","response_id":"r2","request_id":"req_1","sequence":1,"is_final":false,"status":"in_progress","response_kind":"e2a.chunk","timestamp":"2026-03-29T12:00:01+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":" world"}}`,
		`{"protocol_version":"1.0","response_id":"r3","request_id":"req_1","sequence":2,"is_final":true,"status":"succeeded","response_kind":"e2a.complete","timestamp":"2026-03-29T12:00:02+00:00","provenance":{"source_protocol":"e2a"},"body":{"result":{"content":"Hello world"}}}`,
	}
	var out []*e2a.Response
	for _, l := range lines {
		r, err := e2a.ResponseFromJSON([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func allFrames(frames []*e2a.Response, from int64) []step {
	steps := []step{{kind: "start"}}
	for i := range frames {
		if int64(i) >= from {
			steps = append(steps, step{kind: "frame", frame: i})
		}
	}
	return append(steps, step{kind: "end"})
}

func scenarios(t testing.TB) []scenario {
	var out []scenario
	spec := specFrames(t)
	s := allFrames(spec, 0)
	s = append([]step{s[0], {kind: "heartbeat"}}, s[1:]...) // a heartbeat before the first frame
	out = append(out, scenario{name: "spec_12_8", frames: spec, steps: s, final: true})

	tc := toolCallFrames()
	out = append(out, scenario{name: "trpc_tool_call", frames: tc, steps: allFrames(tc, 0), final: true})
	out = append(out, scenario{name: "resume_from_3", frames: tc, from: 3, steps: allFrames(tc, 3), final: true})

	id := "req_code"
	code := []*e2a.Response{
		chunkFrame(id, 0, e2a.DeltaCustom, map[string]any{"type": "executable_code", "code": "print(6*7)", "language": "python"}, "chatcmpl-c1"),
		chunkFrame(id, 1, e2a.DeltaCustom, map[string]any{"type": "code_execution_result", "output": "42", "outcome": "OUTCOME_OK"}, "chatcmpl-c1"),
		chunkFrame(id, 2, e2a.DeltaText, "The answer is 42.", "chatcmpl-c2"),
		frameAt(id, 3, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "The answer is 42."}}, nil),
	}
	out = append(out, scenario{name: "code_execution", frames: code, steps: allFrames(code, 0), final: true})

	id = "req_single"
	single := []*e2a.Response{
		frameAt(id, 0, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "The current temperature in Beijing is 20°C."}}, map[string]any{MetaLLMResponseID: "chatcmpl-ghi789"}),
	}
	out = append(out, scenario{name: "single_message", frames: single, steps: allFrames(single, 0), final: true})

	id = "req_err"
	errFrames := []*e2a.Response{
		chunkFrame(id, 0, e2a.DeltaText, "Partial", ""),
		frameAt(id, 1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: "handler_error", Message: "model overloaded", Retryable: true, Details: map[string]any{"upstream": "llm"}}, nil),
	}
	out = append(out, scenario{name: "error", frames: errFrames, steps: allFrames(errFrames, 0), final: true})

	id = "req_cancel"
	cancel := []*e2a.Response{
		chunkFrame(id, 0, e2a.DeltaText, "Working on it", ""),
		frameAt(id, 1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: e2a.ErrCodeCancelled, Message: "cancelled by the client"}, nil),
	}
	out = append(out, scenario{name: "cancel", frames: cancel, steps: allFrames(cancel, 0), final: true})

	id = "req_acp"
	acpFrames := []*e2a.Response{
		frameAt(id, 0, e2a.KindACPSessionUpd, e2a.StatusInProgress, false, map[string]any{"sessionId": "s1", "update": map[string]any{"sessionUpdate": "agent_thought_chunk", "content": map[string]any{"type": "text", "text": "Planning"}}}, nil),
		frameAt(id, 1, e2a.KindACPSessionUpd, e2a.StatusInProgress, false, map[string]any{"sessionUpdate": "plan", "entries": []any{map[string]any{"content": "read the file", "priority": "high", "status": "pending"}}}, nil),
		frameAt(id, 2, e2a.KindACPSessionUpd, e2a.StatusInProgress, false, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "read_file", "kind": "read", "status": "pending", "rawInput": map[string]any{"path": "a.txt"}}, nil),
		frameAt(id, 3, e2a.KindACPSessionUpd, e2a.StatusInProgress, false, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "rawOutput": map[string]any{"text": "hello"}}, nil),
		frameAt(id, 4, e2a.KindACPSessionUpd, e2a.StatusInProgress, false, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "The file says hello."}}, nil),
		frameAt(id, 5, e2a.KindACPPromptRes, e2a.StatusSucceeded, true, map[string]any{"stop_reason": "end_turn"}, nil),
	}
	out = append(out, scenario{name: "acp_native", frames: acpFrames, steps: allFrames(acpFrames, 0), final: true})

	id = "req_a2a"
	a2aFrames := []*e2a.Response{
		frameAt(id, 0, e2a.KindA2AStreamEvent, e2a.StatusInProgress, false, e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate,
			Payload: map[string]any{"task_id": "task-002", "context_id": "ctx-001", "status": map[string]any{"state": "TASK_STATE_WORKING"}, "final": false}}, nil),
		frameAt(id, 1, e2a.KindA2AStreamEvent, e2a.StatusInProgress, false, e2a.StreamEventBody{Branch: e2a.BranchArtifactUpdate,
			Payload: map[string]any{"task_id": "task-002", "context_id": "ctx-001", "artifact": map[string]any{"artifact_id": "art-1", "parts": []any{map[string]any{"text": "Native A2A text"}}}}}, nil),
		frameAt(id, 2, e2a.KindA2ATask, e2a.StatusSucceeded, true, map[string]any{"id": "task-002", "context_id": "ctx-001",
			"status":    map[string]any{"state": "TASK_STATE_COMPLETED", "timestamp": "2025-01-23T10:30:02Z"},
			"artifacts": []any{map[string]any{"artifact_id": "art-1", "parts": []any{map[string]any{"text": "Native A2A text"}}}}}, nil),
	}
	out = append(out, scenario{name: "a2a_native", frames: a2aFrames, steps: allFrames(a2aFrames, 0), final: true})

	out = append(out, scenario{name: "not_found", steps: []step{{kind: "end", err: fmt.Errorf("%w: %q", ErrNotFound, "nope")}}})
	id = "req_slow"
	slow := []*e2a.Response{chunkFrame(id, 0, e2a.DeltaText, "Hello", "")}
	out = append(out, scenario{name: "timeout", frames: slow, steps: []step{{kind: "start"}, {kind: "frame"}, {kind: "heartbeat"},
		{kind: "end", err: fmt.Errorf("%w: request %q: waited 5m0s", ErrWaitTimeout, id)}}})
	return out
}

// rendererCase is one renderer under the suite: how to build it, and what
// its output must satisfy beyond the golden bytes.
type rendererCase struct {
	name string
	sse  bool
	// format is the output format (Formats) the renderer writes.
	format string
	make   func(o *Output, sc scenario) Renderer
	check  func(t *testing.T, sc scenario, status int, body []byte)
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

func reqID(sc scenario) string {
	if len(sc.frames) > 0 {
		return sc.frames[0].RequestID
	}
	return "nope"
}

func renderers() []rendererCase {
	return []rendererCase{
		{name: "e2a_sse", format: FormatE2ASSE, sse: true, make: func(o *Output, sc scenario) Renderer { return NewE2ASSE(o, 2*time.Second, "") },
			check: checkE2ASSE},
		{name: "e2a_ndjson", format: FormatE2ANDJSON, make: func(o *Output, sc scenario) Renderer { return NewE2ANDJSON(o) }, check: checkE2ANDJSON},
		{name: "e2a_json", format: FormatE2AJSON, make: func(o *Output, sc scenario) Renderer {
			return NewE2AJSON(o, reqID(sc), []byte(`{"request_id":"`+reqID(sc)+`","method":"chat.send"}`), sc.final, sc.from)
		}, check: checkE2AJSON},
		{name: "a2a_stream", format: FormatA2ASSE, sse: true, make: func(o *Output, sc scenario) Renderer {
			return NewA2AStream(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-002"`), TaskID: "task-002", ContextID: "ctx-001", Submitted: fixedNow, Interaction: true}, sc.from)
		}, check: checkA2AStream},
		{name: "a2a_send", format: FormatA2AJSON, make: func(o *Output, sc scenario) Renderer {
			return NewA2ASend(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-001"`), Interaction: true})
		}, check: checkA2ASend},
		{name: "a2a_stream_basic", format: FormatA2ASSE, sse: true, make: func(o *Output, sc scenario) Renderer {
			return NewA2AStream(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-002"`), TaskID: "task-002", ContextID: "ctx-001", Submitted: fixedNow}, sc.from)
		}, check: checkBasic(checkA2AStream)},
		{name: "a2a_send_basic", format: FormatA2AJSON, make: func(o *Output, sc scenario) Renderer {
			return NewA2ASend(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-001"`)})
		}, check: checkBasic(checkA2ASend)},
		{name: "a2a_stream_text_only", format: FormatA2ASSE, sse: true, make: func(o *Output, sc scenario) Renderer {
			return NewA2AStream(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-002"`), TaskID: "task-002", ContextID: "ctx-001", Submitted: fixedNow,
				AcceptedOutputModes: []string{"text/plain"}, Interaction: true}, sc.from)
		}, check: checkTextOnly(checkA2AStream)},
		{name: "a2a_send_text_only", format: FormatA2AJSON, make: func(o *Output, sc scenario) Renderer {
			return NewA2ASend(o, reqID(sc), A2AParams{JSONRPCID: json.RawMessage(`"req-001"`), AcceptedOutputModes: []string{"text/plain"}, Interaction: true})
		}, check: checkTextOnly(checkA2ASend)},
		{name: "agentvault_sse", format: FormatAgentVaultSSE, sse: true, make: func(o *Output, sc scenario) Renderer {
			return NewAgentVaultStream(o, reqID(sc), AgentVaultParams{TaskID: "task-abc-123"})
		}, check: checkAgentVault},
		{name: "acp_ndjson", format: FormatACP, make: func(o *Output, sc scenario) Renderer {
			return NewACP(o, ACPParams{JSONRPCID: json.RawMessage(`42`), SessionID: "s1"})
		}, check: checkACP},
		{name: "acp_sse", format: FormatACP, sse: true, make: func(o *Output, sc scenario) Renderer {
			return NewACP(o, ACPParams{JSONRPCID: json.RawMessage(`42`), SessionID: "s1", SSE: true})
		}, check: checkACP},
		{name: "a2e_ndjson", format: FormatA2ENDJSON, make: func(o *Output, sc scenario) Renderer {
			return NewA2E(o, A2EParams{ReqID: "a1b2c3", ReqType: "tool/call/req"})
		}, check: checkA2E},
	}
}

// TestRendererConformance runs every renderer through every scenario,
// compares the output step by step with testdata/<renderer>/<scenario>.golden
// (go test -run Conformance -update rewrites them), and checks what every
// renderer must do whatever its format.
func TestRendererConformance(t *testing.T) {
	old := now
	now = func() time.Time { return fixedNow }
	defer func() { now = old }()
	for _, rc := range renderers() {
		for _, sc := range scenarios(t) {
			t.Run(rc.name+"/"+sc.name, func(t *testing.T) {
				rec := httptest.NewRecorder()
				o := NewOutput(rec, time.Second)
				rend := rc.make(o, sc)
				var golden bytes.Buffer
				mark := 0
				started := false
				for _, st := range sc.steps {
					var err error
					label := st.kind
					switch st.kind {
					case "start":
						err = rend.Start()
						started = true
					case "frame":
						f := sc.frames[st.frame]
						raw, _ := json.Marshal(f)
						err = rend.Frame(&Frame{Response: f, Raw: raw, StreamSeq: uint64(st.frame + 1)})
						label = fmt.Sprintf("frame %d", f.Sequence)
					case "heartbeat":
						err = rend.Heartbeat()
					case "end":
						err = rend.End(st.err)
						if st.err != nil {
							label = "end: " + st.err.Error()
						}
					}
					if err != nil {
						t.Fatalf("%s: %v", label, err)
					}
					if err := o.Flush(); err != nil {
						t.Fatal(err)
					}
					out := rec.Body.Bytes()[mark:]
					mark = rec.Body.Len()
					fmt.Fprintf(&golden, "### %s\n%s", label, out)
					if len(out) > 0 && out[len(out)-1] != '\n' {
						golden.WriteString("\n")
					}
				}
				res := rec.Result()
				head := fmt.Sprintf("# status %d\n", res.StatusCode)
				for _, h := range []string{"Content-Type", "Cache-Control", "X-Accel-Buffering"} {
					if v := res.Header.Get(h); v != "" {
						head += fmt.Sprintf("# %s: %s\n", h, v)
					}
				}
				got := head + golden.String()
				path := filepath.Join("testdata", rc.name, sc.name+".golden")
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if got != string(want) {
					t.Errorf("output differs from %s (run with -update after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
				}
				// Invariants shared by every renderer.
				if started && rc.sse {
					for h, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
						if res.Header.Get(h) != v {
							t.Errorf("%s = %q, want %q", h, res.Header.Get(h), v)
						}
					}
				}
				if rec.Body.Len() == 0 {
					t.Errorf("nothing written")
				}
				if rc.sse && res.Header.Get("Content-Type") == "text/event-stream" {
					checkSSESyntax(t, rec.Body.Bytes())
				}
				rc.check(t, sc, res.StatusCode, rec.Body.Bytes())
			})
		}
	}
}

// checkTextOnly: with acceptedOutputModes ["text/plain"] no DataPart is
// sent (they are dropped), besides what check requires.
func checkTextOnly(check func(t *testing.T, sc scenario, status int, body []byte)) func(t *testing.T, sc scenario, status int, body []byte) {
	return func(t *testing.T, sc scenario, status int, body []byte) {
		t.Helper()
		if bytes.Contains(body, []byte(`"kind":"data"`)) {
			t.Errorf("a DataPart for a text/plain client:\n%s", body)
		}
		check(t, sc, status, body)
	}
}

// checkBasic: without the interaction-spec extension no thought part and
// no function_call/function_response DataPart is sent.
func checkBasic(check func(t *testing.T, sc scenario, status int, body []byte)) func(t *testing.T, sc scenario, status int, body []byte) {
	return func(t *testing.T, sc scenario, status int, body []byte) {
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
// is one JSON value, events end with a blank line.
func checkSSESyntax(t *testing.T, body []byte) {
	t.Helper()
	if len(body) > 0 && !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Errorf("SSE body does not end with a blank line")
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "", strings.HasPrefix(l, ": "), strings.HasPrefix(l, "id: "), strings.HasPrefix(l, "event: "), strings.HasPrefix(l, "retry: "):
		case strings.HasPrefix(l, "data: "):
			if !json.Valid([]byte(l[6:])) {
				t.Errorf("data is not JSON: %s", l)
			}
		default:
			t.Errorf("bad SSE line %q", l)
		}
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
	var out [][]byte
	for _, l := range bytes.Split(body, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		if !json.Valid(l) {
			t.Fatalf("line is not JSON: %s", l)
		}
		out = append(out, l)
	}
	return out
}

func wantErr(sc scenario) error {
	for _, st := range sc.steps {
		if st.kind == "end" {
			return st.err
		}
	}
	return nil
}

func rendered(sc scenario) []*e2a.Response {
	var out []*e2a.Response
	for _, st := range sc.steps {
		if st.kind == "frame" {
			out = append(out, sc.frames[st.frame])
		}
	}
	return out
}

func checkE2ASSE(t *testing.T, sc scenario, status int, body []byte) {
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

func checkE2ANDJSON(t *testing.T, sc scenario, status int, body []byte) {
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

func checkE2AJSON(t *testing.T, sc scenario, status int, body []byte) {
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
	if sc.final != (status == 200) {
		t.Errorf("status %d for final=%v", status, sc.final)
	}
}

// checkA2AStream: every data: is a JSON-RPC response with the request's id
// whose result decodes as an A2A event; a finished stream ends with a final
// status-update.
func checkA2AStream(t *testing.T, sc scenario, status int, body []byte) {
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
	if sc.final {
		if !isClosing(last) {
			t.Errorf("stream does not end with a final event: %#v", last)
		}
	}
}

func checkA2ASend(t *testing.T, sc scenario, status int, body []byte) {
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
	switch sc.name {
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

func checkAgentVault(t *testing.T, sc scenario, status int, body []byte) {
	evs := sseData(t, body)
	for _, ev := range evs {
		switch ev.Event {
		case "task_status", "task_message", "task_artifact", "error":
		default:
			t.Errorf("event %q", ev.Event)
		}
	}
	if sc.final {
		var st AVStatusEvent
		last := evs[len(evs)-1]
		if err := json.Unmarshal([]byte(last.Data), &st); err != nil || last.Event != "task_status" ||
			(st.State != AVCompleted && st.State != AVFailed && st.State != AVCanceled) {
			t.Errorf("last event %+v", last)
		}
	}
	if wantErr(sc) != nil && evs[len(evs)-1].Event != "error" {
		t.Errorf("no error event")
	}
}

// checkACP: notifications decode as acp.SessionNotification, the last
// message is the response to id 42 with a stopReason or an error.
func checkACP(t *testing.T, sc scenario, status int, body []byte) {
	var msgs [][]byte
	if bytes.Contains(body, []byte("data: ")) {
		for _, ev := range sseData(t, body) {
			msgs = append(msgs, []byte(ev.Data))
		}
	} else {
		msgs = ndjsonLines(t, body)
	}
	for i, m := range msgs {
		var probe struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *jsonrpc.Error  `json:"error"`
		}
		if err := json.Unmarshal(m, &probe); err != nil {
			t.Fatal(err)
		}
		if i < len(msgs)-1 || (!sc.final && wantErr(sc) == nil) {
			var n acp.SessionNotification
			if probe.Method != "session/update" || json.Unmarshal(probe.Params, &n) != nil || n.SessionId != "s1" {
				t.Errorf("message %d is not a session/update: %s", i, m)
			}
			continue
		}
		if string(probe.ID) != "42" {
			t.Errorf("response id %s", probe.ID)
		}
		if probe.Error == nil {
			var pr acp.PromptResponse
			if err := json.Unmarshal(probe.Result, &pr); err != nil || pr.StopReason == "" {
				t.Errorf("result %s", probe.Result)
			}
		}
	}
}

func checkA2E(t *testing.T, sc scenario, status int, body []byte) {
	lines := ndjsonLines(t, body)
	var seq int64 = -1
	for i, l := range lines {
		var m A2EMessage
		if err := json.Unmarshal(l, &m); err != nil || m.A2E != "1.0" || m.ReqID != "a1b2c3" {
			t.Fatalf("line %d: %s", i, l)
		}
		switch m.Type {
		case A2EEventType:
			if m.Seq == nil || *m.Seq <= seq {
				t.Errorf("seq not increasing: %s", l)
			} else {
				seq = *m.Seq
			}
		case "tool/call/resp":
			if i != len(lines)-1 {
				t.Errorf("response before the end")
			}
		case A2EErrorType:
			if m.Retryable == nil || m.Code == "" || m.CapabilityName != "tool" {
				t.Errorf("error %s", l)
			}
		default:
			t.Errorf("type %q", m.Type)
		}
	}
}
