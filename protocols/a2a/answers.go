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
	"fmt"
	"io"
	"iter"
	"slices"
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

// MetaHistoryExpired is the metadata key (value true) of a task some of
// whose frames aged out of the hot retention (E2A_RESPONSES) while the
// task's record and envelopes stayed: a turn whose frames all aged out is
// left out of it, one whose first frames did is rebuilt from those that
// remain (egress.StoredRequest.FramesExpired); and of a task with more
// turns than its record keeps (host.Session.Dropped: the oldest left
// out). The whole history is in the audit copy (`e2a replay <request
// id>`).
const MetaHistoryExpired = "e2a_history_expired"

// ErrHistoryAgedOut reports a task of which nothing can be read any more:
// its requests are still stored, but every turn's frames aged out of the
// hot retention (E2A_RESPONSES full or past its age: DiscardOld). No retry
// brings them back, so a read of the task (tasks/get, GetTask,
// SubscribeToTask, AgentVault tasks/get) is answered with the protocol's
// TaskNotFoundError (-32001, HTTP 404), its message saying why; it was
// -32000 "retry later" or 500 on A2A v1.0, -32603 on v0.3. The errors of
// it match egress.ErrNotFound and egress.ErrFramesExpired too.
var ErrHistoryAgedOut = errors.New("its history aged out of the hot retention (E2A_RESPONSES)")

// historyAgedOut is ErrHistoryAgedOut for the task id.
type historyAgedOut struct{ id string }

func (e *historyAgedOut) Error() string {
	return fmt.Sprintf("%v: every turn of task %q lost its frames; their audit copies may be read with `e2a replay <request id>`",
		ErrHistoryAgedOut, e.id)
}

func (e *historyAgedOut) Unwrap() []error {
	return []error{ErrHistoryAgedOut, egress.ErrNotFound, egress.ErrFramesExpired}
}

// ClientMessage is what a client reads (egress.ClientMessage): Error.
func (e *historyAgedOut) ClientMessage() string { return e.Error() }

// Answers makes the A2A answers from the frames f reads; the zero value
// is not usable.
type Answers struct{ f host.TaskFrames }

// NewAnswers returns the A2A answers over f (the host's frames: egress's
// Service).
func NewAnswers(f host.TaskFrames) Answers { return Answers{f: f} }

// A2ATask rebuilds the A2A Task made of requestIDs (in order) with
// a2amap.BuildTask, every request read as the task's: the caller's own,
// just accepted (A2ATaskOf reads a task's record). It returns
// egress.ErrNotFound when none of the requests exists.
func (a Answers) A2ATask(ctx context.Context, taskID, contextID string, requestIDs []string, historyLength *int) (*a2a.Task, error) {
	return a.A2ATaskOf(ctx, unowned(taskID, contextID, requestIDs), historyLength)
}

// A2ATaskOf is A2ATask for the task t, as the E2A_TASKS index ingress
// keeps it: of its requests, those that are its own
// (host.Session.OwnRequests). egress.ErrNotFound when none is left.
func (a Answers) A2ATaskOf(ctx context.Context, t *host.Task, historyLength *int) (*a2a.Task, error) {
	reqs, expired, err := a.loadMarked(ctx, t)
	if err != nil {
		return nil, err
	}
	return markExpired(a2amap.BuildTask(t.ID, t.ContextID, reqs, historyLength), expired), nil
}

