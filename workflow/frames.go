package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// StreamFrames is a FrameSource reading a request's frames from the
// E2A_RESPONSES stream with batched direct gets (no consumer), so any
// replica answers, after restarts, as long as the stream keeps the frames.
// A stored message holding a burst of frames (E2A-Frames) gives each of
// them, in order.
type StreamFrames struct {
	Conn *nats.Conn
	// Stream defaults to streams.ResponsesStream.
	Stream string
}

// Frames implements FrameSource.
func (s *StreamFrames) Frames(ctx context.Context, requestID string) ([]*e2a.Response, error) {
	subj, err := subjects.Response(requestID)
	if err != nil {
		return nil, nil // an id that cannot name a request has no frames
	}
	stream := s.Stream
	if stream == "" {
		stream = streams.ResponsesStream
	}
	msgs, err := streams.DirectGetAll(ctx, s.Conn, stream, subj, 0, 256)
	if errors.Is(err, streams.ErrNoMessages) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]*e2a.Response, 0, len(msgs))
	for _, m := range msgs {
		// A message may hold a burst of consecutive frames (E2A-Frames).
		frames, err := e2a.BurstResponses(m.Header.Get(subjects.HeaderFrames), m.Data)
		if err != nil {
			return nil, fmt.Errorf("workflow: message at stream sequence %d: %w", m.Seq, err)
		}
		out = append(out, frames...)
	}
	return out, nil
}

var _ QueuedSource = (*StreamFrames)(nil)

// Queued implements QueuedSource: the envelope of requestID as the
// workflow pool's request stream holds it (E2A_REQUESTS, subject
// e2a.req.workflow.<request_id>); nil and no error when it has none.
func (s *StreamFrames) Queued(ctx context.Context, requestID string) (*e2a.Envelope, error) {
	subj, err := subjects.Request(Pool, requestID)
	if err != nil {
		return nil, nil
	}
	m, err := streams.LastBySubject(ctx, s.Conn, streams.RequestsStream, subj)
	if errors.Is(err, streams.ErrNoMessages) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return e2a.FromJSON(m.Data)
}
