package a2amap_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// TestTaskBuilderMatchesBuildTask: after every frame of every conformance
// scenario (text, reasoning, tools, code, errors, cancel, input- and
// auth-required, ACP and A2A native frames, a frame that does not decode),
// as the only turn of its task and after earlier turns (one interrupted),
// with each kind of user message, the builder's Task marshals to the same
// bytes as BuildTask's over the same frames, Status is its status, and
// asking twice changes nothing. MarshalV03Task (texts and earlier messages
// spliced in) makes the same bytes, with the status before the frame too,
// and never falls back to marshaling the task whole.
func TestTaskBuilderMatchesBuildTask(t *testing.T) {
	byName := map[string]conformance.Scenario{}
	var current []conformance.Scenario
	for _, sc := range conformance.Scenarios() {
		byName[sc.Name] = sc
		if sc.From == 0 && len(sc.Frames) > 0 {
			current = append(current, sc)
		}
	}
	current = append(current, conformance.Scenario{Name: "text_frames", Frames: conformance.TextFrames()},
		conformance.Scenario{Name: "labeled_frames", Frames: conformance.LabeledTextFrames()},
		conformance.Scenario{Name: "bad_frame", Frames: withBadFrame(byName["a2a_native"].Frames)},
		conformance.Scenario{Name: "bad_final", Frames: withBadFinal(byName["a2a_native"].Frames)})
	turn := func(name string) a2amap.Request {
		sc := byName[name]
		return a2amap.Request{Envelope: &e2a.Envelope{RequestID: sc.RequestID(), Params: map[string]any{"text": "q " + name}}, Frames: sc.Frames}
	}
	histories := map[string][]a2amap.Request{
		"first":       nil,
		"after_two":   {turn("trpc_tool_call"), turn("input_required")},
		"after_auth":  {turn("auth_required")},
		"no_envelope": {{Frames: byName["spec_12_8"].Frames}},
	}
	envs := map[string]func(id string) *e2a.Envelope{
		"text": func(id string) *e2a.Envelope {
			return &e2a.Envelope{RequestID: id, Params: map[string]any{"text": "the question"}}
		},
		"a2a_message": func(id string) *e2a.Envelope {
			return &e2a.Envelope{RequestID: id, ContextID: "ctx-env", Params: map[string]any{"message": map[string]any{
				"kind": "message", "messageId": "m-1", "role": "user", "parts": []any{map[string]any{"kind": "text", "text": "hi"}}}}}
		},
		"none": func(string) *e2a.Envelope { return nil },
	}
	for _, sc := range current {
		for hn, prev := range histories {
			for en, mk := range envs {
				t.Run(sc.Name+"/"+hn+"/"+en, func(t *testing.T) {
					for _, ids := range [][2]string{{"task-002", "ctx-001"}, {"task-002", ""}} {
						// An unreadable a2a.* frame is skipped (final: the
						// task ends failed), never refused.
						if bad := compareBuilder(t, ids[0], ids[1], prev, mk(sc.RequestID()), sc.Frames); bad != 0 {
							t.Errorf("%d frames refused, want none", bad)
						}
					}
				})
			}
		}
	}
}

// compareFollowed compares FollowedBy, after the turn's final frame, with
// BuildTask over the task's requests reqs and a next request queued
// behind them (with a user message, without one, its envelope not
// stored), as tasks/get answers while that request waits.
func compareFollowed(t *testing.T, b *a2amap.TaskBuilder, taskID, contextID string, reqs []a2amap.Request) {
	t.Helper()
	for _, next := range []*e2a.Envelope{
		{RequestID: "req-next", Params: map[string]any{"text": "and then?"}},
		{RequestID: "req-next"},
		nil,
	} {
		want := marshal(t, a2amap.BuildTask(taskID, contextID, append(slices.Clone(reqs), a2amap.Request{Envelope: next}), nil))
		if got := marshal(t, b.FollowedBy(next)); !bytes.Equal(got, want) {
			t.Fatalf("FollowedBy(%+v):\nbuilder   %s\nBuildTask %s", next, got, want)
		}
	}
}

