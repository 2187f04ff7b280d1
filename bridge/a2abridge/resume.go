package a2abridge

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// resume continues a request another worker started: it reads what the
// stored frames hold (those of earlier, the requests of the thread
// before it that continued the same upstream task, first: the task's
// artifacts hold their answers too), then follows the upstream task from
// where it stands (its first event is the task as a whole, of which only
// what is beyond the stored frames is written).
func (t *turn) resume(ctx context.Context, earlier []string, base []byte) error {
	if t.taskID == "" || t.u.cfg.convs == nil {
		return &bridge.Error{Code: bridge.CodeCannotResume, Retryable: true,
			Message: "the worker that started the request stopped before the agent's task was known"}
	}
	// A cancel that comes while the stored frames are read is forwarded
	// too: the agent's task runs on until told.
	defer t.forwardCancel(ctx)
	// A continuation's baseline (baseline.go) says what the task held
	// before the turn; the stored frames of earlier turns serve for what
	// it leaves out, and for a record written without one.
	b, ok := readBaseline(base)
	if !ok || b.More {
		for _, id := range earlier {
			if err := t.readStored(ctx, id, false); err != nil {
				return err
			}
		}
	}
	t.seedBaseline(b)
	// The task may still show the question the turn answers (the agent
	// has not moved it on yet): that is not the turn's end.
	t.asked = b.Asked.status()
	// The stored frames do not say which of the agent's messages they
	// hold (a message's text is a delta of no artifact): the first task
	// snapshot's are taken as written (gapMessages).
	t.saidUnknown = true
	if err := t.readStored(ctx, t.env.RequestID, true); err != nil {
		return err
	}
	return t.resubscribing(ctx, t.followTask(ctx))
}

// followTask follows the turn's upstream task from where it stands, once:
// it subscribes to it (its first event is the task as a whole, of which
// only what is beyond what the turn's frames hold is written), or, for an
// agent that does not stream, reads it with GetTask and polls. A takeover
// (resume) and a stream cut mid-answer (resubscribing) go on so.
func (t *turn) followTask(ctx context.Context) error {
	poll := !t.u.streaming
	if t.u.streaming {
		var cut bool
		err := t.followStream(ctx, taskFirst(t.u.client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: t.taskID}), &cut))
		var be *bridge.Error
		switch {
		case cut:
			// The subscription began with a later event, not the task as
			// it stands (a2a-go v0.3's resubscribe attaches to the events
			// to come): what the agent sent meanwhile is read with
			// GetTask, and the task polled from there (the events of a
			// stream whose start is not known would be written twice or
			// lost).
			poll = true
		case errors.Is(err, bridge.ErrIdleTimeout):
			// Nothing came within the idle timeout (which bounds only
			// the wait for a stream's start): an agent that sends no
			// snapshot first and holds its stream's headers until its
			// next event (the Java SDK 0.3's resubscribe), silent for
			// now. Subscribing again would meet the same silence; its
			// task is read and polled, as after a cut.
			t.u.cfg.log.Info("a2a bridge: the agent's subscription sent nothing within the idle timeout; reading its task and polling it",
				"request_id", t.env.RequestID, "task", t.taskID)
			poll = true
		case err == nil || !errors.As(err, &be) || be.Code != bridge.CodeRejected:
			return err
		}
		// Or the agent will not subscribe (a finished task, a v0.3 agent
		// without resubscribe): its task as it stands ends the request.
	}
	task, err := t.u.client.GetTask(ctx, &a2a.GetTaskRequest{ID: t.taskID})
	if err != nil {
		if be := new(bridge.Error); errors.As(upstreamError(err), &be) && be.Code == bridge.CodeRejected {
			return &bridge.Error{Code: bridge.CodeCannotResume, Message: "the agent's task is gone: " + err.Error(), Err: err}
		}
		return upstreamError(err)
	}
	if err := t.event(ctx, task); err != nil || t.done {
		return err
	}
	if poll {
		// A streaming agent's task is polled only after a cut, for as
		// long as it makes progress within stallIdleTimeouts idle timeouts.
		var stall time.Duration
		if t.u.streaming {
			stall = stallIdleTimeouts * t.u.http.IdleTimeout()
		}
		return t.pollTask(ctx, stall)
	}
	return &bridge.Error{Code: bridge.CodeCannotResume, Retryable: true,
		Message: "the agent's task runs on but cannot be subscribed to"}
}

