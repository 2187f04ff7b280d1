package a2abridge_test

import (
	"errors"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// TestStreamCutReplayEnds: an agent whose stream, and each subscription
// to its task, replays the same events (the task as submitted, a working
// status message, an artifact written whole then appended to, with a
// data and a file part) and ends before the task does (a gateway that
// cuts every stream at the same point of an agent that replays its
// events) takes the answer no further: after 3 such re-subscriptions the
// request ends with the cut's error, retryable. Each re-subscription
// wrote frames (the status message again, the artifact rewritten), which
// renewed the budget: the request ran on, writing them again and again,
// until its deadline (the fuzz target's hang).
func TestStreamCutReplayEnds(t *testing.T) {
	t.Parallel()
	a, up := newStreamingAgent(t)
	a.Set([]byte(event(sseTask) + event(sseWorking) + event(sseArt) + event(sseArt2)))
	w, late, err := callWithin(up)
	if late {
		t.Fatalf("the call ran until its deadline (%v), %d frames", err, len(w.Frames()))
	}
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeUnavailable || !be.Retryable {
		t.Errorf("error %v, want %s retryable", err, bridge.CodeUnavailable)
	}
	// The first stream's 5 frames, and each of the 3 replays' at most.
	if n := len(w.Frames()); n > 4*5 {
		t.Errorf("%d frames: %q", n, w.Kinds())
	}
}
