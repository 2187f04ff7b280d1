package a2abridge_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// msgFieldsAgent answers "direct" with a Message whose text part has a
// mediaType and a filename; anything else with a working status message
// and then a completed status message, each one such text part. Each
// text part's metadata is {"k": its text}.
type msgFieldsAgent struct{}

// withKey is p with metadata {"k": its text}.
func withKey(p *a2a.Part) *a2a.Part {
	p.Metadata = map[string]any{"k": p.Text()}
	return p
}

func (msgFieldsAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	if up.TextOf(ec.Message.Parts) == "direct" {
		return func(yield func(a2a.Event, error) bool) {
			yield(a2a.NewMessage(a2a.MessageRoleAgent, withKey(withFields(a2a.NewTextPart("direct answer"), "text/markdown", "m.md"))), nil)
		}
	}
	working := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking,
		a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, withKey(withFields(a2a.NewTextPart("working"), "text/markdown", "w.md"))))
	done := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted,
		a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, withKey(withFields(a2a.NewTextPart("done"), "text/csv", "c.csv"))))
	return func(yield func(a2a.Event, error) bool) {
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) && yield(working, nil) && yield(done, nil)
	}
}

func (msgFieldsAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// textFieldErrors checks that each text part of parts whose text is a
// key of want has want's mediaType and filename, and that every key was
// found.
func textFieldErrors(what string, parts []*a2a.Part, want map[string][2]string) []error {
	var errs []error
	found := map[string]bool{}
	for _, p := range parts {
		w, ok := want[p.Text()]
		if !ok {
			continue
		}
		found[p.Text()] = true
		if p.MediaType != w[0] || p.Filename != w[1] {
			errs = append(errs, fmt.Errorf("%s: part %q: mediaType %q, filename %q; want %q, %q", what, p.Text(), p.MediaType, p.Filename, w[0], w[1]))
		}
	}
	for text := range want {
		if !found[text] {
			errs = append(errs, fmt.Errorf("%s: no text part %q in %v", what, text, parts))
		}
	}
	return errs
}

// TestMessagePartFieldsReachA2AClients: the text parts of a bridged A2A
// v1.0 agent's messages outside an artifact (a working status message,
// the completed status message, a direct Message answer) keep their
// mediaType and filename for an A2A v1.0 client: in the stream, in
// GetTask's artifacts (two parts: the two messages' texts, no longer
// joined into one part of the last one's fields) and in a blocking
// SendMessage's Message; an A2A v0.3 client's tasks/get has the two
// text parts. They were dropped: the bridge wrote no
// artifact_part_fields for a message's text.
func TestMessagePartFieldsReachA2AClients(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, msgFieldsAgent{})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	want := map[string][2]string{"working": {"text/markdown", "w.md"}, "done": {"text/csv", "c.csv"}}
	turn := up.Collect(t, c.SendStreamingMessage(testCtx(t), up.Msg("work")), nil)
	if st := turn.State(); st != a2a.TaskStateCompleted {
		t.Fatalf("stream ended %s, want completed", st)
	}
	var parts []*a2a.Part
	for _, a := range turn.Artifacts {
		parts = append(parts, a.Parts...)
	}
	for _, err := range textFieldErrors("stream", parts, want) {
		t.Error(err)
	}
	task, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: turn.Task.TaskID})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	parts = nil
	for _, a := range task.Artifacts {
		parts = append(parts, a.Parts...)
	}
	for _, err := range textFieldErrors("GetTask", parts, want) {
		t.Error(err)
	}
	// An A2A v0.3 client gets the same text parts, without the fields
	// (v0.3's text part has none).
	v03 := openV03(t, p, "agent").(*v03Conv)
	v03Turn := v03.stream(t, "work", nil)
	old, err := v03.c.GetTask(testCtx(t), &a2a03.TaskQueryParams{ID: a2a03.TaskID(v03Turn.Task.TaskID)})
	if err != nil {
		t.Fatalf("A2A v0.3 tasks/get: %v", err)
	}
	var texts []string
	for _, a := range old.Artifacts {
		for _, p := range a.Parts {
			if tp, ok := p.(a2a03.TextPart); ok {
				texts = append(texts, tp.Text)
			}
		}
	}
	if !slices.Equal(texts, []string{"working", "done"}) {
		t.Errorf("A2A v0.3 tasks/get: text parts %q, want [working done]", texts)
	}

	res, err := c.SendMessage(testCtx(t), up.Msg("direct"))
	if err != nil {
		t.Fatal(err)
	}
	msg, ok := res.(*a2a.Message)
	if !ok {
		t.Fatalf("SendMessage answered %T, want the agent's Message", res)
	}
	for _, err := range textFieldErrors("SendMessage", msg.Parts, map[string][2]string{"direct answer": {"text/markdown", "m.md"}}) {
		t.Error(err)
	}
	turn = up.Collect(t, c.SendStreamingMessage(testCtx(t), up.Msg("direct")), nil)
	var got []*a2a.Part
	for _, a := range turn.Artifacts {
		got = append(got, a.Parts...)
	}
	if turn.Message != nil {
		got = append(got, turn.Message.Parts...)
	}
	for _, err := range textFieldErrors("stream of direct", got, map[string][2]string{"direct answer": {"text/markdown", "m.md"}}) {
		t.Error(err)
	}
}

