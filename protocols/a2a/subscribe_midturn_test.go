package a2a_test

import (
	"context"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// TestSubscribeMidTurnHasTheWholeAnswer: a2a-go/v2's client subscribing
// (SubscribeToTask) to a task whose turn is streaming gets the answer
// whole: the task first, in its current state, then the running turn's
// artifact updates from its first frame. The task held the turn's text
// streamed so far in history (not as an artifact), and the updates went on
// after it: a client building the answer from the artifacts lost its
// start (a JS client showed "d: abcdefghij" for "You said: abcdefghij").
func TestSubscribeMidTurnHasTheWholeAnswer(t *testing.T) {
	eachV1Binding(t, func(t *testing.T, g *answeredAhead, ctx context.Context, c *a2aclient.Client) {
		var task a2a.TaskID
		streamCtx, stop := context.WithCancel(ctx)
		for ev, err := range c.SendStreamingMessage(streamCtx, up.Msg("slow")) {
			if err != nil {
				t.Fatalf("SendStreamingMessage: %v", err)
			}
			task = ev.(a2a.TaskInfoProvider).TaskInfo().TaskID
			if u, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && strings.Contains(up.TextOf(u.Artifact.Parts), "working") {
				break // the turn's first chunk is stored: the client drops its stream
			}
		}
		stop()
		arts := map[a2a.ArtifactID]string{} // each artifact's text, as the client builds it
		var state a2a.TaskState
		first := true
		for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task}) {
			if err != nil {
				t.Fatalf("SubscribeToTask: %v", err)
			}
			switch e := ev.(type) {
			case *a2a.Task:
				if !first {
					t.Fatalf("a Task after the first event: %+v", e)
				}
				if e.Status.State != a2a.TaskStateWorking && e.Status.State != a2a.TaskStateSubmitted {
					t.Errorf("the first event's state %s, want the running task's", e.Status.State)
				}
				for _, a := range e.Artifacts {
					arts[a.ID] = up.TextOf(a.Parts)
				}
				close(g.gate) // the turn ends after the subscription began
			case *a2a.TaskArtifactUpdateEvent:
				if e.Append {
					arts[e.Artifact.ID] += up.TextOf(e.Artifact.Parts)
				} else {
					arts[e.Artifact.ID] = up.TextOf(e.Artifact.Parts)
				}
			case *a2a.TaskStatusUpdateEvent:
				state = e.Status.State
			}
			first = false
		}
		whole := false
		for _, text := range arts {
			whole = whole || strings.HasPrefix(text, "working, ")
		}
		if !whole || state != a2a.TaskStateCompleted {
			t.Errorf("the subscription's artifacts %q ending %s; want the answer from its start (\"working, \"…), completed", arts, state)
		}
	})
}
