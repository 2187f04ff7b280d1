package httpagent

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestParseFrameDefaults: is_final and status default by kind, and what
// the upstream sets is kept.
func TestParseFrameDefaults(t *testing.T) {
	for _, c := range []struct {
		in            string
		kind, status  string
		final         bool
		wantErrSubstr string
	}{
		{in: `{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"a"}}`, kind: e2a.KindChunk, status: e2a.StatusInProgress},
		{in: `{"response_kind":"e2a.complete","body":{"result":1}}`, kind: e2a.KindComplete, status: e2a.StatusSucceeded, final: true},
		{in: `{"response_kind":"e2a.error","body":{"code":"x","message":"y"}}`, kind: e2a.KindError, status: e2a.StatusFailed, final: true},
		{in: `{"response_kind":"acp.prompt_result","body":{"stopReason":"end_turn"}}`, kind: e2a.KindACPPromptRes, status: e2a.StatusSucceeded, final: true},
		{in: `{"response_kind":"acp.jsonrpc_error","body":{"code":1,"message":"m"}}`, kind: e2a.KindACPJSONRPCErr, status: e2a.StatusFailed, final: true},
		{in: `{"response_kind":"a2a.stream_event","is_final":true,"body":{"branch":"status_update","payload":{}}}`, kind: e2a.KindA2AStreamEvent, status: e2a.StatusSucceeded, final: true},
		{in: `{"response_kind":"a2a.stream_event","body":{"branch":"message","payload":{}}}`, kind: e2a.KindA2AStreamEvent, status: e2a.StatusInProgress},
		// A status update asking for input or auth ends the turn (agent.Interrupt's frame), final by default.
		{in: `{"response_kind":"a2a.stream_event","body":{"branch":"status_update","payload":{"kind":"status-update","status":{"state":"input-required",` +
			`"message":{"kind":"message","role":"agent","parts":[{"kind":"text","text":"Which city?"}]}},"final":true}}}`,
			kind: e2a.KindA2AStreamEvent, status: e2a.StatusSucceeded, final: true},
		{in: `{"response_kind":"a2a.stream_event","body":{"branch":"status_update","payload":{"status":{"state":"TASK_STATE_AUTH_REQUIRED"}}}}`,
			kind: e2a.KindA2AStreamEvent, status: e2a.StatusSucceeded, final: true},
		{in: `{"response_kind":"a2a.task","body":{"id":"t","status":{"state":"input-required"}}}`, kind: e2a.KindA2ATask, status: e2a.StatusSucceeded, final: true},
		{in: `{"response_kind":"a2a.stream_event","body":{"branch":"status_update","payload":{"status":{"state":"working"}}}}`,
			kind: e2a.KindA2AStreamEvent, status: e2a.StatusInProgress},
		{in: `{"response_kind":"a2a.stream_event","is_final":false,"body":{"branch":"status_update","payload":{"status":{"state":"input-required"}}}}`,
			kind: e2a.KindA2AStreamEvent, status: e2a.StatusInProgress},
		// What the upstream says wins; the pipeline's own members are ignored.
		{in: `{"protocol_version":"9","sequence":77,"request_id":"other","response_kind":"e2a.complete","is_final":false,"status":"in_progress","body":{}}`,
			kind: e2a.KindComplete, status: e2a.StatusInProgress},
		{in: `{"response_kind":null,"body":{}}`, wantErrSubstr: "no response_kind"},
		{in: `{"body":{}}`, wantErrSubstr: "no response_kind"},
		{in: `{"response_kind":"e2a.nope","body":{}}`, wantErrSubstr: "unknown"},
		{in: `{"response_kind":"e2a.complete"}`, wantErrSubstr: "body must be a JSON object"},
		{in: `{"response_kind":"e2a.complete","body":[1]}`, wantErrSubstr: "body must be a JSON object"},
		{in: `{"response_kind":"e2a.complete","body":{},"is_final":"yes"}`, wantErrSubstr: "is_final"},
		{in: `{"response_kind":"e2a.complete","body":{},"status":3}`, wantErrSubstr: "status must be a string"},
		{in: `{"response_kind":1,"body":{}}`, wantErrSubstr: "response_kind must be a string"},
		{in: `[1,2]`, wantErrSubstr: "not a JSON object"},
		{in: `{"response_kind":"e2a.complete","body":{}} trailing`, wantErrSubstr: "not JSON"},
		{in: "{\"response_kind\":\"e2a.complete\",\"body\":{\"result\":\"\xff\"}}", wantErrSubstr: "UTF-8"},
		{in: `{"response_kind":"e2a.complete","body":` + strings.Repeat(`{"a":`, e2a.MaxNesting) + `1` + strings.Repeat(`}`, e2a.MaxNesting) + `}`, wantErrSubstr: "nest"},
	} {
		f, err := parseFrame([]byte(c.in), nil)
		if c.wantErrSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErrSubstr) {
				t.Errorf("%.60s: err %v, want %q", c.in, err, c.wantErrSubstr)
			}
			continue
		}
		if err != nil || f.kind != c.kind || f.status != c.status || f.final != c.final {
			t.Errorf("%.60s: %+v %v, want %s %s final=%v", c.in, f, err, c.kind, c.status, c.final)
		}
	}
}

