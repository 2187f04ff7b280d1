package a2abridge_test

import (
	"context"
	"iter"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// replacer is an agent that revises its answer: artifact "draft" sent
// whole (first), then sent again whole with append false (then): A2A
// replaces the artifact, and a2a-go's task store keeps the second only.
type replacer struct {
	ids         chan a2a.TaskID
	first, then string
}

const draftArtifact a2a.ArtifactID = "draft"

func (r replacer) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	r.ids <- ec.TaskID
	return func(yield func(a2a.Event, error) bool) {
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) &&
			yield(whole(ec, r.first), nil) &&
			yield(whole(ec, r.then), nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

// whole is artifact "draft" as a whole (append false).
func whole(ec *a2asrv.ExecutorContext, text string) *a2a.TaskArtifactUpdateEvent {
	ev := a2a.NewArtifactUpdateEvent(ec, draftArtifact, a2a.NewTextPart(text))
	ev.Append, ev.LastChunk = false, true
	return ev
}

func (replacer) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// replacements are the replacer's cases: a second draft that extends
// the first, one that rewrites it, and one that shortens it (the start of
// the first: taken for a replay until the turn ends, replay.go, then
// written whole).
var replacements = []struct{ name, first, then string }{
	{"extends", "Hello", "Hello, world"},
	{"rewrites", "Hi there", "Hello, world"},
	{"shortens", "Hello, world", "Hello"},
}

// TestArtifactReplaceIsNotAppended: an agent sends its artifact, then the
// same artifact again with append false (a replacement, as A2A defines it
// and a2a-go's task store applies it). The pipeline's A2A clients, v1.0
// and v0.3, end with the artifact the agent's task holds: the second,
// written as the text it adds when it extends the first ("extends"), else
// whole as an artifact_update without append ("rewrites").
func TestArtifactReplaceIsNotAppended(t *testing.T) {
	t.Parallel()
	for _, tc := range replacements {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := replacer{ids: make(chan a2a.TaskID, 2), first: tc.first, then: tc.then}
			url, h := startV1(t, r)
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", url)
			turn := up.Collect(t, v1Client(t, p, "agent").SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: userMessage("revise")}), nil)
			task, err := h.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: <-r.ids})
			if err != nil || len(task.Artifacts) != 1 || up.TextOf(task.Artifacts[0].Parts) != tc.then {
				t.Fatalf("the agent's task: %+v, %v", task, err)
			}
			if got := turn.Text(draftArtifact); got != tc.then || turn.State() != a2a.TaskStateCompleted {
				t.Errorf("the pipeline's A2A v1.0 client: artifact %q (%s), want the agent's %q", got, turn.State(), tc.then)
			}
			v03 := openV03(t, p, "agent").(*v03Conv).stream(t, "revise", nil)
			if got := v03.Text(draftArtifact); got != tc.then || v03.State() != a2a.TaskStateCompleted {
				t.Errorf("the pipeline's A2A v0.3 client: artifact %q (%s), want the agent's %q", got, v03.State(), tc.then)
			}
		})
	}
}

// TestReplacedArtifactResultText: an agent sends artifact "draft", then
// the same artifact again whole (append false). The E2A client's final
// e2a.complete result's text is the agent's answer, the second draft:
// the text the first wrote is replaced, whether the second was written
// as the text it adds ("extends") or whole as a native artifact_update
// ("rewrites"; turn.text kept the replaced "Hi there").
func TestReplacedArtifactResultText(t *testing.T) {
	t.Parallel()
	for _, tc := range replacements {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := replacer{ids: make(chan a2a.TaskID, 2), first: tc.first, then: tc.then}
			url, _ := startV1(t, r)
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", url)
			e := openE2A(t, p, "agent").(*e2aConv)
			_, body := e.post(t, "revise")
			defer body.Close()
			frames := newSSE(body).read(t, 0)
			final := frames[len(frames)-1]
			c, err := final.Complete()
			if err != nil {
				t.Fatalf("final %s: %v", final.ResponseKind, err)
			}
			res, _ := c.Result.(map[string]any)
			if got, _ := res["text"].(string); got != tc.then {
				t.Errorf("the final result's text %q, want the agent's answer %q (result %v)", got, tc.then, res)
			}
		})
	}
}
