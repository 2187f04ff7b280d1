package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// metaLLMResponseID is the metadata key of the LLM response a chunk is
// part of (A2A groups artifacts by it).
const metaLLMResponseID = "llm_response_id"

// Step is one call of the conformance driver on a renderer.
type Step struct {
	// Kind is the call: StepStart, StepFrame, StepHeartbeat or StepEnd.
	Kind string
	// Frame is the index in Scenario.Frames of a StepFrame's frame.
	Frame int
	// Err is the error a StepEnd ends with (nil: after the final frame).
	Err error
}

// The kinds of [Step].
const (
	StepStart     = "start"
	StepFrame     = "frame"
	StepHeartbeat = "heartbeat"
	StepEnd       = "end"
)

// Scenario is a sequence of frames built from the specification examples,
// and the driver calls that render it: the input every renderer
// conformance case is run over (egress's own and those of the protocol
// packages), one golden file per case and scenario.
type Scenario struct {
	Name   string
	Frames []*e2a.Response
	// From is the resume point (the first sequence rendered).
	From  int64
	Steps []Step
	// Final reports that the steps include the final frame.
	Final bool
}

// fixedNow is the time of the scenarios' frames (the first at fixedNow,
// each next one second later).
var fixedNow = time.Date(2025, 1, 23, 10, 30, 0, 0, time.UTC)

// Time is the time the scenarios' first frame carries (each
// next one a second later): a suite fixes its renderer's clock to it.
func Time() time.Time { return fixedNow }

// RequestID returns the request id of the scenario's frames ("nope" for a
// scenario without frames).
func (sc Scenario) RequestID() string {
	if len(sc.Frames) > 0 {
		return sc.Frames[0].RequestID
	}
	return "nope"
}

// Frame builds frame seq of request id as the scenarios do (the
// scenarios' task, context, session and JSON-RPC id; its time
// Time plus seq seconds), for a package's own renderer tests.
func Frame(id string, seq int64, kind, status string, final bool, body any, meta map[string]any) *e2a.Response {
	return frameAt(id, seq, kind, status, final, body, meta)
}

// Chunk is Frame of an in-progress e2a.chunk of
// delta kind dk, with llm_response_id llm when it is not empty.
func Chunk(id string, seq int64, dk string, delta any, llm string) *e2a.Response {
	return chunkFrame(id, seq, dk, delta, llm)
}

// TextFrames is a request's frames with hostile texts, runs of text split
// by reasoning and tool chunks, with and without llm_response_id, odd
// metadata, a numeric delta and the final frame: the input of the text
// fast paths' differential tests (each protocol's fast path against its
// general path).
func TextFrames() []*e2a.Response {
	texts := []string{"Hello", " world", "", `"quoted" \ back`, "<b>&amp;</b>", "\u2028\u2029", "bad \xff utf8", "tab\tnl\n", "🙂 中文"}
	var frames []*e2a.Response
	seq := int64(0)
	add := func(f *e2a.Response) { f.Sequence = seq; seq++; frames = append(frames, f) }
	for i, txt := range texts {
		llm := ""
		if i%3 == 2 {
			llm = fmt.Sprintf("chatcmpl-%d", i/3)
		}
		add(chunkFrame("req-fast", 0, e2a.DeltaText, txt, llm))
		if i%4 == 3 {
			add(chunkFrame("req-fast", 0, e2a.DeltaReasoning, "thinking "+txt, ""))
		}
		if i == 5 {
			add(chunkFrame("req-fast", 0, e2a.DeltaTool, map[string]any{"type": "function_call", "id": "c1", "name": "f", "args": "{}"}, ""))
		}
	}
	// llm_response_id that is not a string, or under another case, is no
	// llm_response_id (metadata is a map: exact keys).
	odd := chunkFrame("req-fast", 0, e2a.DeltaText, "odd meta", "")
	odd.Metadata = map[string]any{metaLLMResponseID: 5, "LLM_RESPONSE_ID": "upper"}
	add(odd)
	// A numeric delta and a non-string one take the general path.
	add(chunkFrame("req-fast", 0, e2a.DeltaText, json.Number("42"), ""))
	add(frameAt("req-fast", 0, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "done"}}, nil))
	for i, f := range frames {
		f.ResponseID = fmt.Sprintf("rsp-%d", i)
	}
	return frames
}

