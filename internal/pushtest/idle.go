package pushtest

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// StageIdle reports whether the push stage's consumer (push.DefaultConsumer)
// has acknowledged every response frame stored: nothing pending or
// unacknowledged, and its ack floor at the last frame. (The server counts
// a message stored as pending for a consumer after it acknowledged the
// publish, not at once: a loaded machine showed NumPending 0 for frames
// just stored, and a test went on before the stage had read them.) Once
// it holds, every update of those frames was handled for every config:
// delivered, dead-lettered, parked or dropped.
func StageIdle(js jetstream.JetStream) bool {
	ctx := context.Background()
	st, err := js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		return false
	}
	last, err := st.GetLastMsgForSubject(ctx, subjects.AllResponseFrames)
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	c, err := st.Consumer(ctx, push.DefaultConsumer)
	if err != nil {
		return false
	}
	info, err := c.Info(ctx)
	return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && (last == nil || info.AckFloor.Stream >= last.Sequence)
}
