package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
)

// avScript is the agent of the AgentVault tests: what it does depends on
// the user's text. Every chunk is stored before the next is written
// (Sync), so that each is a frame of its own, as a model's tokens are.
func avScript(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	say := func(kind string, deltas ...any) error {
		for _, d := range deltas {
			if err := w.Chunk(kind, d); err != nil {
				return err
			}
			if err := w.Sync(); err != nil {
				return err
			}
		}
		return nil
	}
	llm := func(id string) error { return w.SetMetadata(map[string]any{"llm_response_id": id}) }
	switch text := env.ParamString("text"); {
	case text == "Paris": // the answer to "ask"
		if err := say(e2a.DeltaText, "Sunny in ", "Paris", "."); err != nil {
			return err
		}
		return w.Complete("Sunny in Paris.")
	case strings.HasPrefix(text, "stream"):
		steps := []func() error{
			func() error { return llm("r1") },
			func() error { return say(e2a.DeltaReasoning, "Let me ", "think.") },
			func() error { return say(e2a.DeltaText, "Hello", ", ", "world") },
			func() error {
				return say(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: "call_1", Name: "lookup", Args: map[string]any{"q": "x"}},
					e2a.ToolDelta{Type: e2a.ToolFunctionResponse, ID: "call_1", Name: "lookup", Response: "found"})
			},
			func() error {
				return say(e2a.DeltaCustom, map[string]any{"type": "executable_code", "code": "print(1+1)", "language": "python"})
			},
			func() error { return llm("r2") },
			func() error { return say(e2a.DeltaReasoning, "Now ", "sum up.") },
			func() error { return say(e2a.DeltaText, "Done", ".") },
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return err
			}
		}
		return w.Complete("Hello, worldDone.")
	case strings.HasPrefix(text, "think"): // reasoning and answer interleaved in one response
		if err := llm("r1"); err != nil {
			return err
		}
		for _, c := range [][2]string{{e2a.DeltaReasoning, "Let me "}, {e2a.DeltaText, "Hello"}, {e2a.DeltaReasoning, "think."}, {e2a.DeltaText, ", world"}} {
			if err := say(c[0], c[1]); err != nil {
				return err
			}
		}
		return w.Complete("Hello, world")
	case strings.HasPrefix(text, "ask"):
		if err := say(e2a.DeltaReasoning, "No city ", "given."); err != nil {
			return err
		}
		if err := say(e2a.DeltaText, "I can ", "look it up."); err != nil {
			return err
		}
		return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
	case strings.HasPrefix(text, "fail"):
		if err := say(e2a.DeltaText, "Part", "ial"); err != nil {
			return err
		}
		return w.Fail("model_down", "model overloaded", false)
	case strings.HasPrefix(text, "wait"):
		if err := say(e2a.DeltaText, "Work", "ing"); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return w.Complete("?")
}

// avClient calls the AgentVault profile on /a2a?agent=av as one principal.
type avClient struct {
	t   *testing.T
	url string
	key string
}