// LabeledTextFrames is a request's text chunks of artifacts with a name or
// a description (metadata artifact_name, artifact_description: the A2A
// bridge's first chunk of an agent's named artifact; llm_response_id the
// artifact's id), one text that holds those keys in quotes, the chunks of
// an artifact "M" with metadata (artifact_metadata on its first chunk,
// LabelMetadata, and on a later one that changes it, LabelMetadataLater;
// artifact_part_metadata, PartLabelMetadata, on its text chunks and on a
// reasoning chunk of its own), and the final frame: the input of the
// text fast paths' tests that such chunks take the general path, and of
// the A2A renderers' that their events and the task carry the labels
// (artifact "M": its metadata LabelMetadata merged with
// LabelMetadataLater, its text "m1 m2 " and, after the reasoning
// chunk's artifact, "m3", each a part with PartLabelMetadata).
func LabeledTextFrames() []*e2a.Response {
	c := func(text, llm string, meta map[string]any) *e2a.Response {
		f := Frame("req-fast", 0, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text}, meta)
		if llm != "" {
			f.Metadata["llm_response_id"] = llm
		}
		return f
	}
	reasoning := c("thinking", "T", map[string]any{"artifact_part_metadata": PartLabelMetadata()})
	reasoning.Body = e2a.MarshalBody(e2a.ChunkBody{DeltaKind: e2a.DeltaReasoning, Delta: "thinking"})
	frames := []*e2a.Response{
		c("a1 ", "R", map[string]any{"artifact_name": "Report <1>", "artifact_description": `What "was" found.`}),
		c(`a2 "artifact_name": "x", "artifact_description", "artifact_metadata", "artifact_part_metadata"`, "R", map[string]any{"artifact_other": "y"}),
		c("b1 ", "", map[string]any{"artifact_description": "no id"}),
		c("a3", "R", map[string]any{}),
		c("m1 ", "M", map[string]any{"artifact_name": "Notes", "artifact_metadata": LabelMetadata(), "artifact_part_metadata": PartLabelMetadata()}),
		c("m2 ", "M", map[string]any{"artifact_part_metadata": PartLabelMetadata()}),
		reasoning,
		c("m3", "M", map[string]any{"artifact_metadata": LabelMetadataLater(), "artifact_part_metadata": PartLabelMetadata()}),
		Frame("req-fast", 0, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}, nil),
	}
	for i, f := range frames {
		f.Sequence, f.ResponseID = int64(i), fmt.Sprintf("rsp-%d", i)
	}
	return frames
}

// LabelMetadata is the artifact metadata of LabeledTextFrames' artifact
// "M" on its first chunk.
func LabelMetadata() map[string]any {
	return map[string]any{"source": "<x>", "labels": []any{"a", "b"}}
}

// LabelMetadataLater is the artifact metadata a later chunk of
// LabeledTextFrames' artifact "M" adds: it replaces "source".
func LabelMetadataLater() map[string]any { return map[string]any{"source": "later", "n": 2.0} }

// PartLabelMetadata is the part metadata of LabeledTextFrames' text and
// reasoning chunks of artifact "M" (and "T").
func PartLabelMetadata() map[string]any { return map[string]any{"lang": "en"} }

// UnreadableFrames is request id's frames around an a2a.stream_event whose
// payload is not the A2A object it names (a status_update whose status is
// 42): a text chunk "before ", then the event; with final the event ends
// the request (succeeded), else it is in progress and a text chunk
// "after" and the completed e2a.complete follow. An A2A renderer skips
// such an event and writes the text around it, or ends the answer failed
// (a2amap.UnreadableFinal its message) when the event is final.
func UnreadableFrames(id string, final bool) []*e2a.Response {
	bad := json.RawMessage(`{"branch":"status_update","payload":{"status":42}}`)
	status := e2a.StatusInProgress
	if final {
		status = e2a.StatusSucceeded
	}
	frames := []*e2a.Response{
		chunkFrame(id, 0, e2a.DeltaText, "before ", ""),
		frameAt(id, 1, e2a.KindA2AStreamEvent, status, final, bad, nil),
	}
	if final {
		return frames
	}
	return append(frames, chunkFrame(id, 2, e2a.DeltaText, "after", ""),
		frameAt(id, 3, e2a.KindComplete, e2a.StatusSucceeded, true, map[string]any{}, nil))
}

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
		meta = map[string]any{metaLLMResponseID: llm}
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
func specFrames() []*e2a.Response {
	lines := []string{
		`{"protocol_version":"1.0","response_id":"r1","request_id":"req_1","sequence":0,"is_final":false,"status":"in_progress","response_kind":"e2a.chunk","timestamp":"2026-03-29T12:00:00+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":"Hello"}}`,
		`{"protocol_version":"1.0","response_id":"r2","request_id":"req_1","sequence":1,"is_final":false,"status":"in_progress","response_kind":"e2a.chunk","timestamp":"2026-03-29T12:00:01+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":" world"}}`,
		`{"protocol_version":"1.0","response_id":"r3","request_id":"req_1","sequence":2,"is_final":true,"status":"succeeded","response_kind":"e2a.complete","timestamp":"2026-03-29T12:00:02+00:00","provenance":{"source_protocol":"e2a"},"body":{"result":{"content":"Hello world"}}}`,
	}
	var out []*e2a.Response
	for _, l := range lines {
		r, err := e2a.ResponseFromJSON([]byte(l))
		if err != nil {
			panic(err) // the lines are constants
		}
		out = append(out, r)
	}
	return out
}

