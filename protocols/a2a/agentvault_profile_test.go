package a2a_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/protocols/a2a"
)

// TestAgentVaultInputModes: AgentVault's tasks/send and tasks/sendSubscribe
// of a file part whose media type the pool's input modes do not accept
// (the default pool's: text/plain, application/json) are refused as A2A
// v0.3's message/send of it is, -32005 naming the pool, before anything is
// published (no task is made); they were accepted and published. A file
// of an accepted type still goes through.
func TestAgentVaultInputModes(t *testing.T) {
	alice, _ := startAV(t)
	png := `{"message":{"role":"user","parts":[{"type":"file","url":"https://x/y.png","mediaType":"image/png"}]}}`
	var res struct {
		ID string `json:"id"`
	}
	if code := alice.call("tasks/send", png, &res); code != -32005 {
		t.Errorf("tasks/send of an image/png file: code %d (task %q), want -32005", code, res.ID)
	}
	resp := alice.post("tasks/sendSubscribe", png, true)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "-32005") || !strings.Contains(string(b), "not accepted by agent pool") ||
		strings.Contains(string(b), "task_status") {
		t.Errorf("tasks/sendSubscribe of an image/png file: %s", b)
	}
	t.Logf("tasks/sendSubscribe of an image/png file: %s", b)
	// Continuing a task is checked alike.
	var first struct {
		ID string `json:"id"`
	}
	if code := alice.call("tasks/send", `{"message":`+avText("Paris")+`}`, &first); code != 0 {
		t.Fatalf("tasks/send: %d", code)
	}
	cont := `{"id":"` + first.ID + `","message":{"role":"user","parts":[{"type":"file","url":"https://x/y.png","mediaType":"image/png"}]}}`
	if code := alice.call("tasks/send", cont, nil); code != -32005 {
		t.Errorf("tasks/send continuing a task with an image/png file: code %d, want -32005", code)
	}
	ok := `{"message":{"role":"user","parts":[{"type":"text","content":"Paris"},{"type":"file","url":"https://x/y.json","mediaType":"application/json"}]}}`
	if code := alice.call("tasks/send", ok, nil); code != 0 {
		t.Errorf("tasks/send of an application/json file: code %d, want accepted", code)
	}
}

// TestAgentVaultUserMetadataShown: tasks/get shows the user's message
// with the metadata it was sent with (the profile's Message.metadata, here
// an mcp_context), not null.
func TestAgentVaultUserMetadataShown(t *testing.T) {
	alice, _ := startAV(t)
	s := readAV(t, alice.post("tasks/sendSubscribe",
		`{"message":{"role":"user","parts":[{"type":"text","content":"Paris"}],"metadata":{"mcp_context":{"user_pref":"celsius"}}}}`, true), nil)
	if len(s.errors) > 0 || s.taskID == "" {
		t.Fatalf("stream errors %v, task %q", s.errors, s.taskID)
	}
	task := alice.get(s.taskID)
	users := avUserMessages(task)
	if len(users) != 1 || avJSON(users[0].Metadata) != avJSON(map[string]any{"mcp_context": map[string]any{"user_pref": "celsius"}}) {
		t.Errorf("tasks/get's user messages %s, want the one sent with its metadata", avJSON(users))
	}
}

// TestAgentVaultTimesUTC: tasks/get writes createdAt as updatedAt and the
// events' timestamps are written, UTC with "Z" (it was "+00:00").
func TestAgentVaultTimesUTC(t *testing.T) {
	alice, _ := startAV(t)
	s := readAV(t, alice.post("tasks/sendSubscribe", `{"message":`+avText("Paris")+`}`, true), nil)
	task := alice.get(s.taskID)
	if !strings.HasSuffix(task.CreatedAt, "Z") || !strings.HasSuffix(task.UpdatedAt, "Z") {
		t.Errorf("createdAt %q, updatedAt %q: want both UTC written with Z", task.CreatedAt, task.UpdatedAt)
	}
	// Compared as times, not strings: RFC 3339 with trimmed fractions
	// orders ".54Z" after ".548074Z" as text (CI saw it fail so).
	created, err1 := time.Parse(time.RFC3339Nano, task.CreatedAt)
	updated, err2 := time.Parse(time.RFC3339Nano, task.UpdatedAt)
	if err1 != nil || err2 != nil {
		t.Fatalf("createdAt %q, updatedAt %q: %v %v", task.CreatedAt, task.UpdatedAt, err1, err2)
	}
	if created.After(updated) {
		t.Errorf("createdAt %q after updatedAt %q", task.CreatedAt, task.UpdatedAt)
	}
}