// compareBuilder compares the builder with BuildTask after each of
// frames; it returns how many frames Add refused.
func compareBuilder(t *testing.T, taskID, contextID string, prev []a2amap.Request, env *e2a.Envelope, frames []*e2a.Response) (refused int) {
	t.Helper()
	b := a2amap.NewTaskBuilder(taskID, contextID, prev, env)
	before := b.Status()
	for k := 0; k <= len(frames); k++ {
		if k > 0 {
			before = b.Status()
			if b.Add(frames[k-1]) != nil {
				refused++
			}
		}
		reqs := append(slices.Clone(prev), a2amap.Request{Envelope: env, Frames: frames[:k]})
		full := a2amap.BuildTask(taskID, contextID, reqs, nil)
		want := marshal(t, full)
		task := b.Task()
		got := marshal(t, task)
		if !bytes.Equal(got, want) {
			t.Fatalf("after %d of %d frames:\nbuilder   %s\nBuildTask %s", k, len(frames), got, want)
		}
		if again := marshal(t, b.Task()); !bytes.Equal(again, got) {
			t.Fatalf("after %d frames, a second Task differs:\n%s\n%s", k, again, got)
		}
		if st, want := marshal(t, b.Status()), marshal(t, task.Status); !bytes.Equal(st, want) {
			t.Fatalf("after %d frames, Status %s, Task's %s", k, st, want)
		}
		if m, err := b.MarshalV03Task(nil); err != nil || !bytes.Equal(m, marshal(t, a2amap.V03Task(full))) {
			t.Fatalf("after %d frames, MarshalV03Task %s (%v), BuildTask %s", k, m, err, marshal(t, a2amap.V03Task(full)))
		}
		// With the status before the frame, as push posts an update
		// that comes before its frame's status update.
		full.Status = before
		if m, err := b.MarshalV03Task(&before); err != nil || !bytes.Equal(m, marshal(t, a2amap.V03Task(full))) {
			t.Fatalf("after %d frames, MarshalV03Task with the earlier status %s (%v), want %s", k, m, err, marshal(t, a2amap.V03Task(full)))
		}
		if k == len(frames) && k > 0 && frames[k-1].IsFinal {
			compareFollowed(t, b, taskID, contextID, reqs)
		}
	}
	if n := a2amap.Misses(b); n > 0 {
		t.Errorf("%d MarshalV03Task calls fell back to marshaling the task whole", n)
	}
	return refused
}

// withBadFrame is frames with an a2a.stream_event that does not decode
// before the last.
func withBadFrame(frames []*e2a.Response) []*e2a.Response {
	bad := *frames[0]
	bad.ResponseKind, bad.Body = "a2a.stream_event", json.RawMessage(`{"kind":"status-update","status":7}`)
	out := slices.Clone(frames[:len(frames)-1])
	return append(out, &bad, frames[len(frames)-1])
}

// withBadFinal is frames with the last replaced by a final
// a2a.stream_event that does not decode.
func withBadFinal(frames []*e2a.Response) []*e2a.Response {
	bad := *frames[len(frames)-1]
	bad.ResponseKind, bad.Body = "a2a.stream_event", json.RawMessage(`{"branch":"status_update","payload":{"status":42}}`)
	return append(slices.Clone(frames[:len(frames)-1]), &bad)
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplyEndedTurnCompleted: a turn the agent ends with its own Message
// (agent.Reply: a final a2a.stream_event of branch message) is completed,
// the Message last in the task's history and no artifact of it, in
// BuildTask (tasks/get, ListTasks), the builder (push) and a continued
// call's answer alike.
func TestReplyEndedTurnCompleted(t *testing.T) {
	env := &e2a.Envelope{RequestID: "req-reply", Params: map[string]any{"text": "Paris"}}
	frames := []*e2a.Response{{RequestID: "req-reply", ResponseID: "resp-reply", ResponseKind: e2a.KindA2AStreamEvent,
		Status: e2a.StatusSucceeded, IsFinal: true, Body: e2a.MarshalBody(e2a.ReplyBody("Hello, Paris"))}}
	compareBuilder(t, "task-r", "ctx-r", nil, env, frames)
	task := a2amap.BuildTask("task-r", "ctx-r", []a2amap.Request{{Envelope: env, Frames: frames}}, nil)
	if task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 0 || len(task.History) != 2 ||
		task.History[1].Role != a2a.MessageRoleAgent {
		t.Fatalf("BuildTask %s: want completed, the user's message then the agent's Message in history, no artifact", marshal(t, task))
	}
	agg := a2amap.NewAggregator("req-reply", a2amap.Params{TaskID: "task-r", ContextID: "ctx-r", Continued: true,
		Task: &a2a.Task{ID: "task-r", ContextID: "ctx-r"}})
	for _, f := range frames {
		_ = agg.Add(f)
	}
	res, ok := agg.Result(nil).(*a2a.Task)
	if !ok || res.Status.State != a2a.TaskStateCompleted || len(res.Artifacts) != 0 || len(res.History) != 1 {
		t.Fatalf("continued call's answer %s: want the Task completed, the agent's Message in history", marshal(t, agg.Result(nil)))
	}
}

// TestReplyInTaskStreamIsStatusUpdate: the agent's direct answer
// (agent.Reply) in the stream of a task that exists (a continued task's
// message/stream, a resubscription) is the task's final status-update,
// completed, carrying the message with the task's id; the stream of a
// message that made no task stays the Message alone.
func TestReplyInTaskStreamIsStatusUpdate(t *testing.T) {
	reply := func() *e2a.Response {
		return &e2a.Response{RequestID: "req-reply", ResponseID: "resp-reply", ResponseKind: e2a.KindA2AStreamEvent,
			Status: e2a.StatusSucceeded, IsFinal: true, Body: e2a.MarshalBody(e2a.ReplyBody("Hello, Paris"))}
	}
	for _, p := range []a2amap.Params{
		{TaskID: "task-r", ContextID: "ctx-r", Continued: true},
		{TaskID: "task-r", ContextID: "ctx-r", Resubscribe: true},
	} {
		m := a2amap.NewStreamMapper("req-reply", p, 0)
		if m.Replied(reply()) {
			t.Errorf("%+v: Replied true; a task's stream opens with the Task", p)
		}
		evs, err := m.Events(reply())
		if err != nil {
			t.Fatal(err)
		}
		su, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent)
		if len(evs) != 1 || !ok || !m.Final(su) || su.TaskID != "task-r" || su.Status.State != a2a.TaskStateCompleted ||
			su.Status.Message == nil || su.Status.Message.TaskID != "task-r" || su.Status.Message.Parts[0].Text() != "Hello, Paris" {
			t.Fatalf("%+v: events %s; want one final status-update of task-r, completed, with the reply", p, marshal(t, evs))
		}
	}
	m := a2amap.NewStreamMapper("req-reply", a2amap.Params{}, 0)
	replied := m.Replied(reply())
	evs, err := m.Events(reply())
	if !replied || err != nil || len(evs) != 1 {
		t.Fatalf("a new message's stream: Replied %v, events %s (%v); want the Message alone", replied, marshal(t, evs), err)
	}
	if _, ok := evs[0].(*a2a.Message); !ok {
		t.Fatalf("a new message's stream: %T, want the Message", evs[0])
	}
}