func allFrames(frames []*e2a.Response, from int64) []Step {
	steps := []Step{{Kind: StepStart}}
	for i := range frames {
		if int64(i) >= from {
			steps = append(steps, Step{Kind: StepFrame, Frame: i})
		}
	}
	return append(steps, Step{Kind: StepEnd})
}

// Scenarios returns the scenarios of the renderer conformance suite: the
// streaming examples of the specifications (e2a-protocol.md §12.8, the
// trpc tool call), a resume, code execution, a single message, an error,
// a cancel, turns interrupted for input and for authorization, native ACP
// and A2A frames, an unknown request and a timeout.
func Scenarios() []Scenario {
	var out []Scenario
	spec := specFrames()
	s := allFrames(spec, 0)
	s = append([]Step{s[0], {Kind: StepHeartbeat}}, s[1:]...) // a heartbeat before the first frame
	out = append(out, Scenario{Name: "spec_12_8", Frames: spec, Steps: s, Final: true})

	tc := toolCallFrames()
	out = append(out, Scenario{Name: "trpc_tool_call", Frames: tc, Steps: allFrames(tc, 0), Final: true})
	out = append(out, Scenario{Name: "resume_from_3", Frames: tc, From: 3, Steps: allFrames(tc, 3), Final: true})

	// One model call that reasons, then answers: the same completion id
	// (an OpenAI-compatible server's stream through the bridge), so one
	// artifact; a client without the interaction extension is shown it
	// from its first text update, which starts it (append false).
	id := "req_reason"
	reason := []*e2a.Response{
		chunkFrame(id, 0, e2a.DeltaReasoning, "The user greets me.", "chatcmpl-r1"),
		chunkFrame(id, 1, e2a.DeltaText, "Hello", "chatcmpl-r1"),
		chunkFrame(id, 2, e2a.DeltaText, " there.", "chatcmpl-r1"),
		frameAt(id, 3, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "Hello there."}}, nil),
	}
	out = append(out, Scenario{Name: "reasoning_then_text", Frames: reason, Steps: allFrames(reason, 0), Final: true})

	id = "req_code"
	code := []*e2a.Response{
		chunkFrame(id, 0, e2a.DeltaCustom, map[string]any{"type": "executable_code", "code": "print(6*7)", "language": "python"}, "chatcmpl-c1"),
		chunkFrame(id, 1, e2a.DeltaCustom, map[string]any{"type": "code_execution_result", "output": "42", "outcome": "OUTCOME_OK"}, "chatcmpl-c1"),
		chunkFrame(id, 2, e2a.DeltaText, "The answer is 42.", "chatcmpl-c2"),
		frameAt(id, 3, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "The answer is 42."}}, nil),
	}
	out = append(out, Scenario{Name: "code_execution", Frames: code, Steps: allFrames(code, 0), Final: true})

	id = "req_single"
	single := []*e2a.Response{
		frameAt(id, 0, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "The current temperature in Beijing is 20°C."}}, map[string]any{metaLLMResponseID: "chatcmpl-ghi789"}),
	}
	out = append(out, Scenario{Name: "single_message", Frames: single, Steps: allFrames(single, 0), Final: true})

	id = "req_err"
	errFrames := []*e2a.Response{
		chunkFrame(id, 0, e2a.DeltaText, "Partial", ""),
		frameAt(id, 1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: "handler_error", Message: "model overloaded", Retryable: true, Details: map[string]any{"upstream": "llm"}}, nil),
	}
	out = append(out, Scenario{Name: "error", Frames: errFrames, Steps: allFrames(errFrames, 0), Final: true})

	id = "req_cancel"
	cancel := []*e2a.Response{
		chunkFrame(id, 0, e2a.DeltaText, "Working on it", ""),
		frameAt(id, 1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: e2a.ErrCodeCancelled, Message: "cancelled by the client"}, nil),
	}
	out = append(out, Scenario{Name: "cancel", Frames: cancel, Steps: allFrames(cancel, 0), Final: true})

	// Interrupted turns (agent.Interrupt, e2a.InterruptBody): the agent
	// thinks, says a little, then ends its turn asking for input; another
	// asks for authorization at once.
	id = "req_input"
	input := []*e2a.Response{
		chunkFrame(id, 0, e2a.DeltaReasoning, "The user did not say which city.", ""),
		chunkFrame(id, 1, e2a.DeltaText, "I can look up the weather.", ""),
		frameAt(id, 2, e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, e2a.InterruptBody(e2a.StateInputRequired, "Which city?"), nil),
	}
	out = append(out, Scenario{Name: "input_required", Frames: input, Steps: allFrames(input, 0), Final: true})
	id = "req_auth"
	auth := []*e2a.Response{
		frameAt(id, 0, e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, e2a.InterruptBody(e2a.StateAuthRequired, "Sign in to your calendar to go on."), nil),
	}
	out = append(out, Scenario{Name: "auth_required", Frames: auth, Steps: allFrames(auth, 0), Final: true})

	id = "req_acp"
	acpFrames := []*e2a.Response{
		frameAt(id, 0, e2a.KindACPSessionUpd, e2a.StatusInProgress, false, map[string]any{"sessionId": "s1", "update": map[string]any{"sessionUpdate": "agent_thought_chunk", "content": map[string]any{"type": "text", "text": "Planning"}}}, nil),
		frameAt(id, 1, e2a.KindACPSessionUpd, e2a.StatusInProgress, false, map[string]any{"sessionUpdate": "plan", "entries": []any{map[string]any{"content": "read the file", "priority": "high", "status": "pending"}}}, nil),
		frameAt(id, 2, e2a.KindACPSessionUpd, e2a.StatusInProgress, false, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "read_file", "kind": "read", "status": "pending", "rawInput": map[string]any{"path": "a.txt"}}, nil),
		frameAt(id, 3, e2a.KindACPSessionUpd, e2a.StatusInProgress, false, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "rawOutput": map[string]any{"text": "hello"}}, nil),
		frameAt(id, 4, e2a.KindACPSessionUpd, e2a.StatusInProgress, false, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "The file says hello."}}, nil),
		frameAt(id, 5, e2a.KindACPPromptRes, e2a.StatusSucceeded, true, map[string]any{"stop_reason": "end_turn"}, nil),
	}
	out = append(out, Scenario{Name: "acp_native", Frames: acpFrames, Steps: allFrames(acpFrames, 0), Final: true})

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
	out = append(out, Scenario{Name: "a2a_native", Frames: a2aFrames, Steps: allFrames(a2aFrames, 0), Final: true})

	out = append(out, Scenario{Name: "not_found", Steps: []Step{{Kind: StepEnd, Err: fmt.Errorf("%w: %q", egress.ErrNotFound, "nope")}}})
	id = "req_slow"
	slow := []*e2a.Response{chunkFrame(id, 0, e2a.DeltaText, "Hello", "")}
	out = append(out, Scenario{Name: "timeout", Frames: slow, Steps: []Step{{Kind: StepStart}, {Kind: StepFrame}, {Kind: StepHeartbeat},
		{Kind: StepEnd, Err: fmt.Errorf("%w: request %q: waited 5m0s", egress.ErrWaitTimeout, id)}}})
	return out
}

