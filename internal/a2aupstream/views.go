package a2aupstream

import (
	"encoding/json"
	"iter"
	"strings"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// What a client sees of an agent's status-updates and artifacts, as text
// to compare: a server's answer with a2a-go/v2's own server's given the
// same events (the pipeline's A2A doors, the A2A bridge behind them).

// AgentMessageJSON is an agent message as JSON without its task and
// context ids (a pipeline's are its own): its id, role, parts, metadata
// and extensions; "null" for none.
func AgentMessageJSON(t testing.TB, m *a2a.Message) string {
	t.Helper()
	if m == nil {
		return "null"
	}
	c := *m
	c.TaskID, c.ContextID = "", ""
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TaskView is what a task shows of the agent's status-updates: its
// state, its status message, the agent's messages in its history, in
// order, and its metadata, as JSON.
func TaskView(t testing.TB, task *a2a.Task) string {
	t.Helper()
	var agentMsgs []json.RawMessage
	for _, m := range task.History {
		if m.Role == a2a.MessageRoleAgent {
			agentMsgs = append(agentMsgs, json.RawMessage(AgentMessageJSON(t, m)))
		}
	}
	b, err := json.Marshal(map[string]any{"state": task.Status.State, "message": json.RawMessage(AgentMessageJSON(t, task.Status.Message)),
		"history": agentMsgs, "metadata": task.Metadata})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// StatusEvents is a stream's status-updates that carry a message or
// metadata, each its state, message and metadata, as JSON lines.
func StatusEvents(t testing.TB, evs iter.Seq2[a2a.Event, error]) string {
	t.Helper()
	var out strings.Builder
	for ev, err := range evs {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if line, ok := statusLine(t, ev); ok {
			out.WriteString(line)
		}
	}
	return out.String()
}

// statusLine is StatusEvents' line of ev, and whether it has one.
func statusLine(t testing.TB, ev a2a.Event) (string, bool) {
	t.Helper()
	su, ok := ev.(*a2a.TaskStatusUpdateEvent)
	if !ok || su.Status.Message == nil && len(su.Metadata) == 0 {
		return "", false
	}
	md, _ := json.Marshal(su.Metadata)
	return "status " + string(su.Status.State) + " " + AgentMessageJSON(t, su.Status.Message) + " " + string(md) + "\n", true
}

// AnswerEvents is StatusEvents with the artifact-updates among them: a
// line per run of updates of one artifact (its id, its text, thoughts left
// out, and the artifactHead of each of its updates that has one, but an
// update's equal to the one before), in the stream's order, up to the
// status-update that ends the turn, so that where the agent's status
// messages came among its artifacts' text shows whatever chunks a server
// split or joined the text into.
func AnswerEvents(t testing.TB, evs iter.Seq2[a2a.Event, error]) string {
	t.Helper()
	var out strings.Builder
	run, text, heads := a2a.ArtifactID(""), "", ""
	flush := func() {
		if run != "" {
			out.WriteString("artifact " + string(run) + " " + text + heads + "\n")
		}
		run, text, heads = "", "", ""
	}
	for ev, err := range evs {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && au.Artifact != nil {
			if au.Artifact.ID != run {
				flush()
				run = au.Artifact.ID
			}
			text += answerText(au.Artifact.Parts)
			if h := artifactHead(t, au.Artifact, au.LastChunk); h != "" && !strings.HasSuffix(heads, h) {
				heads += h
			}
			continue
		}
		if line, ok := statusLine(t, ev); ok {
			flush()
			out.WriteString(line)
		}
		if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && (su.Status.State.Terminal() ||
			su.Status.State == a2a.TaskStateInputRequired || su.Status.State == a2a.TaskStateAuthRequired) {
			break // the turn's end (a2a-go/v2's server keeps an auth-required task's stream open)
		}
	}
	flush()
	return out.String()
}

// ArtifactsView is a task's artifacts, a line each: its id, its text
// (thoughts left out) and its artifactHead.
func ArtifactsView(t testing.TB, task *a2a.Task) string {
	t.Helper()
	var out strings.Builder
	for _, a := range task.Artifacts {
		out.WriteString(string(a.ID) + " " + answerText(a.Parts) + artifactHead(t, a, false) + "\n")
	}
	return out.String()
}

// artifactHead is what an artifact (or an update of it) says besides its
// id and parts, as " " and JSON: its name, description, metadata and
// extensions, and lastChunk when set; "" for none of them.
func artifactHead(t testing.TB, a *a2a.Artifact, last bool) string {
	t.Helper()
	if a.Name == "" && a.Description == "" && len(a.Metadata) == 0 && len(a.Extensions) == 0 && !last {
		return ""
	}
	b, err := json.Marshal(map[string]any{"name": a.Name, "description": a.Description, "metadata": a.Metadata,
		"extensions": a.Extensions, "lastChunk": last})
	if err != nil {
		t.Fatal(err)
	}
	return " " + string(b)
}

// answerText joins the text of parts that are not thoughts.
func answerText(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if th, _ := p.Metadata["thought"].(bool); !th {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

// V1Events is an A2A v0.3 stream's events in A2A v1.0 (the SDK's
// conversion).
func V1Events(evs iter.Seq2[legacy.Event, error]) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		for ev, err := range evs {
			var v1 a2a.Event
			if err == nil {
				v1, err = a2av0.ToV1Event(ev)
			}
			if !yield(v1, err) || err != nil {
				return
			}
		}
	}
}