// taskFirst passes events on when the first is the task as a whole (or
// an error); else it ends them at once, setting *cut.
func taskFirst(events iter.Seq2[a2a.Event, error], cut *bool) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		first := true
		for ev, err := range events {
			if _, ok := ev.(*a2a.Task); first && err == nil && !ok {
				*cut = true
				return
			}
			first = false
			if !yield(ev, err) {
				return
			}
		}
	}
}

// earlierTurns are the requests of th before id that recorded the same
// upstream task (the earlier turns of a continuation that th still
// keeps), oldest first.
func earlierTurns(th *bridge.Thread, id string, task a2a.TaskID) []string {
	if th == nil || task == "" {
		return nil
	}
	var ids []string
	for _, r := range th.RequestIDs {
		if r == id {
			break
		}
		if tk, ok := th.TaskOf(r); ok && a2a.TaskID(tk) == task {
			ids = append(ids, r)
		}
	}
	return ids
}

// readStored records what the stored frames of request id hold, per
// artifact (their llm_response_id); own: id is the turn's request, whose
// text deltas are its answer's (turn.text).
func (t *turn) readStored(ctx context.Context, id string, own bool) error {
	subj, err := subjects.Response(id)
	if err != nil {
		return err
	}
	msgs, err := streams.DirectGetAll(ctx, t.u.cfg.convs.JetStream().Conn(), streams.ResponsesStream, subj, 1, 256)
	if err != nil && !errors.Is(err, streams.ErrNoMessages) {
		return &bridge.Error{Code: "history_unavailable", Retryable: true, Message: err.Error(), Err: err}
	}
	for _, m := range msgs {
		frames, err := e2a.BurstResponses(m.Header.Get(subjects.HeaderFrames), m.Data)
		if err != nil {
			return err
		}
		for _, f := range frames {
			if err := t.stored(f, own); err != nil {
				return err
			}
		}
	}
	t.artifact = "\x00" // the next write sets the metadata
	return nil
}

// stored records what one stored frame holds: a chunk under its
// llm_response_id, the parts of a native artifact_update under its
// artifact (those of one without append replace what it held: the
// artifact's first frame, or one written whole). The chunks of the
// turn's own request (own) are its answer so far (turn.text, deltas).
func (t *turn) stored(f *e2a.Response, own bool) error {
	if c, err := f.Chunk(); err == nil {
		id, _ := f.Metadata["llm_response_id"].(string)
		t.seenOf(a2a.ArtifactID(id)).add(piece{kind: c.DeltaKind, delta: c.Delta})
		if own && textual(c.DeltaKind) {
			t.deltas = true
			s, ok := c.Delta.(string)
			if ok && c.DeltaKind == e2a.DeltaText {
				t.text.add(a2a.ArtifactID(id), s)
			}
			switch {
			case id != "":
				t.tail = ""
			case ok && c.DeltaKind == e2a.DeltaText:
				t.tail += s
			}
		}
		return nil
	}
	a, appendTo, err := nativeArtifact(f)
	if err != nil || a == nil {
		return err
	}
	w := t.seenOf(a.ID)
	if !appendTo {
		w = &written{text: map[string]string{}}
		t.seen[a.ID] = w
	}
	w.any, w.native = true, true
	text := ""
	for _, p := range a.Parts {
		if pc := pieceOf(p); pc.kind != "" {
			w.add(pc)
			if pc.kind == e2a.DeltaText {
				text += pc.delta.(string)
			}
		}
	}
	if own && !appendTo {
		t.text.replace(a.ID, w.text[e2a.DeltaText])
	} else if own && text != "" {
		t.text.extend(a.ID, text)
	}
	return nil
}

// stallIdleTimeouts is how many idle timeouts (E2A_UPSTREAM_IDLE_TIMEOUT,
// 60 s by default: 10 minutes) a streaming agent's task polled after a cut
// may go without progress before the request ends upstream_cannot_resume
// (pollTask). The idle timeout does not apply between a stream's events (an
// agent may think for long between two), and a task followed by polling
// after a worker's crash must not end sooner than its stream would have;
// an upstream whose task never moves again (its subscription yields another
// task's events) must not hold the request, polled 4 times a second,
// forever.
const stallIdleTimeouts = 10
