package a2abridge

import (
	"context"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// TestGapMessages: the agent's messages a task snapshot holds are written
// once each (a working one as the agent's status-update, a completed
// status's as the answer's text), those the turn did not write only: its history's after what
// was streamed, its working status message (also when the history holds
// it too), a completed status's message as the turn's end; a takeover's
// first snapshot writes none of them (the worker before it may have) and
// the snapshots after write those that came since; a continuation writes
// none of the messages the task held before it (base).
func TestGapMessages(t *testing.T) {
	msg := func(id, text string, role a2a.MessageRole) *a2a.Message {
		m := a2a.NewMessage(role, a2a.NewTextPart(text))
		m.ID = id
		return m
	}
	agent := func(id string) *a2a.Message { return msg(id, id+" ", a2a.MessageRoleAgent) }
	user := func(id string) *a2a.Message { return msg(id, "user "+id+" ", a2a.MessageRoleUser) }
	task := func(state a2a.TaskState, status *a2a.Message, history ...*a2a.Message) *a2a.Task {
		return &a2a.Task{ID: "t", ContextID: "c", History: history, Status: a2a.TaskStatus{State: state, Message: status}}
	}
	working, completed, input := a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateInputRequired
	for _, v := range []struct {
		name     string
		takeover bool
		base     *a2a.Task
		events   []a2a.Event
		want     string
		final    bool
	}{
		{name: "streamed", events: []a2a.Event{
			&a2a.TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Status: a2a.TaskStatus{State: working, Message: agent("m1")}},
			task(working, agent("m3"), user("u"), agent("m1"), agent("m2")),
			task(working, agent("m3"), user("u"), agent("m1"), agent("m2"), agent("m3")),
			task(completed, agent("m5"), user("u"), agent("m1"), agent("m2"), agent("m3"), agent("m4"), agent("m5")),
		}, want: "m1 m2 m3 m4 m5 ", final: true},
		{name: "takeover", takeover: true, events: []a2a.Event{
			task(working, agent("m2"), user("u"), agent("m1")),
			task(working, agent("m2"), user("u"), agent("m1")),
			task(working, agent("m4"), user("u"), agent("m1"), agent("m2"), agent("m3")),
		}, want: "m3 m4 "},
		{name: "continuation", base: task(input, agent("q"), user("u0"), agent("a0")), events: []a2a.Event{
			task(working, agent("m1"), user("u0"), agent("a0"), user("u1"), agent("q")),
			task(input, agent("q2"), user("u0"), agent("a0"), user("u1"), agent("q"), agent("m1")),
		}, want: "m1 ", final: true},
		{name: "no id", events: []a2a.Event{
			task(working, msg("", "x ", a2a.MessageRoleAgent), user("u"), msg("", "y ", a2a.MessageRoleAgent)),
		}, want: ""},
	} {
		t.Run(v.name, func(t *testing.T) {
			client, err := bridge.NewClient("http://agent.invalid")
			if err != nil {
				t.Fatal(err)
			}
			w := &agenttest.Writer{}
			tn := &turn{u: &Upstream{http: client}, env: &e2a.Envelope{RequestID: "q"}, w: w, saidUnknown: v.takeover}
			if v.base != nil {
				tn.base(v.base)
			}
			for i, ev := range v.events {
				if err := tn.event(context.Background(), ev); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			got := ""
			for _, f := range w.Frames() {
				if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaText {
					got += c.Delta.(string) // a completed status's message
				}
				if ev, _ := a2amap.NativeEvent(f); ev != nil {
					if su, ok := ev.(*legacy.TaskStatusUpdateEvent); ok && !f.IsFinal && su.Status.Message != nil {
						for _, p := range su.Status.Message.Parts {
							if tp, ok := p.(legacy.TextPart); ok {
								got += tp.Text // a working one's, as the agent's status-update
							}
						}
					}
				}
			}
			if got != v.want || w.Final() != v.final {
				t.Errorf("messages written %q (final %v), want %q (final %v)", got, w.Final(), v.want, v.final)
			}
		})
	}
}
