package egress

import (
	"context"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestLoadRequestsFirstFramesAgedOut: the turns of a task age out of
// E2A_RESPONSES oldest first, while their envelopes stay in E2A_REQUESTS.
// LoadRequests (the task views: A2A and AgentVault tasks/get, cancels)
// failed whole with ErrFramesExpired when one turn's first frames were gone
// and its last ones stored. It reads what remains: a turn whose first
// frames aged out with its frames left, one whose frames all aged out
// (answered: its pool's consumer acknowledged it) with none, both marked
// FramesExpired; a turn waiting for its first frame is not marked.
func TestLoadRequestsFirstFramesAgedOut(t *testing.T) {
	e := startEnv(t)
	s, err := New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.finished(t, "aged-turn-1", 1) // frames 0, 1 (final)
	e.finished(t, "aged-turn-2", 3) // frames 0-2, 3 (final)
	ackPending(t, e, 2)             // both answered
	natstest.PurgeBelowLast(t, e.js, streams.ResponsesStream)
	e.running(t, "aged-turn-3") // waits for its first frame
	reqs, err := s.LoadRequests(ctx, []string{"aged-turn-1", "aged-turn-2", "aged-turn-3"})
	if err != nil {
		t.Fatalf("LoadRequests: %v, want the frames that remain", err)
	}
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	if r := reqs[0]; r.Envelope.RequestID != "aged-turn-1" || len(r.Frames) != 0 || !r.FramesExpired {
		t.Errorf("turn 1 (every frame aged out): %d frames, expired %v; want none, expired", len(r.Frames), r.FramesExpired)
	}
	if r := reqs[1]; len(r.Frames) != 1 || r.Frames[0].Sequence != 3 || !r.Frames[0].IsFinal || !r.FramesExpired {
		t.Errorf("turn 2 (frames 0-2 aged out): %d frames, expired %v; want its final frame 3, expired", len(r.Frames), r.FramesExpired)
	}
	if r := reqs[2]; len(r.Frames) != 0 || r.FramesExpired {
		t.Errorf("turn 3 (no frame yet): %d frames, expired %v; want none, not expired", len(r.Frames), r.FramesExpired)
	}
}