func (c avClient) post(method, params string, stream bool) *http.Response {
	c.t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":"req-1","method":%q,"params":%s}`, method, params)
	req, err := http.NewRequest(http.MethodPost, c.url+"/a2a?agent=av", strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", c.key)
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// call answers a JSON-RPC call: its result, or its error code.
func (c avClient) call(method, params string, result any) int {
	c.t.Helper()
	resp := c.post(method, params, false)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		c.t.Fatalf("%s: %v: %s", method, err, b)
	}
	if r.Error != nil {
		return r.Error.Code
	}
	if result != nil {
		if err := json.Unmarshal(r.Result, result); err != nil {
			c.t.Fatalf("%s result: %v: %s", method, err, b)
		}
	}
	return 0
}

func (c avClient) get(id string) a2a.AVTask {
	c.t.Helper()
	var task a2a.AVTask
	if code := c.call("tasks/get", `{"id":"`+id+`"}`, &task); code != 0 {
		c.t.Fatalf("tasks/get %s: error %d", id, code)
	}
	return task
}

// avSeen is what an AgentVault client rebuilds from a stream, event by
// event, as its Pydantic models read them: the messages added, the
// artifacts created or updated (by id, in the order first seen), the
// states.
type avSeen struct {
	taskID    string
	events    []string
	messages  []a2a.AVMessage
	artifacts []a2a.AVArtifact
	states    []string
	errors    []string
	lastID    string // the id of the last event with one
}

// add reads one SSE event into s; it reports whether it ends the stream
// (a final state or an error).
func (s *avSeen) add(t *testing.T, event, data string) bool {
	t.Helper()
	s.events = append(s.events, event)
	strict := func(v any) {
		d := json.NewDecoder(strings.NewReader(data))
		d.DisallowUnknownFields()
		if err := d.Decode(v); err != nil {
			t.Fatalf("%s event %s: %v", event, data, err)
		}
	}
	switch event {
	case "task_status":
		var e a2a.AVStatusEvent
		strict(&e)
		if s.taskID == "" {
			s.taskID = e.TaskID
		}
		s.states = append(s.states, e.State)
		return e.State != a2a.AVWorking && e.State != a2a.AVSubmitted
	case "task_message":
		var e a2a.AVMessageEvent
		strict(&e)
		s.messages = append(s.messages, e.Message)
	case "task_artifact":
		var e a2a.AVArtifactEvent
		strict(&e)
		for i, a := range s.artifacts {
			if a.ID == e.Artifact.ID {
				s.artifacts[i] = e.Artifact
				return false
			}
		}
		s.artifacts = append(s.artifacts, e.Artifact)
	case "error":
		s.errors = append(s.errors, data)
		return true
	default:
		t.Fatalf("event %q: %s", event, data)
	}
	return false
}

// readAV reads an AgentVault SSE answer, calling each(event so far) after
// every event, until it ends (a final state or an error) or the body does.
func readAV(t *testing.T, resp *http.Response, each func(*avSeen)) *avSeen {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &avSeen{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			s.lastID = strings.TrimPrefix(line, "id: ")
		case line == "" && event != "":
			end := s.add(t, event, data)
			event, data = "", ""
			if each != nil {
				each(s)
			}
			if end {
				return s
			}
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
	return s
}

func avJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

// agentMessages are the assistant messages of a task.
func agentMessages(task a2a.AVTask) []a2a.AVMessage {
	out := []a2a.AVMessage{}
	for _, m := range task.Messages {
		if m.Role == "assistant" {
			out = append(out, m)
		}
	}
	return out
}

// sameView fails the test unless what the streams showed (in order) is
// what tasks/get says: the same assistant messages in the same order, the
// same artifacts, the last state the task's.
func sameView(t *testing.T, task a2a.AVTask, streams ...*avSeen) {
	t.Helper()
	msgs, arts := []a2a.AVMessage{}, []a2a.AVArtifact{}
	state := ""
	for _, s := range streams {
		msgs = append(msgs, s.messages...)
		arts = append(arts, s.artifacts...)
		state = s.states[len(s.states)-1]
	}
	if got, want := avJSON(msgs), avJSON(agentMessages(task)); got != want {
		t.Errorf("the stream's messages\n%s\ntasks/get's\n%s", got, want)
	}
	if got, want := avJSON(arts), avJSON(task.Artifacts); got != want {
		t.Errorf("the stream's artifacts\n%s\ntasks/get's\n%s", got, want)
	}
	if state != task.State {
		t.Errorf("the stream ends %s, tasks/get says %s", state, task.State)
	}
}

func startAV(t *testing.T) (alice, bob avClient) {
	auth := pipetest.KeyAuth(t, map[string]string{"alice": "alice-key-0123456789", "bob": "bob-key-0123456789abc"}, nil)
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	p.Pool("av", agent.HandlerFunc(avScript))
	return avClient{t, p.URL, "alice-key-0123456789"}, avClient{t, p.URL, "bob-key-0123456789abc"}
}

func avText(s string) string {
	return `{"role":"user","parts":[{"type":"text","content":"` + s + `"}]}`
}

// TestAgentVaultStreamIsTheTask: what an AgentVault client rebuilds from
// tasks/sendSubscribe (a task_message is a message added, the spec's
// TaskMessageEvent; a task_artifact an artifact created or updated) is
// what tasks/get then answers for the same task: the streamed text of a
// message is one task_message, not one per chunk; the reasoning a message
// of its own (metadata thought), and a model response's reasoning and
// answer one message each however their chunks interleave; tool and other
// data artifacts of the ids tasks/get gives them. So for a completed
// turn, one whose response interleaves reasoning and answer, an
// interrupted one (input-required, the question a message as in
// tasks/get) and the
// second turn that answers it (tasks/send naming the task, then
// tasks/sendSubscribe of it), a failed turn and a canceled one. Another
// principal finds none of these tasks.
func TestAgentVaultStreamIsTheTask(t *testing.T) {
	alice, bob := startAV(t)
	var ids []string
	sendSubscribe := func(c avClient, params string) *avSeen {
		s := readAV(t, c.post("tasks/sendSubscribe", params, true), nil)
		if len(s.errors) > 0 || s.taskID == "" {
			t.Fatalf("stream errors %v, task %q", s.errors, s.taskID)
		}
		return s
	}

	t.Run("completed", func(t *testing.T) {
		s := sendSubscribe(alice, `{"message":`+avText("stream it")+`}`)
		id := s.taskID
		ids = append(ids, id)
		task := alice.get(id)
		sameView(t, task, s)
		if len(s.messages) != 4 {
			t.Errorf("%d task_message events, want 4 (reasoning and answer, twice): %s", len(s.messages), avJSON(s.messages))
		}
	})
	t.Run("reasoning and answer interleaved", func(t *testing.T) {
		s := sendSubscribe(alice, `{"message":`+avText("think it over")+`}`)
		ids = append(ids, s.taskID)
		sameView(t, alice.get(s.taskID), s)
		if len(s.messages) != 2 {
			t.Errorf("%d task_message events, want 2 (the response's reasoning, then its answer): %s", len(s.messages), avJSON(s.messages))
		}
	})
	t.Run("input-required, then the answer", func(t *testing.T) {
		var id string
		if code := alice.call("tasks/send", `{"message":`+avText("ask me")+`}`, &struct {
			ID *string `json:"id"`
		}{&id}); code != 0 || id == "" {
			t.Fatalf("tasks/send: %d %q", code, id)
		}
		ids = append(ids, id)
		first := sendSubscribe(alice, `{"id":"`+id+`"}`)
		task := alice.get(id)
		if task.State != a2a.AVInputRequired {
			t.Fatalf("state %s", task.State)
		}
		sameView(t, task, first)
		if code := alice.call("tasks/send", `{"id":"`+id+`","message":`+avText("Paris")+`}`, nil); code != 0 {
			t.Fatalf("the answer: error %d", code)
		}
		second := sendSubscribe(alice, `{"id":"`+id+`"}`)
		task = alice.get(id)
		if task.State != a2a.AVCompleted {
			t.Fatalf("state %s after the answer", task.State)
		}
		sameView(t, task, first, second)
		var users []string
		for _, m := range task.Messages {
			if m.Role == "user" {
				users = append(users, fmt.Sprint(m.Parts[0].Content))
			}
		}
		if strings.Join(users, "|") != "ask me|Paris" {
			t.Errorf("user messages %q", users)
		}
	})
	t.Run("failed", func(t *testing.T) {
		s := readAV(t, alice.post("tasks/sendSubscribe", `{"message":`+avText("fail now")+`}`, true), nil)
		id := s.taskID
		ids = append(ids, id)
		task := alice.get(id)
		if task.State != a2a.AVFailed {
			t.Fatalf("state %s", task.State)
		}
		sameView(t, task, s)
	})
	t.Run("canceled", func(t *testing.T) {
		var id string
		if code := alice.call("tasks/send", `{"message":`+avText("wait a bit")+`}`, &struct {
			ID *string `json:"id"`
		}{&id}); code != 0 || id == "" {
			t.Fatalf("tasks/send: %d %q", code, id)
		}
		ids = append(ids, id)
		canceled := false
		s := readAV(t, alice.post("tasks/sendSubscribe", `{"id":"`+id+`"}`, true), func(s *avSeen) {
			if !canceled && len(s.states) > 0 && s.states[0] == a2a.AVWorking {
				canceled = true
				var res a2a.AgentVaultCancelResult
				if code := alice.call("tasks/cancel", `{"id":"`+id+`"}`, &res); code != 0 || !res.Success {
					t.Errorf("tasks/cancel: %d %+v", code, res)
				}
			}
		})
		task := alice.get(id)
		if task.State != a2a.AVCanceled {
			t.Fatalf("state %s: %s", task.State, avJSON(s))
		}
		sameView(t, task, s)
	})
	// Every answer is the principal's: bob finds none of alice's tasks.
	for _, id := range ids {
		if code := bob.call("tasks/get", `{"id":"`+id+`"}`, nil); code != -32001 {
			t.Errorf("bob's tasks/get of alice's %s: %d, want -32001", id, code)
		}
		if code := bob.call("tasks/cancel", `{"id":"`+id+`"}`, nil); code != -32001 {
			t.Errorf("bob's tasks/cancel of alice's %s: %d, want -32001", id, code)
		}
		resp := bob.post("tasks/sendSubscribe", `{"id":"`+id+`"}`, true)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(b, []byte("-32001")) || bytes.Contains(b, []byte("task_message")) {
			t.Errorf("bob's tasks/sendSubscribe of alice's %s: %s", id, b)
		}
	}
}

// TestAgentVaultUserDataMessageKept: tasks/get's messages hold the user's
// message whatever its parts, and its artifacts are the agent's only. A
// message of one data part ({"type":"data","content":{...}}) was missing
// from the messages, its data listed as an artifact under the task's id,
// as if the agent had made it.
func TestAgentVaultUserDataMessageKept(t *testing.T) {
	alice, _ := startAV(t)
	s := readAV(t, alice.post("tasks/sendSubscribe", `{"message":{"role":"user","parts":[{"type":"data","content":{"city":"Paris"}}]}}`, true), nil)
	if len(s.errors) > 0 || s.taskID == "" {
		t.Fatalf("stream errors %v, task %q", s.errors, s.taskID)
	}
	task := alice.get(s.taskID)
	users := avUserMessages(task)
	if len(users) != 1 || len(users[0].Parts) != 1 || users[0].Parts[0].Type != "data" {
		t.Errorf("tasks/get's user messages %s, want the one sent, its data part", avJSON(users))
	}
	for _, a := range task.Artifacts {
		if strings.Contains(avJSON(a), "Paris") {
			t.Errorf("the user's data is listed as an artifact of the task: %s", avJSON(a))
		}
	}
}

// avUserMessages are the user's messages of task, as tasks/get lists them.
func avUserMessages(task a2a.AVTask) []a2a.AVMessage {
	var users []a2a.AVMessage
	for _, m := range task.Messages {
		if m.Role == "user" {
			users = append(users, m)
		}
	}
	return users
}
