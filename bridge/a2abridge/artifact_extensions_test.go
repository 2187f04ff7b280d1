package a2abridge_test

import (
	"context"
	"iter"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// extAgent streams a text artifact whose first update names an extension
// (A2A Artifact.extensions), in two chunks, then completes.
type extAgent struct{}

func (extAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	first := a2a.NewArtifactUpdateEvent(ec, "doc", a2a.NewTextPart("# x\n"))
	first.Artifact.Extensions = []string{"https://example.com/ext/doc"}
	second := a2a.NewArtifactUpdateEvent(ec, "doc", a2a.NewTextPart("body"))
	first.Append, second.Append = false, true
	return func(yield func(a2a.Event, error) bool) {
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) && yield(first, nil) && yield(second, nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (extAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestArtifactExtensionsReachA2AClients: the extensions of a bridged A2A
// agent's text artifact reach an A2A v1.0 client, in the stream, GetTask
// and a blocking SendMessage's task, as a data or file artifact's do
// (written natively). A text artifact's, written as chunks, were dropped.
func TestArtifactExtensionsReachA2AClients(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, extAgent{})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	want := []string{"https://example.com/ext/doc"}
	check := func(what string, turn *up.Turn) {
		t.Helper()
		doc := turn.Artifacts["doc"]
		if doc == nil || up.TextOf(doc.Parts) != "# x\nbody" {
			t.Errorf("%s: artifact doc %v, want its text", what, doc)
			return
		}
		if !slices.Equal(doc.Extensions, want) {
			t.Errorf("%s: artifact doc's extensions %q, want %q", what, doc.Extensions, want)
		}
	}
	turn := up.Collect(t, c.SendStreamingMessage(testCtx(t), up.Msg("ext")), nil)
	check("stream", turn)
	task, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: turn.Task.TaskID})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	got := up.NewTurn()
	got.Add(task)
	check("GetTask", got)
	check("SendMessage's task", up.Send(t, c, up.Msg("ext, blocking")))
}
