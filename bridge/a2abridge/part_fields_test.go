package a2abridge_test

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// fieldsAgent answers with parts that have a mediaType and a filename
// (A2A v1.0 Part fields): a working status message's data part, a text
// artifact streamed in two chunks of the same part (appended), and a
// data artifact; then completed.
type fieldsAgent struct{}

func withFields(p *a2a.Part, mediaType, filename string) *a2a.Part {
	p.MediaType, p.Filename = mediaType, filename
	return p
}

func (fieldsAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	step := withFields(a2a.NewDataPart(map[string]any{"step": 1.0}), "application/vnd.step+json", "step.json")
	working := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking,
		a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("working"), step))
	first := a2a.NewArtifactUpdateEvent(ec, "doc", withFields(a2a.NewTextPart("# x\n"), "text/markdown", "x.md"))
	second := a2a.NewArtifactUpdateEvent(ec, "doc", withFields(a2a.NewTextPart("body"), "text/markdown", "x.md"))
	first.Append, second.Append = false, true
	data := a2a.NewArtifactUpdateEvent(ec, "data", withFields(a2a.NewDataPart(map[string]any{"k": "v"}), "application/json", "d.json"))
	data.Append, data.LastChunk = false, true
	return func(yield func(a2a.Event, error) bool) {
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
			yield(working, nil) && yield(first, nil) && yield(second, nil) && yield(data, nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (fieldsAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// partFieldErrors checks that every part of fieldsAgent's answer a client
// folded (a stream's events, or a task) has its mediaType and filename:
// the text of artifact doc (joined, whole: want its text), the data
// artifact's part and the status message's data part (in said: the
// stream's status-updates' messages, or the task's history).
func partFieldErrors(turn *up.Turn, said []*a2a.Message, wantDoc string) []error {
	var errs []error
	check := func(what string, p *a2a.Part, mediaType, filename string) {
		if p.MediaType != mediaType || p.Filename != filename {
			errs = append(errs, fmt.Errorf("%s: mediaType %q, filename %q; want %q, %q", what, p.MediaType, p.Filename, mediaType, filename))
		}
	}
	doc := turn.Artifacts["doc"]
	if doc == nil || up.TextOf(doc.Parts) != wantDoc {
		return append(errs, fmt.Errorf("artifact doc %v, want its text %q", doc, wantDoc))
	}
	for i, p := range doc.Parts {
		check(fmt.Sprintf("doc part %d", i), p, "text/markdown", "x.md")
	}
	if d := turn.Artifacts["data"]; d == nil || len(d.Parts) != 1 {
		errs = append(errs, fmt.Errorf("artifact data %v, want one part", d))
	} else {
		check("data part", d.Parts[0], "application/json", "d.json")
	}
	steps := 0
	for _, p := range append(artifactParts(maps.Values(turn.Artifacts)), messageParts(slices.Values(said))...) {
		if d, ok := p.Content.(a2a.Data); ok && fmt.Sprint(d.Value) == "map[step:1]" {
			steps++
			check("status message's data part", p, "application/vnd.step+json", "step.json")
		}
	}
	if steps != 1 {
		errs = append(errs, fmt.Errorf("%d parts of the status message's data, want 1", steps))
	}
	return errs
}

// TestPartFieldsReachA2AClients: a bridged A2A v1.0 agent's text and
// data parts keep their mediaType and filename for an A2A v1.0 client of
// the pipeline, in the stream, in GetTask and in a blocking
// SendMessage's task; the text chunks of one
// part still make one text part of the task's artifact; the agent
// streams, or the bridge reads its task (snapshots). They were dropped
// (the frames carried a part's metadata only).
func TestPartFieldsReachA2AClients(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{true, false} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			t.Parallel()
			partFieldsTurns(t, serveA2ACard(t, a2asrv.NewHandler(fieldsAgent{}), streaming))
		})
	}
}

