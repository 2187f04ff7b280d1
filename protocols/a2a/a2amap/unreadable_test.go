package a2amap_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// unreadableBodies are a2a.* frames whose branch or kind is valid but
// whose body is not the A2A object it names.
var unreadableBodies = []struct{ kind, body string }{
	{e2a.KindA2AStreamEvent, `{"branch":"status_update","payload":{"status":42}}`},
	{e2a.KindA2AStreamEvent, `{"branch":"artifact_update","payload":{"artifact":"x"}}`},
	{e2a.KindA2ATask, `{"id":"t","status":42}`},
	{e2a.KindA2AMessage, `{"messageId":"m","parts":"x"}`},
}

// unreadableFrames is a request's frames: a text chunk, the unreadable
// frames (not final), another text chunk and the final frame final.
func unreadableFrames(id string, final *e2a.Response) []*e2a.Response {
	frames := []*e2a.Response{conformance.Chunk(id, 0, e2a.DeltaText, "before ", "")}
	for _, u := range unreadableBodies {
		f := conformance.Frame(id, int64(len(frames)), u.kind, e2a.StatusInProgress, false, json.RawMessage(u.body), nil)
		frames = append(frames, f)
	}
	frames = append(frames, conformance.Chunk(id, int64(len(frames)), e2a.DeltaText, "after", ""))
	final.Sequence = int64(len(frames))
	return append(frames, final)
}

// countWarnings has slog's default logger record what is logged until
// the test ends; the function it returns counts the unreadable-frame
// warnings so far.
func countWarnings(t *testing.T) func() int {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return func() int { return strings.Count(buf.String(), "unreadable A2A frame") }
}

// TestUnreadableA2AFramesSkipped: a2a.* frames of a valid branch or kind
// whose body is not the A2A object it names are skipped by the stream
// mapper (no event, no error) and by BuildTask; the request completes
// with the text around them, and the mapper logs one warning per read.
func TestUnreadableA2AFramesSkipped(t *testing.T) {
	warn := countWarnings(t)
	id := "req-unreadable"
	frames := unreadableFrames(id, conformance.Frame(id, 0, e2a.KindComplete, e2a.StatusSucceeded, true, map[string]any{}, nil))
	m := a2amap.NewStreamMapper(id, a2amap.Params{}, 0)
	var text string
	var last *a2a.TaskStatusUpdateEvent
	for _, f := range frames {
		evs, err := m.Events(f)
		if err != nil {
			t.Fatalf("Events(%s): %v", f.ResponseKind, err)
		}
		if f.ResponseKind != e2a.KindChunk && !f.IsFinal && len(evs) != 0 {
			t.Fatalf("Events(%s %s): %d events, want none", f.ResponseKind, f.Body, len(evs))
		}
		for _, ev := range evs {
			switch e := ev.(type) {
			case *a2a.TaskArtifactUpdateEvent:
				text += e.Artifact.Parts[0].Text()
			case *a2a.TaskStatusUpdateEvent:
				last = e
			}
		}
	}
	if text != "before after" || last == nil || last.Status.State != a2a.TaskStateCompleted || !m.Final(last) {
		t.Fatalf("streamed %q, last status %+v; want \"before after\", completed", text, last)
	}
	if n := warn(); n != 1 {
		t.Fatalf("%d warnings for the stream, want 1", n)
	}
	task := a2amap.BuildTask(id, "", []a2amap.Request{{Frames: frames}}, nil)
	if task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Text() != "before after" {
		t.Fatalf("BuildTask: %s with %+v, want completed with \"before after\"", task.Status.State, task.Artifacts)
	}
	if n := warn(); n != 2 {
		t.Fatalf("%d warnings after BuildTask, want 2 (one per read)", n)
	}
}

// TestUnreadableFinalA2AFrameFails: a final a2a.* frame whose body is
// not the A2A object it names ends the request failed with
// a2amap.UnreadableFinal (code invalid_frame): the stream's last
// status-update, final, BuildTask's and the aggregate's status, and
// FinalOutcome.
func TestUnreadableFinalA2AFrameFails(t *testing.T) {
	countWarnings(t)
	for _, u := range unreadableBodies {
		t.Run(u.kind, func(t *testing.T) {
			id := "req-unreadable-final"
			final := conformance.Frame(id, 0, u.kind, e2a.StatusSucceeded, true, json.RawMessage(u.body), nil)
			frames := unreadableFrames(id, final)
			if o := a2amap.FinalOutcome(final); o.State != a2a.TaskStateFailed || o.Message != a2amap.UnreadableFinal || o.Code != "invalid_frame" {
				t.Fatalf("FinalOutcome: %+v", o)
			}
			m := a2amap.NewStreamMapper(id, a2amap.Params{}, 0)
			var last a2a.Event
			for _, f := range frames {
				evs, err := m.Events(f)
				if err != nil {
					t.Fatalf("Events(%s): %v", f.ResponseKind, err)
				}
				if len(evs) > 0 {
					last = evs[len(evs)-1]
				}
			}
			su, ok := last.(*a2a.TaskStatusUpdateEvent)
			if !ok || su.Status.State != a2a.TaskStateFailed || !m.Final(su) || su.Status.Message == nil ||
				su.Status.Message.Parts[0].Text() != a2amap.UnreadableFinal {
				t.Fatalf("the stream's last event %T %+v, want the final failed status-update (%q)", last, last, a2amap.UnreadableFinal)
			}
			task := a2amap.BuildTask(id, "", []a2amap.Request{{Frames: frames}}, nil)
			if task.Status.State != a2a.TaskStateFailed || task.Status.Message == nil || task.Status.Message.Parts[0].Text() != a2amap.UnreadableFinal {
				t.Fatalf("BuildTask status %+v, want failed (%q)", task.Status, a2amap.UnreadableFinal)
			}
			agg := a2amap.NewAggregator(id, a2amap.Params{})
			for _, f := range frames {
				if err := agg.Add(f); err != nil {
					t.Fatalf("Add(%s): %v", f.ResponseKind, err)
				}
			}
			res, ok := agg.Result(nil).(*a2a.Task)
			if !ok || res.Status.State != a2a.TaskStateFailed {
				t.Fatalf("message/send result %+v, want the failed task", agg.Result(nil))
			}
		})
	}
}
