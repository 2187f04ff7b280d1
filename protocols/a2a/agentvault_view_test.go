package a2a

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// avRebuilt is what an AgentVault client rebuilds from the SSE body of
// tasks/sendSubscribe: the messages added (task_message), the artifacts
// created or updated (task_artifact, by id, in the order first seen).
func avRebuilt(t *testing.T, body []byte) (msgs []AVMessage, arts []AVArtifact) {
	t.Helper()
	msgs, arts = []AVMessage{}, []AVArtifact{}
	for _, ev := range sseEvents(body) {
		switch ev.event {
		case "task_message":
			var e AVMessageEvent
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, e.Message)
		case "task_artifact":
			var e AVArtifactEvent
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
				t.Fatal(err)
			}
			i := 0
			for i < len(arts) && arts[i].ID != e.Artifact.ID {
				i++
			}
			if i == len(arts) {
				arts = append(arts, e.Artifact)
			}
			arts[i] = e.Artifact
		}
	}
	return msgs, arts
}

// avRender is the AgentVault SSE body of sc's frames from sequence from,
// the frames before it given to the renderer's Prime first, as egress
// gives a resumed stream's renderer the frames its reader meets on its way
// to the resume point (render.Primer).
func avRender(t *testing.T, sc conformance.Scenario, from int64) []byte {
	t.Helper()
	w := httptest.NewRecorder()
	o := render.NewOutput(w, 0)
	r := NewAgentVaultStream(o, sc.RequestID(), AgentVaultParams{TaskID: "task-002"})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	if p, ok := r.(render.Primer); ok && from > 0 {
		for i, f := range sc.Frames {
			if f.Sequence >= from {
				continue
			}
			raw, _ := json.Marshal(f)
			hf, err := render.HeadFrame(raw, uint64(i+1))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Prime(hf); err != nil {
				t.Fatal(err)
			}
		}
	}
	renderFramesFrom(t, r, sc.Frames, from)
	if err := r.End(nil); err != nil {
		t.Fatal(err)
	}
	return w.Body.Bytes()
}

// TestAgentVaultResumeAfterEveryID: a client that loses the stream right
// after any event with an id and resumes after it (Last-Event-ID) rebuilds
// the same messages and artifacts as one that read it whole: a message
// written at a frame carries the id of the frames its text is from, so
// none is repeated or lost.
func TestAgentVaultResumeAfterEveryID(t *testing.T) {
	for _, sc := range conformance.Scenarios() {
		if !sc.Final || sc.From > 0 {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) { avResumeEveryID(t, sc) })
	}
}

// avResumeEveryID fails the test unless a client that resumes after any
// event id of sc's stream (rendered from its first frame) rebuilds what
// one that read it whole does.
func avResumeEveryID(t *testing.T, sc conformance.Scenario) {
	t.Helper()
	full := avRender(t, sc, 0)
	wantM, wantA := avRebuilt(t, full)
	blocks := strings.SplitAfter(string(full), "\n\n")
	for i, b := range blocks {
		id := ""
		for _, l := range strings.Split(b, "\n") {
			if v, ok := strings.CutPrefix(l, "id: "); ok {
				id = v
			}
		}
		if id == "" {
			continue
		}
		seq, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		body := strings.Join(blocks[:i+1], "") + string(avRender(t, sc, seq+1))
		m, a := avRebuilt(t, []byte(body))
		if g, w := mustJSON(m, a), mustJSON(wantM, wantA); g != w {
			t.Errorf("resumed after %s:\n%s\nwant\n%s", id, g, w)
		}
	}
}

func mustJSON(v ...any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAgentVaultStreamMatchesTask: for every finished scenario, the
// messages and artifacts an AgentVault client rebuilds from the
// tasks/sendSubscribe stream (one task_message per message added, the
// profile's TaskMessageEvent) are the agent's messages and the artifacts
// of the task as tasks/get answers it (AgentVaultTask).
func TestAgentVaultStreamMatchesTask(t *testing.T) {
	frames := map[string]conformance.Scenario{}
	for _, sc := range conformance.Scenarios() {
		frames[sc.Name] = sc
	}
	finishedTasks(t, func(t *testing.T, name string, task *a2a.Task) {
		avStreamIsTask(t, frames[name], task)
	})
}

// avStreamIsTask fails the test unless the messages and artifacts a
// client rebuilds from sc's stream (from its first frame) are the agent's
// messages and the artifacts of task as tasks/get answers it.
func avStreamIsTask(t *testing.T, sc conformance.Scenario, task *a2a.Task) {
	t.Helper()
	msgs, arts := avRebuilt(t, avRender(t, sc, 0))
	av := AgentVaultTask(task, "2025-01-23T10:30:00Z")
	want := []AVMessage{}
	for _, m := range av.Messages {
		if m.Role == "assistant" {
			want = append(want, m)
		}
	}
	got, _ := json.Marshal(msgs)
	wantB, _ := json.Marshal(want)
	if string(got) != string(wantB) {
		t.Errorf("streamed messages\n%s\ntasks/get's\n%s", got, wantB)
	}
	got, _ = json.Marshal(arts)
	wantB, _ = json.Marshal(av.Artifacts)
	if string(got) != string(wantB) {
		t.Errorf("streamed artifacts\n%s\ntasks/get's\n%s", got, wantB)
	}
}
