package ingress_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// avSpecDir holds the AgentVault profile's examples, copied verbatim from
// a2a-agentvault-profile.md (spec_<method>.request.json, the spec's
// response next to it), and the pipeline's answers to them (*.golden).
const avSpecDir = "testdata/golden/agentvault"

// avSpecTask is the task id of the profile's examples.
const avSpecTask = "task-abc-123"

// avTemplateComment is a comment of the published page's template ({# …
// #}, in the tasks/send example): not part of the JSON.
var avTemplateComment = regexp.MustCompile(`(?m)^\s*\{#.*#\}\s*\n`)

// avTimestamp is an ISO 8601 timestamp of an answer (normalized in the
// golden files: it changes from run to run).
var avTimestamp = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)

// avToolCall is the id of a demo agent's tool call (it names the request:
// normalized in the golden files).
var avToolCall = regexp.MustCompile(`call_[0-9a-f]{8}`)

// avSpecFile reads the example file spec_<name> of avSpecDir.
func avSpecFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(avSpecDir, "spec_"+name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// avSpecRequest is the profile's example request of name as sent: its
// template comments removed, its task the pipeline's task (the server
// names the tasks it creates).
func avSpecRequest(t *testing.T, name, task string) string {
	t.Helper()
	b := avTemplateComment.ReplaceAll(avSpecFile(t, name+".request.json"), nil)
	if !json.Valid(b) {
		t.Fatalf("spec example %s is not JSON: %s", name, b)
	}
	return strings.ReplaceAll(string(b), avSpecTask, task)
}

// avNormalize writes an answer as the examples do: the task avSpecTask,
// every timestamp <timestamp>, every tool call call_<id>.
func avNormalize(b []byte, task string) string {
	s := strings.ReplaceAll(string(bytes.TrimSpace(b)), task, avSpecTask)
	s = avToolCall.ReplaceAllString(s, "call_<id>")
	return avTimestamp.ReplaceAllString(s, "<timestamp>")
}

// avShape lists where got lacks the shape of the profile's example spec:
// each key of an example object present, with a value of the same JSON
// type (an example's null stands for any value; "content" is the part's
// or artifact's own, of any type), each element of an array shaped as
// the example's first.
func avShape(path string, spec, got any) []string {
	switch s := spec.(type) {
	case nil:
		return nil
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %T, the example has an object", path, got)}
		}
		var out []string
		for k, v := range s {
			gv, ok := g[k]
			if !ok {
				out = append(out, path+"."+k+": missing")
				continue
			}
			if k != "content" {
				out = append(out, avShape(path+"."+k, v, gv)...)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %T, the example has an array", path, got)}
		}
		var out []string
		for i, e := range g {
			if len(s) > 0 {
				out = append(out, avShape(fmt.Sprintf("%s[%d]", path, i), s[0], e)...)
			}
		}
		return out
	}
	if fmt.Sprintf("%T", spec) != fmt.Sprintf("%T", got) {
		return []string{fmt.Sprintf("%s: %T, the example has %T", path, got, spec)}
	}
	return nil
}

// avJSONShape checks the JSON answer b against the profile's example
// response of name.
func avJSONShape(t *testing.T, name string, b []byte) {
	t.Helper()
	var spec, got any
	if err := json.Unmarshal(avSpecFile(t, name+".response.json"), &spec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v: %s", name, err, b)
	}
	for _, d := range avShape("", spec, got) {
		t.Errorf("%s answer %s: %s", name, d, b)
	}
}

// avSSEShape checks the events of a tasks/sendSubscribe answer against the
// profile's example stream: each event one of the profile's types (its
// data shaped as the example's event of that type; error as {"error",
// "message"}), opening with task_status WORKING, ending with a task_status
// of a final state.
func avSSEShape(t *testing.T, b []byte) {
	t.Helper()
	examples := map[string]any{"error": map[string]any{"error": "code", "message": "desc"}}
	for _, e := range testkit.Events(testkit.MustReadSSE(t, bytes.NewReader(avSpecFile(t, "tasks_sendSubscribe.response.sse")))) {
		var v any
		if err := json.Unmarshal([]byte(e.Data), &v); err != nil {
			t.Fatal(err)
		}
		if _, ok := examples[e.Event]; !ok {
			examples[e.Event] = v
		}
	}
	evs := testkit.Events(testkit.MustReadSSE(t, bytes.NewReader(b)))
	if len(evs) < 2 || evs[0].Event != "task_status" || !strings.Contains(evs[0].Data, `"WORKING"`) ||
		evs[len(evs)-1].Event != "task_status" || !strings.Contains(evs[len(evs)-1].Data, `"COMPLETED"`) {
		t.Errorf("tasks/sendSubscribe: the stream opens with task_status WORKING and ends with COMPLETED: %s", b)
	}
	for i, e := range evs {
		spec, ok := examples[e.Event]
		if !ok {
			t.Errorf("event %d: %q is not an event of the profile", i, e.Event)
			continue
		}
		var got any
		if err := json.Unmarshal([]byte(e.Data), &got); err != nil {
			t.Errorf("event %d: data is not one JSON line: %q", i, e.Data)
			continue
		}
		for _, d := range avShape(e.Event, spec, got) {
			t.Errorf("event %d: %s", i, d)
		}
	}
}

// TestAgentVaultSpecExamples replays the AgentVault profile's examples
// verbatim (a2a-agentvault-profile.md: tasks/send initiate and continue,
// tasks/get, tasks/sendSubscribe, tasks/cancel; the task id the one the
// pipeline gave) against the pipeline and its demo agent: each answer has
// the shape of the spec's example response (every field it shows, of its
// type; the stream's events as the example stream's), and the answers,
// task id and timestamps normalized, are pinned in
// testdata/golden/agentvault/spec_replay.golden (-update
// rewrites it).
func TestAgentVaultSpecExamples(t *testing.T) {
	p := pipetest.Start(t)
	p.Pool(demo.Pool, demo.New())
	var golden bytes.Buffer
	record := func(title string, resp *http.Response, b []byte, task string) {
		fmt.Fprintf(&golden, "### %s\n# status %s, Content-Type %s", title, resp.Status, resp.Header.Get("Content-Type"))
		if cc := resp.Header.Get("Cache-Control"); cc != "" {
			fmt.Fprintf(&golden, ", Cache-Control %s", cc)
		}
		fmt.Fprintf(&golden, "\n%s\n", avNormalize(b, task))
	}
	post := func(name, task string, hdr ...string) (*http.Response, []byte) {
		resp, b := avPost(t, p.URL, avSpecRequest(t, name, task), hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, b)
		}
		return resp, b
	}

	resp, b := post("tasks_send_initiate", "")
	var sent struct{ Result struct{ ID string } }
	if err := json.Unmarshal(b, &sent); err != nil || sent.Result.ID == "" {
		t.Fatalf("tasks/send: %s", b)
	}
	task := sent.Result.ID
	record("tasks/send (Initiate)", resp, b, task)
	avJSONShape(t, "tasks_send_initiate", b)
	avAwaitState(t, p.URL, task, "COMPLETED")

	resp, b = post("tasks_send_continue", task)
	record("tasks/send (Continue)", resp, b, task)
	avJSONShape(t, "tasks_send_continue", b)
	testkit.Eventually(t, 20*time.Second, "the continued task completed", func() bool {
		_, b := avPost(t, p.URL, avSpecRequest(t, "tasks_get", task))
		return bytes.Contains(b, []byte(`"COMPLETED"`)) && bytes.Count(b, []byte(`"role":"user"`)) == 2
	})

	resp, b = post("tasks_get", task)
	record("tasks/get", resp, b, task)
	avJSONShape(t, "tasks_get", b)

	resp, b = post("tasks_sendSubscribe", task, "Accept", "text/event-stream")
	record("tasks/sendSubscribe", resp, b, task)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("tasks/sendSubscribe: Content-Type %q, Cache-Control %q", ct, resp.Header.Get("Cache-Control"))
	}
	avSSEShape(t, b)

	// tasks/cancel's example cancels a task that runs: one the demo agent
	// is slow to answer.
	slow := avSend(t, p.URL, "a long one", `{"delay_ms":5000,"frames":3}`)
	avAwaitState(t, p.URL, slow, "WORKING")
	resp, b = post("tasks_cancel", slow)
	record("tasks/cancel (a working task)", resp, b, slow)
	avJSONShape(t, "tasks_cancel", b)

	path := filepath.Join(avSpecDir, "spec_replay.golden")
	testkit.Golden(t, path, golden.Bytes(), *update)
}