// TestFailedReplyInTaskStreamAgreesWithTask: a turn of a task that
// exists (a continued task's stream, a resubscription) ended by a final
// a2a.stream_event of branch message whose frame says failed (an --http
// agent may write one: bridge/httpagent passes the frame's status through)
// is failed for tasks/get (BuildTask: FinalOutcome reads the frame's
// status) and for message/send (the Aggregator of the continued call). The
// task's stream must end in that same state: a stream saying completed
// while GetTask says failed gives two answers for one turn.
func TestFailedReplyInTaskStreamAgreesWithTask(t *testing.T) {
	frame := func() *e2a.Response {
		return &e2a.Response{RequestID: "req-f", ResponseID: "resp-f", TaskID: "task-f", ContextID: "ctx-f",
			ResponseKind: e2a.KindA2AStreamEvent, Status: e2a.StatusFailed, IsFinal: true,
			Body: e2a.MarshalBody(e2a.ReplyBody("the upstream broke"))}
	}
	env := &e2a.Envelope{RequestID: "req-f", TaskID: "task-f", ContextID: "ctx-f", Params: map[string]any{"text": "Paris"}}
	task := a2amap.BuildTask("task-f", "ctx-f", []a2amap.Request{{Envelope: env, Frames: []*e2a.Response{frame()}}}, nil)
	agg := a2amap.NewAggregator("req-f", a2amap.Params{TaskID: "task-f", ContextID: "ctx-f", Continued: true})
	if err := agg.Add(frame()); err != nil {
		t.Fatal(err)
	}
	sent, ok := agg.Result(nil).(*a2a.Task)
	if !ok || sent.Status.State != task.Status.State {
		t.Fatalf("message/send answered %+v; tasks/get says %s", agg.Result(nil), task.Status.State)
	}
	for _, p := range []a2amap.Params{
		{TaskID: "task-f", ContextID: "ctx-f", Continued: true},
		{TaskID: "task-f", ContextID: "ctx-f", Resubscribe: true},
	} {
		m := a2amap.NewStreamMapper("req-f", p, 0)
		evs, err := m.Events(frame())
		if err != nil || len(evs) == 0 {
			t.Fatalf("%+v: events %v (%v)", p, evs, err)
		}
		su, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent)
		if !ok || !m.Final(su) {
			t.Fatalf("%+v: last event %T; want the task's final status-update", p, evs[len(evs)-1])
		}
		if su.Status.State != task.Status.State {
			t.Errorf("%+v: the task's stream ends %s, but tasks/get (BuildTask) and message/send say %s for the same frames",
				p, su.Status.State, task.Status.State)
		}
	}
}