// TestAgentVaultHeldAnswerOwnID: the answer held until its text ends and
// written at the turn's final frame has an id of its own (the last frame
// its text is from), not the final status's: a client cut between the two
// resumes after it and gets only the end, not the answer again; one cut
// before it gets it once.
func TestAgentVaultHeldAnswerOwnID(t *testing.T) {
	alice, _ := startAV(t)
	whole := readAV(t, alice.post("tasks/sendSubscribe", `{"message":`+avText("Paris")+`}`, true), nil)
	id := whole.taskID
	task := alice.get(id)
	sameView(t, task, whole)
	events, ids := avSSEIDs(t, alice.post("tasks/sendSubscribe", `{"id":"`+id+`"}`, true))
	msgID, statusID := "", ""
	for i, e := range events {
		switch e {
		case "task_message":
			msgID = ids[i]
		case "task_status":
			statusID = ids[i]
		}
	}
	if msgID == "" || msgID == statusID {
		t.Fatalf("the answer's task_message has id %q, the final status %q: want an id of its own (events %v ids %v)",
			msgID, statusID, events, ids)
	}
	rest := readAV(t, avResume(t, alice.url, alice.key, id, msgID), nil)
	if len(rest.messages) != 0 || len(rest.states) == 0 || rest.states[len(rest.states)-1] != a2a.AVCompleted {
		t.Errorf("resumed after the answer's id %s: messages %s, states %v; want no message, COMPLETED",
			msgID, avJSON(rest.messages), rest.states)
	}
}

// TestAgentVaultFilePartKeepsURLAndFilename: tasks/get shows a file part
// the user sent with the members it was sent with, url, mediaType and
// filename (the ones the profile's file part has and the normalizer
// reads), an inline one with its content (base64) and filename. It showed
// the url as content only and dropped the filename.
func TestAgentVaultFilePartKeepsURLAndFilename(t *testing.T) {
	alice, _ := startAV(t)
	s := readAV(t, alice.post("tasks/sendSubscribe", `{"message":{"role":"user","parts":[{"type":"text","content":"Paris"},`+
		`{"type":"file","url":"https://x/y.json","mediaType":"application/json","filename":"y.json"},`+
		`{"type":"file","content":"e30=","mediaType":"application/json","filename":"z.json"}]}}`, true), nil)
	if len(s.errors) > 0 || s.taskID == "" {
		t.Fatalf("stream errors %v, task %q", s.errors, s.taskID)
	}
	var task struct {
		Messages []struct {
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		} `json:"messages"`
	}
	if code := alice.call("tasks/get", `{"id":"`+s.taskID+`"}`, &task); code != 0 || len(task.Messages) == 0 ||
		task.Messages[0].Role != "user" || len(task.Messages[0].Parts) != 3 {
		t.Fatalf("tasks/get: code %d, messages %s; want the user's first with its three parts", code, avJSON(task.Messages))
	}
	byURL, inline := task.Messages[0].Parts[1], task.Messages[0].Parts[2]
	if byURL["url"] != "https://x/y.json" || byURL["mediaType"] != "application/json" || byURL["filename"] != "y.json" {
		t.Errorf("file part by url %s, want url https://x/y.json, mediaType application/json, filename y.json", avJSON(byURL))
	}
	if inline["content"] != "e30=" || inline["filename"] != "z.json" || inline["url"] != nil {
		t.Errorf("inline file part %s, want content e30= and filename z.json, no url", avJSON(inline))
	}
}