// TestIsFrame: only an object with a response_kind member is a frame (the
// member's name exactly).
func TestIsFrame(t *testing.T) {
	for in, want := range map[string]bool{
		`{"response_kind":"e2a.complete","body":{}}`: true,
		`{"response_kind":null}`:                     true,
		`{"Response_Kind":"e2a.complete"}`:           false,
		`{"reply":"hi"}`:                             false,
		`"response_kind"`:                            false,
		`["response_kind"]`:                          false,
	} {
		if got := isFrame([]byte(in)); got != want {
			t.Errorf("isFrame(%s) = %v", in, got)
		}
	}
}

func frames(t *testing.T, src frameSource) (out []string, end error) {
	t.Helper()
	for range 100 {
		b, err := src.next()
		if err != nil {
			return out, err
		}
		out = append(out, string(b))
	}
	t.Fatal("no end")
	return nil, nil
}

// TestNDJSONReader: lines with LF or CRLF, blank lines skipped, a last
// line without its line feed kept when whole and reported truncated when
// not, a line over the bound refused.
func TestNDJSONReader(t *testing.T) {
	read := func(s string, max int) ([]string, error) {
		return frames(t, newNDJSONReader(bufio.NewReaderSize(strings.NewReader(s), 16), max))
	}
	got, end := read("{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\":3}", 100)
	if strings.Join(got, "|") != `{"a":1}|{"b":2}|{"c":3}` || !errors.Is(end, io.EOF) {
		t.Fatalf("got %q, %v", got, end)
	}
	got, end = read("{\"a\":1}\n{\"b\":", 100)
	if len(got) != 1 || !errors.Is(end, errTruncated) {
		t.Fatalf("cut line: %q, %v", got, end)
	}
	got, end = read("{\"a\":1}\n\n", 100)
	if len(got) != 1 || !errors.Is(end, io.EOF) {
		t.Fatalf("clean end: %q, %v", got, end)
	}
	long := `{"a":"` + strings.Repeat("x", 200) + `"}`
	if _, end = read(long+"\n", 100); !errors.Is(end, ErrFrameTooLarge) {
		t.Fatalf("long line: %v", end)
	}
	if got, end = read(long+"\n", len(long)); len(got) != 1 || !errors.Is(end, io.EOF) {
		t.Fatalf("line at the bound: %d, %v", len(got), end)
	}
}

