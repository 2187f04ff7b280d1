package agenttest_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// TestWriterChecksFrames: frames the runtime refuses are refused, the
// others taken in order, and a write after the final frame is counted.
func TestWriterChecksFrames(t *testing.T) {
	w := &agenttest.Writer{}
	if err := w.Chunk(e2a.DeltaText, "a"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		kind, status string
		body         any
		final        bool
	}{
		{e2a.KindChunk, e2a.StatusInProgress, json.RawMessage(`{"delta":"no kind"}`), false},
		{e2a.KindComplete, e2a.StatusInProgress, json.RawMessage(`{}`), true},
		{e2a.KindError, e2a.StatusSucceeded, json.RawMessage(`{"code":"c","message":"m"}`), true},
		{"e2a.nope", e2a.StatusInProgress, json.RawMessage(`{}`), false},
		{e2a.KindChunk, e2a.StatusInProgress, json.RawMessage(`[1]`), false},
	} {
		if err := w.Write(bad.kind, bad.status, bad.body, bad.final); !errors.Is(err, e2a.ErrInvalidResponse) {
			t.Errorf("%s %s %s final=%v: %v, want ErrInvalidResponse", bad.kind, bad.status, bad.body, bad.final, err)
		}
	}
	if err := w.Complete("ok"); err != nil || !w.Final() || w.AfterFinal() != 0 {
		t.Fatalf("complete: %v final=%v after=%d", err, w.Final(), w.AfterFinal())
	}
	_ = w.Fail("c", "m", false)
	if w.AfterFinal() != 1 || len(w.Kinds()) != 3 || w.Kinds()[0] != e2a.KindChunk || w.Kinds()[1] != e2a.KindComplete {
		t.Fatalf("kinds %q, after final %d", w.Kinds(), w.AfterFinal())
	}
}

// TestWriterFramesForTheRequest: frames carry the envelope's ids and go on
// from the frames stored before.
func TestWriterFramesForTheRequest(t *testing.T) {
	w := &agenttest.Writer{Env: &e2a.Envelope{RequestID: "r-7", TaskID: "t-1"}, Stored: 3}
	if w.ResumeAfter() != 2 {
		t.Fatalf("ResumeAfter %d, want 2", w.ResumeAfter())
	}
	_ = w.Chunk(e2a.DeltaText, "a")
	_ = w.Complete(map[string]any{"n": 1})
	fs := w.Frames()
	if len(fs) != 2 || fs[0].Sequence != 3 || fs[1].Sequence != 4 || fs[1].RequestID != "r-7" || fs[1].TaskID != "t-1" ||
		string(fs[1].Body) != `{"result":{"n":1}}` || !fs[1].IsFinal {
		t.Fatalf("frames %+v", fs)
	}
	if (&agenttest.Writer{}).ResumeAfter() != -1 {
		t.Fatal("a new request resumes after -1")
	}
}
