package a2abridge_test

import (
	"context"
	"iter"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2aclient03 "github.com/a2aproject/a2a-go/a2aclient"
	agentcard03 "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// twoArtifacts streams two text artifacts, A ("a1 a2 a3") and B
// ("b1 b2"), in chunks (append, lastChunk): their chunks interleaved
// (A, B, A, B, A), or for a message "seq" one artifact after the other.
type twoArtifacts struct{}

func (twoArtifacts) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	type ch struct {
		id, text       string
		appendTo, last bool
	}
	order := []ch{{"A", "a1 ", false, false}, {"B", "b1 ", false, false}, {"A", "a2 ", true, false},
		{"B", "b2", true, true}, {"A", "a3", true, true}}
	if up.TextOf(ec.Message.Parts) == "seq" {
		order = []ch{{"A", "a1 ", false, false}, {"A", "a2 ", true, false}, {"A", "a3", true, true},
			{"B", "b1 ", false, false}, {"B", "b2", true, true}}
	}
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		for _, c := range order {
			ev := a2a.NewArtifactUpdateEvent(ec, a2a.ArtifactID(c.id), a2a.NewTextPart(c.text))
			ev.Append, ev.LastChunk = c.appendTo, c.last
			if !yield(ev, nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (twoArtifacts) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestTwoTextArtifacts: an agent's two text artifacts (chunked with
// append and lastChunk, interleaved or one after the other) reach an A2A
// v1.0 client of the pool as the agent made them, each artifact's text
// whole under its own id, in the order first seen: in a stream, and in
// the Task of a blocking SendMessage and of GetTask (A2A: a task's
// artifacts are its output; an A2A client reads the answer there).
func TestTwoTextArtifacts(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, twoArtifacts{})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	want := map[a2a.ArtifactID]string{"A": "a1 a2 a3", "B": "b1 b2"}
	check := func(t *testing.T, how string, turn *up.Turn) {
		t.Helper()
		for id, w := range want {
			if got := turn.Text(id); got != w {
				t.Errorf("%s: artifact %s = %q, want %q (the client's artifacts: %v)", how, id, got, w, texts(turn))
			}
		}
	}
	for _, text := range []string{"interleaved", "seq"} {
		t.Run(text, func(t *testing.T) {
			turn := up.Collect(t, c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: userMessage(text)}), nil)
			if turn.State() != a2a.TaskStateCompleted {
				t.Fatalf("stream ended %s", turn.State())
			}
			check(t, "SendStreamingMessage", turn)
			sent := up.Send(t, c, &a2a.SendMessageRequest{Message: userMessage(text)})
			check(t, "SendMessage", sent)
			task, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: sent.Task.TaskID})
			if err != nil {
				t.Fatal(err)
			}
			var ids []a2a.ArtifactID
			for _, a := range task.Artifacts {
				ids = append(ids, a.ID)
			}
			if len(ids) != 2 || ids[0] != "A" || ids[1] != "B" {
				t.Errorf("GetTask: artifacts %v, want [A B] (the order first seen)", ids)
			}
			got := up.NewTurn()
			got.Add(task)
			check(t, "GetTask", got)
		})
	}
}

func texts(turn *up.Turn) map[a2a.ArtifactID]string {
	m := map[a2a.ArtifactID]string{}
	for id := range turn.Artifacts {
		m[id] = turn.Text(id)
	}
	return m
}

// namedArtifact answers with one text artifact "R" named "Report" with
// a description.
type namedArtifact struct{}

func (namedArtifact) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		ev := a2a.NewArtifactUpdateEvent(ec, "R", a2a.NewTextPart("the report"))
		ev.Artifact.Name, ev.Artifact.Description = "Report", "What was found."
		ev.Append, ev.LastChunk = false, true
		_ = yield(ev, nil) && yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (namedArtifact) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestArtifactName: an agent's text artifact reaches an A2A client of the
// pool with its name and description (A2A Artifact.name, description),
// as its file and data artifacts do: in a v1.0 stream, in the Task of a
// blocking SendMessage (not a bare Message, which has no room for them)
// and of GetTask, and in a v0.3 client's message/stream, message/send
// and tasks/get.
func TestArtifactName(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, namedArtifact{})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	check := func(how, id, name, desc, text string) {
		t.Helper()
		if id != "R" || name != "Report" || desc != "What was found." || text != "the report" {
			t.Errorf("%s: artifact %q named %q described %q with %q, want R named %q described %q with %q",
				how, id, name, desc, text, "Report", "What was found.", "the report")
		}
	}
	checkV1 := func(how string, arts []*a2a.Artifact) {
		t.Helper()
		if len(arts) != 1 {
			t.Errorf("%s: artifacts %+v, want R", how, arts)
			return
		}
		check(how, string(arts[0].ID), arts[0].Name, arts[0].Description, up.TextOf(arts[0].Parts))
	}
	var got []*a2a.Artifact
	for ev, err := range c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: userMessage("report")}) {
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && e.Artifact != nil && !e.Append {
			got = append(got, e.Artifact)
		}
	}
	checkV1("SendStreamingMessage", got)
	res, err := c.SendMessage(testCtx(t), &a2a.SendMessageRequest{Message: userMessage("report")})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage answered %T, want the Task", res)
	}
	checkV1("SendMessage", task.Artifacts)
	task, err = c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	checkV1("GetTask", task.Artifacts)

	card, err := agentcard03.DefaultResolver.Resolve(testCtx(t), p.URL+"/pools/agent")
	if err != nil {
		t.Fatal(err)
	}
	old, err := a2aclient03.NewFromCard(testCtx(t), card)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Destroy() })
	checkV03 := func(how string, arts []*a2a03.Artifact) {
		t.Helper()
		if len(arts) != 1 {
			t.Errorf("%s: artifacts %+v, want R", how, arts)
			return
		}
		text := ""
		for _, p := range arts[0].Parts {
			if tp, ok := p.(a2a03.TextPart); ok {
				text += tp.Text
			}
		}
		check(how, string(arts[0].ID), arts[0].Name, arts[0].Description, text)
	}
	params := func() *a2a03.MessageSendParams {
		return &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "report"})}
	}
	var oldGot []*a2a03.Artifact
	for ev, err := range old.SendStreamingMessage(testCtx(t), params()) {
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := ev.(*a2a03.TaskArtifactUpdateEvent); ok && e.Artifact != nil && !e.Append {
			oldGot = append(oldGot, e.Artifact)
		}
	}
	checkV03("v0.3 message/stream", oldGot)
	oldRes, err := old.SendMessage(testCtx(t), params())
	if err != nil {
		t.Fatal(err)
	}
	oldTask, ok := oldRes.(*a2a03.Task)
	if !ok {
		t.Fatalf("v0.3 message/send answered %T, want the Task", oldRes)
	}
	checkV03("v0.3 message/send", oldTask.Artifacts)
	oldTask, err = old.GetTask(testCtx(t), &a2a03.TaskQueryParams{ID: oldTask.ID})
	if err != nil {
		t.Fatal(err)
	}
	checkV03("v0.3 tasks/get", oldTask.Artifacts)
}