// Result is what a renderer wrote for one scenario.
type Result struct {
	// Golden is the text compared with the golden file: the status, the
	// stream headers, then "### <step>" and what the step wrote.
	Golden []byte
	// Status, Header and Body are the whole response.
	Status int
	Header http.Header
	Body   []byte
	// Started reports that the driver called Start.
	Started bool
}

// Run renders sc with the renderer newRenderer builds on a
// recorded response (write timeout one second), flushing after every
// step. It returns the first error of a renderer call or flush.
func Run(sc Scenario, newRenderer render.NewRenderer) (*Result, error) {
	rec := host.NewRecorder()
	o := render.NewOutput(rec, time.Second)
	rend := newRenderer(o)
	var golden bytes.Buffer
	mark := 0
	run := &Result{}
	for _, st := range sc.Steps {
		var err error
		label := st.Kind
		switch st.Kind {
		case StepStart:
			err = rend.Start()
			run.Started = true
		case StepFrame:
			f := sc.Frames[st.Frame]
			raw, _ := json.Marshal(f)
			err = rend.Frame(&render.Frame{Response: f, Raw: raw, StreamSeq: uint64(st.Frame + 1)})
			label = fmt.Sprintf("frame %d", f.Sequence)
		case StepHeartbeat:
			err = rend.Heartbeat()
		case StepEnd:
			err = rend.End(st.Err)
			if st.Err != nil {
				label = "end: " + st.Err.Error()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		if err := o.Flush(); err != nil {
			return nil, err
		}
		out := rec.Body.Bytes()[mark:]
		mark = rec.Body.Len()
		fmt.Fprintf(&golden, "### %s\n%s", label, out)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			golden.WriteString("\n")
		}
	}
	status := rec.Status
	if status == 0 {
		status = http.StatusOK
	}
	head := fmt.Sprintf("# status %d\n", status)
	for _, h := range []string{"Content-Type", "Cache-Control", "X-Accel-Buffering"} {
		if v := rec.Header().Get(h); v != "" {
			head += fmt.Sprintf("# %s: %s\n", h, v)
		}
	}
	run.Golden = append([]byte(head), golden.Bytes()...)
	run.Status, run.Header, run.Body = status, rec.Header(), rec.Body.Bytes()
	return run, nil
}

// RenderFrames renders frames (stored at stream sequences 1, 2…) with the
// renderer newRenderer builds on a recorded response, after its Start,
// and returns what it wrote: each frame decoded, or (lazy) as a reader
// without decode gives it to an render.PassThrough renderer
// (render.HeadFrame). The
// text fast paths' differential tests compare the two paths' bytes with
// it.
func RenderFrames(newRenderer render.NewRenderer, frames []*e2a.Response, lazy bool) ([]byte, error) {
	rec := host.NewRecorder()
	rend := newRenderer(render.NewOutput(rec, time.Second))
	if err := rend.Start(); err != nil {
		return nil, err
	}
	for i, f := range frames {
		raw, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		fr := &render.Frame{Response: f, Raw: raw, StreamSeq: uint64(i + 1)}
		if lazy {
			if fr, err = render.HeadFrame(raw, uint64(i+1)); err != nil {
				return nil, err
			}
		}
		if err := rend.Frame(fr); err != nil {
			return nil, fmt.Errorf("frame %d: %w", i, err)
		}
	}
	return rec.Body.Bytes(), nil
}

// GoldenPath is where the golden file of a renderer case and scenario is,
// under a package's testdata directory: testdata/<case>/<scenario>.golden.
func GoldenPath(caseName, scenario string) string {
	return filepath.Join("testdata", caseName, scenario+".golden")
}

// MatchGolden compares got with the golden file at path; with update it
// first rewrites the file (go test -update).
func MatchGolden(path string, got []byte, update bool) error {
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			return err
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		return errors.New("output differs from " + path + " (run with -update after checking):\n--- got\n" + string(got) + "\n--- want\n" + string(want))
	}
	return nil
}