// A2ATaskNow is A2ATaskOf for the task t as its record lists it once its
// frames are read: a terminal state is final (A2A), and a turn recorded
// after the last stored turn read, while that one ran (taken: queued
// behind it), runs next, the task's state then that turn's. Read before
// the frames, or listed and not stored yet (a turn is recorded before it
// is published), that turn was missed and the task answered completed
// while it ran. So when the task read is terminal, later (Follow.Later:
// the turn the record lists after a turn now, host.Tasks.LaterTurn; nil:
// A2ATaskOf alone) is asked for the turn after the last stored one read,
// and the task read again with it once it is stored (awaited with the
// Listing ctx carries, egress.WithListing, when later has not: stored, or
// taken out of the record). A task read not terminal costs nothing more;
// a terminal one, the read of later (host.Tasks.LaterTurn: one direct get
// of the record, none found for a task of one turn). A read that fails
// leaves the task as read.
func (a Answers) A2ATaskNow(ctx context.Context, t *host.Task, historyLength *int, later func(ctx context.Context, after string) (string, error)) (*a2a.Task, error) {
	for attempt := 0; ; attempt++ {
		reqs, expired, err := a.loadMarked(ctx, t)
		if err != nil {
			return nil, err
		}
		task := markExpired(a2amap.BuildTask(t.ID, t.ContextID, reqs, historyLength), expired)
		if later == nil || len(reqs) == 0 || !task.Status.State.Terminal() || attempt == maxTaskRereads {
			return task, nil
		}
		last := reqs[len(reqs)-1].Envelope.RequestID
		next, err := later(ctx, last)
		if err != nil || next == "" {
			return task, nil
		}
		if stored, err := a.f.AwaitRequests(ctx, []string{next}, host.AwaitPublish); err != nil || !stored {
			return task, nil
		}
		i := slices.Index(t.RequestIDs, last)
		now := *t
		now.RequestIDs = append(slices.Clone(t.RequestIDs[:i+1]), next)
		t = &now
	}
}

// maxTaskRereads bounds the reads of a task again in A2ATaskNow: turns
// recorded as fast as their task is read.
const maxTaskRereads = 4

// ListedLater is the Follow.Later of the record listed reads: the request
// it lists after after ("" when none, or after is not in it).
func ListedLater(listed egress.Listing) func(ctx context.Context, after string) (string, error) {
	return func(ctx context.Context, after string) (string, error) {
		ids, err := listed(ctx)
		if err != nil || !slices.Contains(ids, after) {
			return "", err
		}
		i := slices.Index(ids, after)
		if i == len(ids)-1 {
			return "", nil
		}
		return ids[i+1], nil
	}
}

// A2ATurnTask is the Task an A2A v1.0 stream of a turn opens with (A2A
// v1.0 §3.1.2: a task's stream begins with the Task), as tasks/get answers
// it once the turn is recorded, before it has a frame: the requests of the
// task t before the turn (its own: host.Session.OwnRequests; none read
// when t has none, a new task) rebuilt from their frames, then env, the
// turn's request, without frames (a2amap.BuildTask: its user message last
// in history, the state submitted, or the earlier turn's while that one
// runs: turns of a task run one after another). historyLength keeps the
// last N history messages. Earlier requests that cannot be read are left
// out: the stream opens all the same.
func (a Answers) A2ATurnTask(ctx context.Context, t *host.Task, env *e2a.Envelope, historyLength *int) *a2a.Task {
	var reqs []egress.StoredRequest
	expired := false
	if len(t.RequestIDs) > 0 {
		reqs, expired, _ = a.loadMarked(ctx, t)
	}
	reqs = append(reqs, egress.StoredRequest{Envelope: env})
	return markExpired(a2amap.BuildTask(t.ID, t.ContextID, reqs, historyLength), expired)
}

// TurnEnd reads the task again once its turn requestID (of envelope env)
// has ended, for that turn's blocking answer (a2amap.Params.TurnEnded):
// now is the task's record as it is then (nil when it could not be read),
// prev the record read when the turn was accepted (nil for the task's
// first turn). Prior is the task before a continuing turn (A2ATurnTask of
// the turns before requestID, now's when it lists requestID, else prev's);
// Now, when now lists a turn after requestID, the whole task as the
// record lists it once its frames are read (A2ATaskNow with the Listing
// ctx carries, egress.WithListing: TurnEnded's), once those later turns
// are stored (a turn is recorded before it is published), taken out of
// the record again (refused once recorded: not awaited further), or
// host.AwaitPublish has passed.
func (a Answers) TurnEnd(ctx context.Context, now, prev *host.Task, env *e2a.Envelope, requestID string) a2amap.TurnEnd {
	before := prev
	i := -1
	if now != nil {
		i = slices.Index(now.RequestIDs, requestID)
	}
	if i >= 0 && prev != nil {
		b := *now
		b.RequestIDs = now.RequestIDs[:i:i]
		before = &b
	}
	var end a2amap.TurnEnd
	if before != nil {
		end.Prior = a.A2ATurnTask(ctx, before, env, nil)
	}
	if i >= 0 && i < len(now.RequestIDs)-1 {
		// The later turns are recorded before they are published: one
		// whose publish is under way would be left out, and the task
		// answered as this turn left it (completed while a turn waits).
		// A turn whose publish failed is not waited for longer than a
		// publish takes, one taken out of the record no longer.
		_, _ = a.f.AwaitRequests(ctx, now.RequestIDs[i+1:], host.AwaitPublish)
		listed := egress.ListingOf(ctx)
		if listed == nil {
			listed = func(context.Context) ([]string, error) { return now.RequestIDs, nil }
		}
		if t, err := a.A2ATaskNow(ctx, now, nil, ListedLater(listed)); err == nil {
			end.Now = t
		}
	}
	return end
}

