package a2abridge

import (
	"context"
	"errors"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// resume continues a request another worker started: it reads what the
// stored frames hold, then follows the upstream task from where it
// stands (its first event is the task as a whole, of which only what is
// beyond the stored frames is written).
func (t *turn) resume(ctx context.Context) error {
	if t.taskID == "" || t.u.cfg.convs == nil {
		return &bridge.Error{Code: bridge.CodeCannotResume, Retryable: true,
			Message: "the worker that started the request stopped before the agent's task was known"}
	}
	if err := t.readStored(ctx); err != nil {
		return err
	}
	defer t.forwardCancel(ctx)
	if t.u.streaming {
		err := t.follow(ctx, t.u.client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: t.taskID}))
		var be *bridge.Error
		if err == nil || !errors.As(err, &be) || be.Code != bridge.CodeRejected {
			return err
		}
		// The agent will not subscribe (a finished task, a v0.3 agent
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
	if !t.u.streaming {
		return t.pollTask(ctx)
	}
	return &bridge.Error{Code: bridge.CodeCannotResume, Retryable: true,
		Message: "the agent's task runs on but cannot be subscribed to"}
}

// readStored records what the request's stored frames hold, per artifact
// (their llm_response_id).
func (t *turn) readStored(ctx context.Context) error {
	subj, err := subjects.Response(t.env.RequestID)
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
			if err := t.stored(f); err != nil {
				return err
			}
		}
	}
	t.artifact = "\x00" // the next write sets the metadata
	return nil
}

// stored records what one stored frame holds: a chunk under its
// llm_response_id, the parts of a native artifact_update under its
// artifact.
func (t *turn) stored(f *e2a.Response) error {
	if c, err := f.Chunk(); err == nil {
		id, _ := f.Metadata["llm_response_id"].(string)
		t.seenOf(a2a.ArtifactID(id)).add(piece{kind: c.DeltaKind, delta: c.Delta})
		return nil
	}
	a, err := nativeArtifact(f)
	if err != nil || a == nil {
		return err
	}
	w := t.seenOf(a.ID)
	w.native = true
	for _, p := range a.Parts {
		if pc := pieceOf(p); pc.kind != "" {
			w.add(pc)
		}
	}
	return nil
}