// TestSSEReader: data lines joined, other fields and comments ignored,
// the last event kept without its blank line when whole, cut otherwise,
// an event over the bound refused.
func TestSSEReader(t *testing.T) {
	read := func(s string, max int) ([]string, error) {
		return frames(t, newSSEReader(bufio.NewReaderSize(strings.NewReader(s), 16), max))
	}
	got, end := read(": hello\nretry: 10\nevent: frame\nid: 7\ndata: {\"a\":\ndata:1}\n\n\n\ndata: {\"b\":2}\r\n\r\nevent: x\n\ndata: {\"c\":3}\n", 100)
	if strings.Join(got, "|") != "{\"a\":\n1}|{\"b\":2}|{\"c\":3}" || !errors.Is(end, io.EOF) {
		t.Fatalf("got %q, %v", got, end)
	}
	if got, end = read("data: {\"a\":1}\n\ndata: {\"b\"", 100); len(got) != 1 || !errors.Is(end, errTruncated) {
		t.Fatalf("cut event: %q, %v", got, end)
	}
	if _, end = read("data: "+strings.Repeat("x", 60)+"\ndata: "+strings.Repeat("y", 60)+"\n\n", 100); !errors.Is(end, ErrFrameTooLarge) {
		t.Fatalf("large event: %v", end)
	}
}

// TestOptions: every option refuses bad values with
// bridge.ErrInvalidOption.
func TestOptions(t *testing.T) {
	c, err := bridge.NewClient("http://127.0.0.1:1/agent")
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]Option{
		"frame bytes 0":    WithMaxFrameBytes(0),
		"frame bytes 1023": WithMaxFrameBytes(1023),
		"frame bytes huge": WithMaxFrameBytes(65<<20 + 1),
		"frames 0":         WithMaxFrames(0),
		"frames huge":      WithMaxFrames(maxFrames + 1),
		"nil logger":       WithLogger(nil),
		"history no pool":  WithHistory("", &bridge.Conversations{}),
		"history no store": WithHistory("p", nil),
		"negative turns":   WithMaxHistoryTurns(-1),
		"too many turns":   WithMaxHistoryTurns(bridge.MaxTurns + 1),
	} {
		if _, err := New(c, o); !errors.Is(err, bridge.ErrInvalidOption) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New(nil); !errors.Is(err, bridge.ErrInvalidOption) {
		t.Errorf("nil client: %v", err)
	}
	u, err := New(c, WithMaxFrameBytes(minFrameBytes), WithMaxFrames(1))
	if err != nil || u.Name() != "http http://127.0.0.1:1" {
		t.Fatalf("New: %v, %v", u, err)
	}
}

// TestParseFrameMetadata: an object is kept, null is none, anything else
// is refused.
func TestParseFrameMetadata(t *testing.T) {
	f, err := parseFrame([]byte(`{"response_kind":"e2a.complete","body":{},"metadata":{"llm_response_id":"r1"}}`), nil)
	if err != nil || string(f.meta) != `{"llm_response_id":"r1"}` {
		t.Fatalf("%q %v", f.meta, err)
	}
	if f, err = parseFrame([]byte(`{"response_kind":"e2a.complete","body":{},"metadata":null}`), nil); err != nil || f.meta != nil {
		t.Fatalf("null: %q %v", f.meta, err)
	}
	if _, err = parseFrame([]byte(`{"response_kind":"e2a.complete","body":{},"metadata":"x"}`), nil); err == nil {
		t.Fatal("a string metadata was taken")
	}
}

// TestUnknownKindScrubbedBeforeCut: a frame's unknown kind, quoted in the
// error cut to 100 characters, has the bridge's credentials taken out
// before the cut: a key the cut splits would be found by no later scrub.
func TestUnknownKindScrubbedBeforeCut(t *testing.T) {
	const key = "sk-kind-0123456789abcdef"
	scrub := func(s string) string { return strings.ReplaceAll(s, key, "[redacted]") }
	kind := strings.Repeat("k", 100-len(" Bearer ")-10) + " Bearer " + key
	_, err := parseFrame([]byte(`{"response_kind":"`+kind+`","body":{}}`), scrub)
	if err == nil || strings.Contains(err.Error(), key[:4]) {
		t.Errorf("unknown kind: %v; want the key redacted before the cut", err)
	}
	if got := clip("text/html; "+key, scrub); got != "text/html; [redacted]" {
		t.Errorf("clip: %q", got)
	}
}