// unowned is the task taskID of requestIDs, every one read as its own (no
// principal).
func unowned(taskID, contextID string, requestIDs []string) *host.Task {
	return &host.Task{Session: host.Session{ID: taskID, RequestIDs: requestIDs}, ContextID: contextID}
}

// load reads the envelope and the stored frames of the task t's own
// requests (host.Session.OwnRequests), as loadMarked.
func (a Answers) load(ctx context.Context, t *host.Task) ([]egress.StoredRequest, error) {
	reqs, _, err := a.loadMarked(ctx, t)
	return reqs, err
}

// loadMarked is load telling whether frames of the task aged out
// (expired: the task is marked MetaHistoryExpired). A turn whose frames
// all aged out (egress.StoredRequest.FramesExpired, none left) is left
// out; one whose first frames did keeps those that remain. A task of which
// nothing remains is ErrHistoryAgedOut.
func (a Answers) loadMarked(ctx context.Context, t *host.Task) (reqs []egress.StoredRequest, expired bool, err error) {
	all, err := a.f.LoadRequests(ctx, t.RequestIDs)
	if err == nil {
		all, err = t.OwnRequests(all)
	}
	if err != nil {
		return nil, false, err
	}
	expired = t.Dropped > 0
	for _, rq := range all {
		expired = expired || rq.FramesExpired
		if !rq.FramesExpired || len(rq.Frames) > 0 {
			reqs = append(reqs, rq)
		}
	}
	if len(reqs) == 0 && expired {
		return nil, true, &historyAgedOut{id: t.ID}
	}
	return reqs, expired, nil
}

// markExpired marks task with MetaHistoryExpired when expired.
func markExpired(task *a2a.Task, expired bool) *a2a.Task {
	if expired {
		if task.Metadata == nil {
			task.Metadata = map[string]any{}
		}
		task.Metadata[MetaHistoryExpired] = true
	}
	return task
}

// turnEnded reports whether the stored request rq has ended: its final
// frame is stored, or its frames all aged out (it was answered).
func turnEnded(rq egress.StoredRequest) bool {
	f := rq.Frames
	return len(f) > 0 && f[len(f)-1].IsFinal || rq.FramesExpired && len(f) == 0
}

// nextSequence is the sequence of the frame after those of rq read (its
// first frames may have aged out: not their count).
func nextSequence(rq egress.StoredRequest) int64 {
	if n := len(rq.Frames); n > 0 {
		return rq.Frames[n-1].Sequence + 1
	}
	return 0
}

// A2ACancel is A2ACancelOf for the task taskID of requestIDs, every one
// read as its own.
func (a Answers) A2ACancel(ctx context.Context, taskID, contextID string, requestIDs []string, cancel egress.CancelFunc) (*a2a.Task, error) {
	return a.A2ACancelOf(ctx, unowned(taskID, contextID, requestIDs), cancel)
}

// A2ACancelOf answers A2A tasks/cancel (v0.3 and v1.0) of the task t:
// egress.ErrNotCancelable when its last request is already final,
// egress.ErrNotFound when it has none of its own; otherwise its turns are
// cancelled (CancelTurns), and the Task returned (state canceled once the
// worker stopped).
func (a Answers) A2ACancelOf(ctx context.Context, t *host.Task, cancel egress.CancelFunc) (*a2a.Task, error) {
	if _, err := a.CancelTurns(ctx, t, cancel); err != nil {
		return nil, err
	}
	return a.A2ATaskOf(ctx, t, nil)
}

