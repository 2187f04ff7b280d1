package a2abridge_test

import (
	"context"
	"fmt"
	"iter"
	"maps"
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
// mediaType, filename and metadata for an A2A v1.0 client: in the stream
// (the working one in its status-update), in GetTask (the working one in
// history, the completed one's text in an artifact) and in a blocking
// SendMessage's Message; an A2A v0.3 client's tasks/get has the two text
// parts with their metadata (v0.3's text part has no other field). They
// were dropped: the bridge wrote no artifact_part_fields and no
// artifact_part_metadata for a message's text.
func TestMessagePartFieldsReachA2AClients(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, msgFieldsAgent{})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	want := map[string][2]string{"working": {"text/markdown", "w.md"}, "done": {"text/csv", "c.csv"}}
	check := func(what string, parts []*a2a.Part) {
		t.Helper()
		for _, err := range append(textFieldErrors(what, parts, want), keyErrors(what, parts, "working", "done")...) {
			t.Error(err)
		}
	}
	turn := up.Collect(t, c.SendStreamingMessage(testCtx(t), up.Msg("work")), nil)
	if st := turn.State(); st != a2a.TaskStateCompleted {
		t.Fatalf("stream ended %s, want completed", st)
	}
	check("stream", append(artifactParts(maps.Values(turn.Artifacts)), messageParts(slices.Values(turn.Said))...))
	task, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: turn.Task.TaskID})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	check("GetTask", append(artifactParts(slices.Values(task.Artifacts)), messageParts(slices.Values(task.History))...))

	v03 := openV03(t, p, "agent").(*v03Conv)
	v03Turn := v03.stream(t, "work", nil)
	old, err := v03.c.GetTask(testCtx(t), &a2a03.TaskQueryParams{ID: a2a03.TaskID(v03Turn.Task.TaskID)})
	if err != nil {
		t.Fatalf("A2A v0.3 tasks/get: %v", err)
	}
	var (
		texts []string
		parts []*a2a.Part
	)
	add := func(ps a2a03.ContentParts) {
		for _, op := range ps {
			if tp, ok := op.(a2a03.TextPart); ok {
				texts = append(texts, tp.Text)
				parts = append(parts, &a2a.Part{Content: a2a.Text(tp.Text), Metadata: tp.Metadata})
			}
		}
	}
	for _, m := range old.History {
		if m.Role == a2a03.MessageRoleAgent {
			add(m.Parts)
		}
	}
	for _, a := range old.Artifacts {
		add(a.Parts)
	}
	if !slices.Equal(texts, []string{"working", "done"}) {
		t.Errorf("A2A v0.3 tasks/get: text parts %q (the agent's in history, then the artifacts'), want [working done]", texts)
	}
	for _, err := range keyErrors("A2A v0.3 tasks/get", parts, "working", "done") {
		t.Error(err)
	}

	direct := map[string][2]string{"direct answer": {"text/markdown", "m.md"}}
	res, err := c.SendMessage(testCtx(t), up.Msg("direct"))
	if err != nil {
		t.Fatal(err)
	}
	msg, ok := res.(*a2a.Message)
	if !ok {
		t.Fatalf("SendMessage answered %T, want the agent's Message", res)
	}
	for _, err := range append(textFieldErrors("SendMessage", msg.Parts, direct), keyErrors("SendMessage", msg.Parts, "direct answer")...) {
		t.Error(err)
	}
	turn = up.Collect(t, c.SendStreamingMessage(testCtx(t), up.Msg("direct")), nil)
	got := artifactParts(maps.Values(turn.Artifacts))
	if turn.Message != nil {
		got = append(got, turn.Message.Parts...)
	}
	for _, err := range textFieldErrors("stream of direct", got, direct) {
		t.Error(err)
	}
}

// messageParts is the parts of the agent's messages among msgs, in their
// order.
func messageParts(msgs iter.Seq[*a2a.Message]) []*a2a.Part {
	var parts []*a2a.Part
	for m := range msgs {
		if m.Role == a2a.MessageRoleAgent {
			parts = append(parts, m.Parts...)
		}
	}
	return parts
}

// artifactParts is the parts of artifacts, in their order.
func artifactParts(artifacts iter.Seq[*a2a.Artifact]) []*a2a.Part {
	var parts []*a2a.Part
	for a := range artifacts {
		parts = append(parts, a.Parts...)
	}
	return parts
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