// TestA2ABody: the A2A object of an a2a.* frame is the request's: the
// ids an agent names in status and artifact updates and messages (both
// spellings) are taken out (the renderers give them the request's), a
// task's are the request's own; a frame naming none is written as it
// came; a payload the A2A renderers cannot read is refused.
func TestA2ABody(t *testing.T) {
	env := &e2a.Envelope{RequestID: "req-1", TaskID: "task-1", ContextID: "ctx-1"}
	for _, c := range []struct {
		kind, in, want string
	}{
		{e2a.KindA2AStreamEvent,
			`{"branch":"status_update","payload":{"kind":"status-update","taskId":"x","context_id":"y","status":{"state":"working","message":{"kind":"message","role":"agent","messageId":"m","taskId":"x","contextId":"y","parts":[{"kind":"text","text":"a<b"}]}}}}`,
			`{"branch":"status_update","payload":{"kind":"status-update","status":{"message":{"kind":"message","messageId":"m","parts":[{"kind":"text","text":"a<b"}],"role":"agent"},"state":"working"}}}`},
		{e2a.KindA2AStreamEvent,
			`{"branch":"artifact_update","payload":{"task_id":"x","contextId":"y","artifact":{"artifactId":"a","parts":[{"kind":"text","text":"t"}]}}}`,
			`{"branch":"artifact_update","payload":{"artifact":{"artifactId":"a","parts":[{"kind":"text","text":"t"}]}}}`},
		{e2a.KindA2AStreamEvent,
			`{"branch":"task","payload":{"id":"x","contextId":"y","status":{"state":"completed"}}}`,
			`{"branch":"task","payload":{"contextId":"ctx-1","id":"task-1","status":{"state":"completed"}}}`},
		{e2a.KindA2AMessage,
			`{"kind":"message","role":"agent","messageId":"m","taskId":"x","parts":[{"kind":"text","text":"hi"}]}`,
			`{"kind":"message","messageId":"m","parts":[{"kind":"text","text":"hi"}],"role":"agent"}`},
		{e2a.KindA2AStreamEvent, // nothing of the agent's: as it came
			`{"branch":"status_update","payload":{"status":{"state":"working"}}}`,
			`{"branch":"status_update","payload":{"status":{"state":"working"}}}`},
		{e2a.KindChunk, `{"delta_kind":"text","delta":"taskId"}`, `{"delta_kind":"text","delta":"taskId"}`},
	} {
		got, err := a2aBody(c.kind, json.RawMessage(c.in), env)
		if err != nil || string(got) != c.want {
			t.Errorf("%s %s:\n got %s, %v\nwant %s", c.kind, c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		`{"branch":"status_update","payload":{"status":42}}`,
		`{"branch":"status_update","payload":"working"}`,
		`{"branch":"artifact_update","payload":{"artifact":{"parts":"x"}}}`,
		`{"branch":"task","payload":{"status":{"state":7}}}`,
	} {
		if _, err := a2aBody(e2a.KindA2AStreamEvent, json.RawMessage(in), env); !errors.Is(err, errNotA2A) {
			t.Errorf("%s: %v, want errNotA2A", in, err)
		}
	}
	// The task of a request without a task or context id is its request's.
	got, _ := a2aBody(e2a.KindA2ATask, json.RawMessage(`{"id":"x","status":{"state":"working"}}`), &e2a.Envelope{RequestID: "req-2"})
	if string(got) != `{"contextId":"req-2","id":"req-2","status":{"state":"working"}}` {
		t.Errorf("task without ids: %s", got)
	}
}
