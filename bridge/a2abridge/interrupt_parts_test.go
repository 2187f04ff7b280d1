package a2abridge_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// askPartsAgent asks (input-required) with a message of two text parts,
// each with its mediaType, filename and metadata, around a data part,
// the message with metadata and an extension; the answer to it completes
// the task.
type askPartsAgent struct{}

func (askPartsAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	if ec.StoredTask != nil {
		return func(yield func(a2a.Event, error) bool) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
		}
	}
	which := withFields(a2a.NewTextPart("Which "), "text/markdown", "q.md")
	which.Metadata = map[string]any{"k": "first"}
	city := withFields(a2a.NewTextPart("city?"), "text/plain", "q.txt")
	city.Metadata = map[string]any{"k": "second"}
	msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, which, a2a.NewDataPart(map[string]any{"field": "city"}), city)
	msg.Metadata = map[string]any{"form": "city"}
	msg.Extensions = []string{"https://example.com/ext/form"}
	return func(yield func(a2a.Event, error) bool) {
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, msg), nil)
	}
}

func (askPartsAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// askPartsErrors checks a client's view of askPartsAgent's question m:
// its three parts in their order, each text part with its own mediaType,
// filename and metadata (fields: false for an A2A v0.3 client, whose
// text parts have neither), and the message's metadata and extensions.
func askPartsErrors(m *a2a.Message, fields bool) []error {
	if m == nil || len(m.Parts) != 3 {
		return []error{fmt.Errorf("question %v, want its three parts", m)}
	}
	var errs []error
	if m.Metadata["form"] != "city" || !slices.Equal(m.Extensions, []string{"https://example.com/ext/form"}) {
		errs = append(errs, fmt.Errorf("question's metadata %v, extensions %v; want the agent's form=city, https://example.com/ext/form",
			m.Metadata, m.Extensions))
	}
	for i, want := range []struct{ text, mediaType, filename, k string }{
		{"Which ", "text/markdown", "q.md", "first"}, {}, {"city?", "text/plain", "q.txt", "second"},
	} {
		p := m.Parts[i]
		if want.text == "" {
			if p.Data() == nil {
				errs = append(errs, fmt.Errorf("part %d: %v, want the data part", i, p))
			}
			continue
		}
		if !fields {
			want.mediaType, want.filename = "", ""
		}
		if p.Text() != want.text || p.MediaType != want.mediaType || p.Filename != want.filename || p.Metadata["k"] != want.k {
			errs = append(errs, fmt.Errorf("part %d: text %q, mediaType %q, filename %q, metadata %v; want %q, %q, %q, k=%s",
				i, p.Text(), p.MediaType, p.Filename, p.Metadata, want.text, want.mediaType, want.filename, want.k))
		}
	}
	return errs
}

// TestInterruptPartsAsSent: a bridged A2A agent's question
// (input-required) of several text parts reaches an A2A client with its
// parts as the agent sent them: each text part its own, with its
// mediaType, filename and metadata, in its place among the other parts,
// and the message's metadata and extensions; in the stream, GetTask's
// status, and the task's history once answered (A2A v1.0), and in an
// A2A v0.3 client's stream; E2A's and ACP's clients get its text joined.
// The text parts were joined into one part first, of the last one's
// fields and no metadata, and the message had no metadata nor extension.
func TestInterruptPartsAsSent(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, askPartsAgent{})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("agent")))
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	var question *a2a.Message
	turn := up.Collect(t, func(yield func(a2a.Event, error) bool) {
		for ev, err := range c.SendStreamingMessage(testCtx(t), up.Msg("ask")) {
			if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && su.Status.Message != nil {
				question = su.Status.Message
			}
			if !yield(ev, err) {
				return
			}
		}
	}, nil)
	if st := turn.State(); st != a2a.TaskStateInputRequired {
		t.Fatalf("stream ended %s, want input-required", st)
	}
	for _, err := range askPartsErrors(question, true) {
		t.Errorf("stream: %v", err)
	}
	task, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: turn.Task.TaskID})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	for _, err := range askPartsErrors(task.Status.Message, true) {
		t.Errorf("GetTask: %v", err)
	}
	if st := up.Send(t, c, up.Reply(turn.Task, "Paris")).State(); st != a2a.TaskStateCompleted {
		t.Fatalf("the answer's turn ended %s, want completed", st)
	}
	task, err = c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: turn.Task.TaskID})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	var asked *a2a.Message
	for _, m := range task.History {
		if m.Role == a2a.MessageRoleAgent && len(m.Parts) > 0 && strings.Contains(up.TextOf(m.Parts), "city?") {
			asked = m
		}
	}
	for _, err := range askPartsErrors(asked, true) {
		t.Errorf("GetTask's history: %v", err)
	}

	v03 := openV03(t, p, "agent").(*v03Conv)
	var v03Question *a2a.Message
	v03.stream(t, "ask", func(ev a2a03.Event) {
		if su, ok := ev.(*a2a03.TaskStatusUpdateEvent); ok && su.Status.Message != nil {
			v1, err := a2av0.ToV1Message(su.Status.Message)
			if err != nil {
				t.Errorf("A2A v0.3 question: %v", err)
			}
			v03Question = v1
		}
	})
	for _, err := range askPartsErrors(v03Question, false) {
		t.Errorf("A2A v0.3 stream: %v", err)
	}
	if s := openE2A(t, p, "agent").send(t, "ask"); s.state != "input-required" || s.message != "Which city?" {
		t.Errorf("E2A: %s %q, want input-required \"Which city?\"", s.state, s.message)
	}
	if s := openACP(t, p, "agent").send(t, "ask"); s.text != "Which city?" {
		t.Errorf("ACP: %s, text %q, want \"Which city?\"", s.state, s.text)
	}
}
