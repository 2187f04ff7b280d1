package workflow

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestStreamFramesBursts: the frames of a request the agent stored in
// bursts (several frames in one response message) are read one by one, in
// order; a message that does not hold what its E2A-Frames header says is
// an error.
func TestStreamFramesBursts(t *testing.T) {
	_, nc := natstest.RunServer(t)
	const id = "wf-burst-1"
	frame := func(seq int64, final bool) []byte { return natstest.Frame(id, seq, final) }

	// frame 0 alone, a burst of 1..3, a burst of 4..5 ending with the final frame
	last := natstest.PublishBurst(t, nc, id, 0, 0, frame(0, false))
	last = natstest.PublishBurst(t, nc, id, 1, last, frame(1, false), frame(2, false), frame(3, false))
	natstest.PublishBurst(t, nc, id, 4, last, frame(4, false), frame(5, true))
	src := &StreamFrames{Conn: nc}
	frames, err := src.Frames(tctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e2a.CheckFrames(frames); err != nil {
		t.Fatal(err)
	}
	if len(frames) != 6 || frames[5].ResponseKind != e2a.KindComplete {
		t.Fatalf("%d frames", len(frames))
	}
	if st := StatusFromFrames(frames); st.Status != StatusSuccess {
		t.Errorf("status: %+v", st)
	}

	// E2A-Frames: 3 over two frames.
	const bad = "wf-burst-bad"
	last = natstest.PublishBurst(t, nc, bad, 0, 0, frame(0, false))
	subj, _ := subjects.Response(bad)
	m := nats.NewMsg(subj)
	m.Header.Set(subjects.HeaderSequence, "1")
	m.Header.Set(subjects.HeaderFrames, "3")
	m.Data = e2a.AppendBurst(frame(1, false), frame(2, false))
	if _, err := natstest.JetStream(t, nc).PublishMsg(tctx(t), m, jetstream.WithExpectLastSequencePerSubject(last)); err != nil {
		t.Fatal(err)
	}
	if frames, err := src.Frames(tctx(t), bad); !errors.Is(err, e2a.ErrInvalidBurst) {
		t.Fatalf("invalid burst: %d frames, %v", len(frames), err)
	}
}
