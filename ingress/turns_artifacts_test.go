package ingress_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// writeArtifact writes an A2A artifact-update event (the v0.3 JSON shape,
// as agent/tck and bridge/a2abridge write them) of artifact id with text.
func writeArtifact(w agent.Writer, id, text string) error {
	art := map[string]any{"artifactId": id, "parts": []map[string]any{{"kind": "text", "text": text}}}
	return w.Write(e2a.KindA2AStreamEvent, e2a.StatusInProgress, e2a.StreamEventBody{Branch: e2a.BranchArtifactUpdate,
		Payload: map[string]any{"kind": "artifact-update", "artifact": art, "append": false, "lastChunk": true}}, false)
}

// TestEarlierTurnArtifactsKept: an agent streams an artifact ("draft") in
// the task's first turn, then asks for input; the answer's turn streams
// another artifact ("final") and completes. A task's artifacts accumulate
// over its life (A2A: an artifact-update adds to the task; a2a-go's own
// task manager keeps them across turns): GetTask after the final status
// holds the first turn's artifact, then the last's (a2amap.BuildTask
// merges every turn's artifacts, not the last request's alone).
func TestEarlierTurnArtifactsKept(t *testing.T) {
	pp := pipetest.Start(t)
	pp.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if strings.HasPrefix(demo.Text(env), demo.AskInputPrefix) {
			if err := writeArtifact(w, "draft", "the draft report"); err != nil {
				return err
			}
			return agent.Interrupt(w, e2a.StateInputRequired, "Approve the draft?")
		}
		if err := writeArtifact(w, "final", "the final report"); err != nil {
			return err
		}
		return w.Complete(nil)
	}))
	ctx, c, task := askInput(t, pp)
	if len(task.Artifacts) != 1 || task.Artifacts[0].ID != "draft" {
		t.Fatalf("the interrupted task's artifacts %+v, want the draft", task.Artifacts)
	}
	if _, err := c.SendMessage(ctx, v1Answer(task, "yes")); err != nil {
		t.Fatal(err)
	}
	var got *a2a.Task
	testkit.Eventually(t, 20*time.Second, "the task completed", func() bool {
		g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatal(err)
		}
		got = g
		return g.Status.State == a2a.TaskStateCompleted
	})
	var names []string
	for _, a := range got.Artifacts {
		names = append(names, string(a.ID)+"="+v1Text(a.Parts))
	}
	if strings.Join(names, ",") != "draft=the draft report,final=the final report" {
		t.Fatalf("GetTask after the last turn: artifacts %q, want the first turn's \"draft\", then the last's \"final\"", names)
	}
}
