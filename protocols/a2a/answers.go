package a2a

// The A2A answers that are values or events rather than a rendered
// stream: message/send's result, the events of a stream for the v1.0
// bindings, the task of tasks/get and tasks/cancel, SubscribeToTask's
// events, all A2A v1.0 values as package a2amap builds them (A2A v0.3's
// calls convert them: a2amap.V03Task, V03Result). They read the frames
// through host.TaskFrames (egress's Service).

import (
	"context"
	"errors"
	"io"
	"iter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// A2AParams describes the A2A v0.3 call an answer is for (package a2amap's
// Params: the task and context ids, the submitted time, resubscription,
// the history length, the output modes, the interaction spec).
type A2AParams = a2amap.Params

// Answers makes the A2A answers from the frames f reads; the zero value
// is not usable.
type Answers struct{ f host.TaskFrames }

// NewAnswers returns the A2A answers over f (the host's frames: egress's
// Service).
func NewAnswers(f host.TaskFrames) Answers { return Answers{f: f} }

// A2ATask rebuilds the A2A Task made of requestIDs (in order, from the
// E2A_TASKS index ingress keeps) with a2amap.BuildTask. It returns
// egress.ErrNotFound when none of the requests exists.
func (a Answers) A2ATask(ctx context.Context, taskID, contextID string, requestIDs []string, historyLength *int) (*a2a.Task, error) {
	reqs, err := a.f.LoadRequests(ctx, requestIDs)
	if err != nil {
		return nil, err
	}
	return a2amap.BuildTask(taskID, contextID, reqs, historyLength), nil
}

// A2ACancel answers A2A tasks/cancel (v0.3 and v1.0):
// egress.ErrNotCancelable when the task's last request is already final,
// egress.ErrNotFound when it has none; otherwise its turns are cancelled
// (host.TaskFrames' CancelTurns), and the Task returned (state canceled once
// the worker stopped).
func (a Answers) A2ACancel(ctx context.Context, taskID, contextID string, requestIDs []string, cancel egress.CancelFunc) (*a2a.Task, error) {
	if _, err := a.f.CancelTurns(ctx, requestIDs, cancel); err != nil {
		return nil, err
	}
	return a.A2ATask(ctx, taskID, contextID, requestIDs, nil)
}

// CancelTurns is host.TaskFrames' CancelTurns (A2A v1.0 CancelTask answers
// the task after it).
func (a Answers) CancelTurns(ctx context.Context, requestIDs []string, cancel egress.CancelFunc) (bool, error) {
	return a.f.CancelTurns(ctx, requestIDs, cancel)
}

// Heartbeat is the interval of a stream's keep-alives.
func (a Answers) Heartbeat() time.Duration { return a.f.Heartbeat() }

// A2AEvents yields the A2A events of requestID's frames from sequence from
// to the final frame, with no transport: the same events, in the same
// order, as A2A's message/stream and tasks/resubscribe SSE renderer
// (package protocols/a2a) writes before its part filters (a submitted status-update first unless p.Resubscribe or from > 0, then
// each frame's events; the submitted status-update is yielded with the
// first frame, and not at all when that frame is the agent's Message).
// It ends after the final frame's events; an error
// (egress.ErrNotFound for an unknown request unless opts skip the check, the
// wait limits, ctx) is yielded last. The events are A2A v1.0's, as the
// v1.0 bindings write them.
func (a Answers) A2AEvents(ctx context.Context, requestID string, p A2AParams, from int64, opts ...egress.ReplayOption) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		m := a2amap.NewStreamMapper(requestID, p, from)
		// The submitted status-update goes with the first frame, unless
		// that frame is the agent's direct answer, a Message: that stream
		// is the message alone, no task.
		var submitted a2a.Event
		if !p.Resubscribe && from == 0 {
			ts := p.SubmittedTime(now)
			submitted = m.StatusUpdate(a2a.TaskStateSubmitted, &ts, nil)
		}
		// Frames are decoded on demand: a plain text chunk's event is
		// built from its bytes (frameA2AEvents).
		rd, err := a.f.OpenPrepared(ctx, requestID, from, append([]egress.ReplayOption{egress.WithoutDecode()}, opts...)...)
		if err != nil {
			yield(nil, err)
			return
		}
		defer rd.Close()
		var f render.Frame
		for {
			f, err = rd.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if submitted != nil && !replyFrame(&f) && !yield(submitted, nil) {
				return
			}
			submitted = nil
			if !frameA2AEvents(m, &f, yield) {
				return
			}
		}
	}
}