// CancelTurns is host.TaskFrames' CancelTurns of the task t's own turns
// (ownTurns): another principal's request is never cancelled for it.
func (a Answers) CancelTurns(ctx context.Context, t *host.Task, cancel egress.CancelFunc) (bool, error) {
	ids, err := a.ownTurns(ctx, t)
	if err != nil {
		return false, err
	}
	return a.f.CancelTurns(ctx, ids, cancel)
}

// ownTurns is the part of the task t's requests that a cancel may reach,
// none of another principal's. host.TaskFrames' CancelTurns cancels the
// newest request and the turns before it that have not ended, walking
// back up to one that has its final frame (or whose frames aged out) or
// is not stored; ownTurns walks back the same way, reading each request
// (one LoadRequests: what remains of one whose first frames aged out), and
// leaves out the first that is not t's own (host.Session.OwnRequests)
// with every request before it. Nothing is read when t has no principal.
func (a Answers) ownTurns(ctx context.Context, t *host.Task) ([]string, error) {
	ids := t.RequestIDs
	if t.Principal == "" {
		return ids, nil
	}
	newest := len(ids) - 1
	for i := newest; i >= 0; i-- {
		reqs, err := a.f.LoadRequests(ctx, ids[i:i+1])
		if errors.Is(err, egress.ErrNotFound) {
			if i < newest {
				return ids[i:], nil // the walk ends there
			}
			continue // the newest is cancelled whatever earlier turns are
		}
		if err != nil {
			return nil, err
		}
		if _, err := t.OwnRequests(reqs); err != nil {
			return ids[i+1:], nil
		}
		if i < newest && turnEnded(reqs[0]) {
			return ids[i:], nil
		}
	}
	return ids, nil
}

// LastTurn is the task t's newest request, which a resubscription
// follows last (AgentVault's, that one alone): egress.ErrNotFound when it is not t's own
// (host.Session.OwnRequests of its envelope, or of its first frame when
// that is gone: host.TaskRequests.LoadRequestHead, when t has a
// principal; the resubscription reads its frames once, after).
func (a Answers) LastTurn(ctx context.Context, t *host.Task) (string, error) {
	last := t.LastRequest()
	if last == "" || t.Principal == "" {
		return last, nil
	}
	rq, err := a.f.LoadRequestHead(ctx, last)
	if errors.Is(err, egress.ErrNotFound) {
		return last, nil // not stored (yet): answered as an unknown request
	}
	if err == nil {
		_, err = t.OwnRequests([]egress.StoredRequest{rq})
	}
	if err != nil {
		return "", err
	}
	return last, nil
}

// TurnTime is the stored time of the turn requestID: its envelope's
// timestamp (when its front door received it), else its first frame's
// (LoadRequestHead reads it then); zero when neither is stored or
// parses. A v0.3 resubscription opens at it (Params.Submitted).
func (a Answers) TurnTime(ctx context.Context, requestID string) time.Time {
	rq, err := a.f.LoadRequestHead(ctx, requestID)
	if err != nil {
		return time.Time{}
	}
	if rq.Envelope != nil {
		if ts, err := e2a.ParseTime(rq.Envelope.Timestamp); err == nil {
			return ts
		}
	}
	if len(rq.Frames) > 0 {
		if ts := a2amap.FrameTime(rq.Frames[0]); ts != nil {
			return *ts
		}
	}
	return time.Time{}
}

// Heartbeat is the interval of a stream's keep-alives.
func (a Answers) Heartbeat() time.Duration { return a.f.Heartbeat() }