// partFieldsTurns asks fieldsAgent at url through the pipeline, an A2A
// v1.0 client streaming, then sending, and checks its parts' fields
// (partFieldErrors) in the stream, GetTask and SendMessage's task.
func partFieldsTurns(t *testing.T, url string) {
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	turn := up.Collect(t, c.SendStreamingMessage(testCtx(t), up.Msg("fields")), nil)
	if st := turn.State(); st != a2a.TaskStateCompleted {
		t.Fatalf("stream ended %s, want completed", st)
	}
	for _, err := range partFieldErrors(turn, turn.Said, "# x\nbody") {
		t.Errorf("stream: %v", err)
	}
	task, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: turn.Task.TaskID})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	got := up.NewTurn()
	got.Add(task)
	for _, err := range partFieldErrors(got, task.History, "# x\nbody") {
		t.Errorf("GetTask: %v", err)
	}
	for _, a := range task.Artifacts {
		if a.ID == "doc" && len(a.Parts) != 1 {
			t.Errorf("GetTask: artifact doc has %d parts, want its chunks' one", len(a.Parts))
		}
	}
	sent := up.SentTask(t, testCtx(t), c, up.Msg("fields, blocking"))
	got = up.NewTurn()
	got.Add(sent)
	for _, err := range partFieldErrors(got, sent.History, "# x\nbody") {
		t.Errorf("SendMessage's task: %v", err)
	}
}

// askFieldsAgent ends its turn with a status (input-required, or
// rejected for a message "reject") whose message's text and data parts
// have a mediaType and a filename.
type askFieldsAgent struct{}

func (askFieldsAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	state := a2a.TaskStateInputRequired
	if up.TextOf(ec.Message.Parts) == "reject" {
		state = a2a.TaskStateRejected
	}
	msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec,
		withFields(a2a.NewTextPart("fill in"), "text/markdown", "ask.md"),
		withFields(a2a.NewDataPart(map[string]any{"field": "name"}), "application/vnd.form+json", "form.json"))
	doc := a2a.NewArtifactUpdateEvent(ec, "doc", withFields(a2a.NewTextPart("# x"), "text/markdown", "x.md"))
	doc.Append = false
	return func(yield func(a2a.Event, error) bool) {
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
			yield(doc, nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, state, msg), nil)
	}
}

func (askFieldsAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// statusFieldErrors checks the parts of askFieldsAgent's status message
// m: its text and its data part, with their mediaType and filename.
func statusFieldErrors(m *a2a.Message) []error {
	if m == nil || len(m.Parts) != 2 {
		return []error{fmt.Errorf("status message %v, want its two parts", m)}
	}
	var errs []error
	for i, want := range [][2]string{{"text/markdown", "ask.md"}, {"application/vnd.form+json", "form.json"}} {
		if p := m.Parts[i]; p.MediaType != want[0] || p.Filename != want[1] {
			errs = append(errs, fmt.Errorf("part %d: mediaType %q, filename %q; want %q, %q", i, p.MediaType, p.Filename, want[0], want[1]))
		}
	}
	return errs
}

// TestStatusPartFieldsReachA2AClients: the message of a bridged A2A
// v1.0 agent's final status, input-required (the bridge's interrupt) or
// rejected (the agent's own end), keeps its parts' mediaType and filename
// for an A2A v1.0 client, in the stream and in GetTask, after an artifact
// chunk whose part had others. They were dropped.
func TestStatusPartFieldsReachA2AClients(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, askFieldsAgent{})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	for _, tc := range []struct {
		text  string
		state a2a.TaskState
	}{{"ask", a2a.TaskStateInputRequired}, {"reject", a2a.TaskStateRejected}} {
		var final *a2a.Message // the last status message of the stream
		turn := up.Collect(t, func(yield func(a2a.Event, error) bool) {
			for ev, err := range c.SendStreamingMessage(testCtx(t), up.Msg(tc.text)) {
				if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && su.Status.Message != nil {
					final = su.Status.Message
				}
				if !yield(ev, err) {
					return
				}
			}
		}, nil)
		if st := turn.State(); st != tc.state {
			t.Fatalf("%s: stream ended %s, want %s", tc.text, st, tc.state)
		}
		task, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: turn.Task.TaskID})
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		for _, err := range statusFieldErrors(final) {
			t.Errorf("%s, stream: %v", tc.text, err)
		}
		for _, err := range statusFieldErrors(task.Status.Message) {
			t.Errorf("%s, GetTask: %v", tc.text, err)
		}
	}
}