// keyErrors checks that each text part of parts whose text is one of
// texts has the metadata {"k": its text}, and that every one was found.
func keyErrors(what string, parts []*a2a.Part, texts ...string) []error {
	var errs []error
	found := map[string]bool{}
	for _, p := range parts {
		if !slices.Contains(texts, p.Text()) {
			continue
		}
		found[p.Text()] = true
		if p.Metadata["k"] != p.Text() {
			errs = append(errs, fmt.Errorf("%s: part %q: metadata %v, want k=%s", what, p.Text(), p.Metadata, p.Text()))
		}
	}
	for _, text := range texts {
		if !found[text] {
			errs = append(errs, fmt.Errorf("%s: no text part %q in %v", what, text, parts))
		}
	}
	return errs
}

// TestMessagePartMetadataReachA2AClients: the metadata of the text parts
// of a bridged A2A agent's messages outside an artifact (a working status
// message, the completed status message, a direct Message answer) reaches
// A2A clients, as an artifact's text part's does: in the stream, GetTask's
// artifacts and a blocking SendMessage's Message (A2A v1.0), and an A2A
// v0.3 client's tasks/get. It was dropped: the bridge wrote no
// artifact_part_metadata for a message's text.
func TestMessagePartMetadataReachA2AClients(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, msgFieldsAgent{})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	turn := up.Collect(t, c.SendStreamingMessage(testCtx(t), up.Msg("work")), nil)
	var parts []*a2a.Part
	for _, a := range turn.Artifacts {
		parts = append(parts, a.Parts...)
	}
	for _, err := range keyErrors("stream", parts, "working", "done") {
		t.Error(err)
	}
	task, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: turn.Task.TaskID})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	parts = nil
	for _, a := range task.Artifacts {
		parts = append(parts, a.Parts...)
	}
	for _, err := range keyErrors("GetTask", parts, "working", "done") {
		t.Error(err)
	}
	res, err := c.SendMessage(testCtx(t), up.Msg("direct"))
	if err != nil {
		t.Fatal(err)
	}
	if msg, ok := res.(*a2a.Message); !ok {
		t.Errorf("SendMessage answered %T, want the agent's Message", res)
	} else {
		for _, err := range keyErrors("SendMessage", msg.Parts, "direct answer") {
			t.Error(err)
		}
	}
	v03 := openV03(t, p, "agent").(*v03Conv)
	v03Turn := v03.stream(t, "work", nil)
	old, err := v03.c.GetTask(testCtx(t), &a2a03.TaskQueryParams{ID: a2a03.TaskID(v03Turn.Task.TaskID)})
	if err != nil {
		t.Fatalf("A2A v0.3 tasks/get: %v", err)
	}
	parts = nil
	for _, a := range old.Artifacts {
		for _, op := range a.Parts {
			if tp, ok := op.(a2a03.TextPart); ok {
				parts = append(parts, &a2a.Part{Content: a2a.Text(tp.Text), Metadata: tp.Metadata})
			}
		}
	}
	for _, err := range keyErrors("A2A v0.3 tasks/get", parts, "working", "done") {
		t.Error(err)
	}
}