// A2AEvents yields the A2A events of requestID's frames from sequence from
// to the final frame, with no transport: the same events, in the same
// order, as the A2A v1.0 SSE renderers of SendStreamingMessage (package
// protocols/a2av1's NewStream) write before their part filters: the Task
// first (a2amap.Mapper.OpeningTask: p.Task, the task as its turn was
// submitted) unless p.Resubscribe or from > 0, then each frame's events;
// the Task is yielded with the first frame, and not at all when that
// frame is the agent's Message.
// It ends after the final frame's events; an error
// (egress.ErrNotFound for an unknown request unless opts skip the check, the
// wait limits, ctx) is yielded last. The events are A2A v1.0's, as the
// v1.0 bindings write them.
func (a Answers) A2AEvents(ctx context.Context, requestID string, p A2AParams, from int64, opts ...egress.ReplayOption) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		m := a2amap.NewStreamMapper(requestID, p, from)
		// The Task goes with the first frame (A2A v1.0
		// §3.1.2: a task's stream begins with the Task), unless that frame
		// is the agent's direct answer, a Message: that stream is the
		// message alone, no task.
		var submitted a2a.Event
		if !p.Resubscribe && from == 0 {
			ts := p.SubmittedTime(now)
			submitted = m.OpeningTask(p, &ts)
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
			if submitted != nil && !replyFrame(m, &f) && !yield(submitted, nil) {
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
// answered with a Message that stream m yields alone (a2amap.Mapper.Replied).
func replyFrame(m *a2amap.Mapper, f *render.Frame) bool {
	if !f.IsFinal() || (f.Kind() != e2a.KindA2AStreamEvent && f.Kind() != e2a.KindA2AMessage) {
		return false
	}
	r, err := f.Decoded()
	return err == nil && m.Replied(r)
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
// part filters (both aggregate with a2amap.Aggregator). When the server's
// shutdown ends the wait (egress.ShuttingDown), the answer is the Task as
// its frames so far make it, which the client follows as it does a
// non-blocking send's.
func (a Answers) A2AResult(ctx context.Context, requestID string, p A2AParams, opts ...egress.ReplayOption) (a2a.SendMessageResult, error) {
	agg := a2amap.NewAggregator(requestID, p)
	rd, err := a.f.OpenReader(ctx, requestID, 0, opts...)
	if egress.ShuttingDown(ctx, err) {
		return agg.Task(p.HistoryLength), nil // as below
	}
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	for {
		f, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			return agg.Result(p.HistoryLength), nil
		}
		if egress.ShuttingDown(ctx, err) {
			// The server stops before the turn ends: the task as it
			// stands, which the client follows (GetTask, SubscribeToTask).
			return agg.Task(p.HistoryLength), nil
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

// A2ASubscription answers A2A v1.0 SubscribeToTask of the task: the task
// rebuilt from the stored frames of its own requests first (A2ATaskOf; the
// current state, whatever it is: a finished task is replayed from the
// durable streams this way), then, unless that state is terminal, the
// events of the turns that have not ended as they are written: the oldest
// (the one running; a later one waits for it: turns of a task run one
// after another) from its first frame not in the task, to its final
// frame, then each later one (A2AFollow: those of the requests read,
// then those f.Later finds). An interrupted task (input-required,
// auth-required: the turn is over) goes on with the turn that answers it
// when f.Next is set, else its stream ends at the question. Every turn
// followed is the task's own. It yields egress.ErrNotFound when none of
// the task's requests exists.
//
// interaction is A2AParams.Interaction for the live events (the task
// itself is rebuilt whole, as tasks/get answers it); opts are each turn's
// read's (egress.CountedAs).
func (a Answers) A2ASubscription(ctx context.Context, task *host.Task, interaction bool, f Follow, opts ...egress.ReplayOption) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		reqs, expired, err := a.loadMarked(ctx, task)
		if err != nil {
			yield(nil, err)
			return
		}
		t := markExpired(a2amap.BuildTask(task.ID, task.ContextID, reqs, nil), expired)
		i, from := unendedFrom(reqs), int64(0)
		if first := runningTask(t, reqs, i, expired); first != nil {
			// The running turn's events from its first frame, after a task
			// without what it streamed so far (which the task holds as
			// history, not as the artifacts its events update).
			if !yield(first, nil) {
				return
			}
		} else {
			from = nextSequence(reqs[i])
			if !yield(t, nil) || t.Status.State.Terminal() {
				return
			}
		}
		p := A2AParams{TaskID: task.ID, ContextID: t.ContextID, Resubscribe: true, Interaction: interaction}
		if a2amap.Interrupted(t.Status.State) {
			// The turn is over: what follows is the answer's turn.
			if f.Next == nil {
				return
			}
			next, err := f.Next(ctx, task.LastRequest())
			if err != nil {
				if ctx.Err() == nil {
					yield(nil, err)
				}
				return
			}
			for ev, err := range a.A2AFollow(ctx, next, p, 0, f, append([]egress.ReplayOption{egress.WithoutRequestCheck()}, opts...)...) {
				if !yield(ev, err) {
					return
				}
			}
			return
		}
		// The turns read: each later one follows the one before it; after
		// them, those recorded since (f.Later).
		read := f
		read.Later = func(ctx context.Context, after string) (string, error) {
			for j := i; j < len(reqs)-1; j++ {
				if reqs[j].Envelope.RequestID == after {
					return reqs[j+1].Envelope.RequestID, nil
				}
			}
			if f.Later == nil {
				return "", nil
			}
			return f.Later(ctx, after)
		}
		// The running turn from its first frame (runningTask), or from its
		// frames not read yet when they are all in t.
		for ev, err := range a.A2AFollow(ctx, reqs[i].Envelope.RequestID, p, from, read, opts...) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

// runningTask is the first event of a subscription to the task t (built
// from reqs) whose turn reqs[i] is running with frames stored: t without
// that turn's frames, in t's status. A running turn's text is in the
// task's history until the turn completes (a2amap.BuildTask), while its
// events are artifact updates that append to what they started: a
// subscriber that got the task with that text and the events after it
// lost the answer's start. It is nil for any other task (ended,
// interrupted, or its running turn without frames yet): t itself is then
// the first event, the turn followed after the frames t holds.
func runningTask(t *a2a.Task, reqs []egress.StoredRequest, i int, expired bool) *a2a.Task {
	rq := reqs[i]
	if t.Status.State.Terminal() || a2amap.Interrupted(t.Status.State) || len(rq.Frames) == 0 || rq.Frames[len(rq.Frames)-1].IsFinal {
		return nil
	}
	stripped := slices.Clone(reqs)
	stripped[i].Frames = nil
	first := markExpired(a2amap.BuildTask(string(t.ID), t.ContextID, stripped, nil), expired)
	first.Status = t.Status
	return first
}

// Follow is how a stream of a task's events goes on from one of its turns
// (A2AFollow). Either may be nil: then the stream ends there.
type Follow struct {
	// Later returns the turn after the turn after as the task's record
	// lists it now ("" when there is none): a turn that ends in a terminal
	// state while a later one waits is followed by that one.
	Later func(ctx context.Context, after string) (string, error)
	// Next waits for the turn after the turn after, which ended
	// interrupted (input-required, auth-required): the turn the client's
	// answer starts.
	Next func(ctx context.Context, after string) (string, error)
}

// A2AFollow yields the events of the task's turn requestID (A2AEvents
// from from, with p and opts) and then, when that turn ends in a terminal
// or interrupted state while f.Later finds a later turn (or interrupted,
// when f.Next is set, once the answer's turn is recorded), that turn's
// events from its first frame, as a resubscription's (without the request
// check: a turn is recorded before it is published), and so on. A turn's
// terminal or interrupted status that a later turn follows (TakenBack) is
// written in the state tasks/get shows then, the later turn's: submitted
// (it has not begun), with the ended turn's status message (an
// interrupted turn's question). A task's terminal state is final (A2A):
// the stream never shows one that a later turn takes back, and it ends
// with the last turn's.
func (a Answers) A2AFollow(ctx context.Context, requestID string, p A2AParams, from int64, f Follow, opts ...egress.ReplayOption) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		turn := requestID
		for {
			var (
				held  *a2a.TaskStatusUpdateEvent // the turn's terminal status
				state a2a.TaskState
			)
			for ev, err := range a.A2AEvents(ctx, turn, p, from, opts...) {
				if err != nil {
					yield(nil, err)
					return
				}
				if held != nil {
					// Not the turn's last event after all.
					if !yield(held, nil) {
						return
					}
					held = nil
				}
				switch e := ev.(type) {
				case *a2a.Task:
					state = e.Status.State
				case *a2a.TaskStatusUpdateEvent:
					state = e.Status.State
					if TakenBack(state) && f.Later != nil {
						held = e
						continue
					}
				}
				if !yield(ev, nil) {
					return
				}
			}
			var next string
			if held != nil {
				// No later turn (or a record that cannot be read): the
				// turn's status as it is.
				if next, _ = f.Later(ctx, turn); next != "" {
					ev := *held
					ev.Status.State = a2a.TaskStateSubmitted
					held = &ev
				}
				if !yield(held, nil) {
					return
				}
			}
			switch {
			case next != "":
			case a2amap.Interrupted(state) && f.Next != nil:
				var err error
				if next, err = f.Next(ctx, turn); err != nil {
					if ctx.Err() == nil {
						yield(nil, err)
					}
					return
				}
			default:
				return
			}
			turn, from = next, 0
			p = A2AParams{TaskID: p.TaskID, ContextID: p.ContextID, Resubscribe: true, Interaction: p.Interaction}
			opts = []egress.ReplayOption{egress.WithoutRequestCheck()}
		}
	}
}

// unendedFrom is the index in reqs (a task's requests, oldest first) of
// the oldest of those after the last one with its final frame (the turns
// that have not ended), the last when that one has ended.
func unendedFrom(reqs []egress.StoredRequest) int {
	i := len(reqs)
	for i > 0 {
		f := reqs[i-1].Frames
		if len(f) > 0 && f[len(f)-1].IsFinal {
			break
		}
		i--
	}
	return min(i, len(reqs)-1)
}

// FollowedTurns are the turns of the task t a resubscription follows, in
// the record's order: the newest (LastTurn: egress.ErrNotFound when it is
// not t's own) and the earlier turns that have not ended
// (host.TaskRequests.UnendedTurns), the oldest of which runs while the others
// wait for it (turns of a task run one after another), back to the first
// that is not t's own (host.Session.OwnRequests of its envelope:
// host.TaskRequests.LoadRequestHead, when t has a principal). No turn's
// frames are read but the last of each earlier one's: the resubscription
// reads them once, after.
func (a Answers) FollowedTurns(ctx context.Context, t *host.Task) ([]string, error) {
	last, err := a.LastTurn(ctx, t)
	if err != nil || last == "" {
		return nil, err
	}
	ids := t.RequestIDs
	if len(ids) < 2 {
		return []string{last}, nil
	}
	earlier, err := a.f.UnendedTurns(ctx, ids[:len(ids)-1])
	if err != nil {
		return nil, err
	}
	turns := []string{last}
	for _, id := range earlier { // newest first
		if t.Principal != "" {
			rq, err := a.f.LoadRequestHead(ctx, id)
			if errors.Is(err, egress.ErrNotFound) {
				break
			}
			if err == nil {
				_, err = t.OwnRequests([]egress.StoredRequest{rq})
			}
			if errors.Is(err, egress.ErrNotFound) {
				break // another principal's: neither it nor any before it
			}
			if err != nil {
				return nil, err
			}
		}
		turns = append(turns, id)
	}
	slices.Reverse(turns)
	return turns, nil
}

// TurnsFrom are the turns of the task t a resubscription resuming in its
// turn named turn follows (a resume point naming a turn: serveTurns), in
// the record's order: that one, ended or not, and each later one. It is
// nil when turn is not one of t's, or when it or a later one but the
// newest is not t's own (host.Session.OwnRequests of its envelope:
// host.TaskRequests.LoadRequestHead, when t has a principal), as
// FollowedTurns leaves out a turn not t's own and those before it; it is
// egress.ErrNotFound when the newest is not t's own (LastTurn).
func (a Answers) TurnsFrom(ctx context.Context, t *host.Task, turn string) ([]string, error) {
	i := slices.Index(t.RequestIDs, turn)
	if i < 0 {
		return nil, nil
	}
	if _, err := a.LastTurn(ctx, t); err != nil {
		return nil, err
	}
	turns := slices.Clone(t.RequestIDs[i:])
	if t.Principal == "" {
		return turns, nil
	}
	for _, id := range turns[:len(turns)-1] {
		rq, err := a.f.LoadRequestHead(ctx, id)
		if err == nil {
			_, err = t.OwnRequests([]egress.StoredRequest{rq})
		}
		if errors.Is(err, egress.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return turns, nil
}