// replyFrame reports whether f is the final frame of a turn the agent
// answered with a Message (e2a.Response.Reply).
func replyFrame(f *render.Frame) bool {
	if !f.IsFinal() || (f.Kind() != e2a.KindA2AStreamEvent && f.Kind() != e2a.KindA2AMessage) {
		return false
	}
	r, err := f.Decoded()
	if err != nil {
		return false
	}
	_, ok := r.Reply()
	return ok
}

// frameA2AEvents yields the A2A events of frame f: a plain text chunk's
// one event built from a partial decode of its bytes (render.ReadTextChunk,
// the same event Mapper.Events builds: TestA2AEventsFastTextMatches), any
// other frame's through Mapper.Events. It returns false once yield did or
// after yielding an error.
func frameA2AEvents(m *a2amap.Mapper, f *render.Frame, yield func(a2a.Event, error) bool) bool {
	if u, ok := readTextUpdate(m, f); ok {
		return yield(&a2a.TaskArtifactUpdateEvent{TaskID: a2a.TaskID(u.TaskID), ContextID: u.ContextID, Append: u.Append,
			Artifact: &a2a.Artifact{ID: a2a.ArtifactID(u.ArtifactID), Parts: a2a.ContentParts{a2a.NewTextPart(u.Text)}},
			Metadata: map[string]any{a2amap.MetaLLMResponseID: u.LLMResponseID, a2amap.MetaObjectType: a2amap.ObjectChatCompletionChunk, a2amap.MetaTag: ""}}, nil)
	}
	resp, err := f.Decoded()
	if err != nil {
		yield(nil, err)
		return false
	}
	evs, err := m.Events(resp)
	if err != nil {
		yield(nil, err)
		return false
	}
	for _, ev := range evs {
		if !yield(ev, nil) {
			return false
		}
	}
	return true
}

// A2AResult waits for requestID's final frame and returns what
// message/send answers: a Message (the agent answered with one message) or
// a Task, as A2A's JSON renderer (package protocols/a2a) does before its
// part filters (both aggregate with a2amap.Aggregator).
func (a Answers) A2AResult(ctx context.Context, requestID string, p A2AParams, opts ...egress.ReplayOption) (a2a.SendMessageResult, error) {
	agg := a2amap.NewAggregator(requestID, p)
	rd, err := a.f.OpenReader(ctx, requestID, 0, opts...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	for {
		f, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			return agg.Result(p.HistoryLength), nil
		}
		if err != nil {
			return nil, err
		}
		resp, err := f.Decoded()
		if err != nil {
			return nil, err
		}
		if err := agg.Add(resp); err != nil {
			return nil, err
		}
	}
}

// A2ASubscription answers A2A v1.0 SubscribeToTask: the task rebuilt from
// the stored frames of requestIDs first (the current state, whatever it
// is: a finished task is replayed from the durable streams this way), then,
// unless that state is terminal or interrupted (input-required,
// auth-required: the turn is over), the events of the last request's later
// frames as they are written, to its final frame. It yields egress.ErrNotFound
// when none of the requests exists.
//
// interaction is A2AParams.Interaction for the live events (the task
// itself is rebuilt whole, as tasks/get answers it).
func (a Answers) A2ASubscription(ctx context.Context, taskID, contextID string, requestIDs []string, interaction bool) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		reqs, err := a.f.LoadRequests(ctx, requestIDs)
		if err != nil {
			yield(nil, err)
			return
		}
		t := a2amap.BuildTask(taskID, contextID, reqs, nil)
		// An interrupted task's turn is over too: its stream ends at the
		// question (the answer starts a new request).
		if !yield(t, nil) || t.Status.State.Terminal() || a2amap.Interrupted(t.Status.State) {
			return
		}
		last := reqs[len(reqs)-1]
		p := A2AParams{TaskID: taskID, ContextID: t.ContextID, Resubscribe: true, Interaction: interaction}
		for ev, err := range a.A2AEvents(ctx, last.Envelope.RequestID, p, int64(len(last.Frames))) {
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}