// NDJSONLines returns the records of an NDJSON body (blank lines, the
// heartbeats, skipped), or an error naming the first line that is not
// JSON.
func NDJSONLines(body []byte) ([][]byte, error) {
	var out [][]byte
	for _, l := range bytes.Split(body, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		if !json.Valid(l) {
			return nil, fmt.Errorf("line is not JSON: %s", l)
		}
		out = append(out, l)
	}
	return out, nil
}

// SSEData checks the syntax of an SSE body as the pipeline writes it
// (every line a field it writes or a comment, every data: one JSON value,
// the body ending with a blank line) and returns the data of its events in
// order; the error lists every line at fault.
func SSEData(body []byte) ([][]byte, error) {
	var out [][]byte
	var errs []error
	if len(body) > 0 && !bytes.HasSuffix(body, []byte("\n\n")) {
		errs = append(errs, errors.New("SSE body does not end with a blank line"))
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "", strings.HasPrefix(l, ": "), strings.HasPrefix(l, "id: "), strings.HasPrefix(l, "event: "), strings.HasPrefix(l, "retry: "):
		case strings.HasPrefix(l, "data: "):
			if !json.Valid([]byte(l[6:])) {
				errs = append(errs, fmt.Errorf("data is not JSON: %s", l))
			}
			out = append(out, []byte(l[6:]))
		default:
			errs = append(errs, fmt.Errorf("bad SSE line %q", l))
		}
	}
	return out, errors.Join(errs...)
}
