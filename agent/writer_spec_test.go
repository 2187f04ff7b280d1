package agent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// rawFramesFinal returns the stored frames of id as raw JSON, split out of
// bursts, once the last one is final (bounded wait).
func rawFramesFinal(t *testing.T, s *server, id string) [][]byte {
	t.Helper()
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	testkit.Eventually(t, 30*time.Second, "the final frame of "+id, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		msgs, err := streams.DirectGetAll(ctx, s.nc, streams.ResponsesStream, subj, 0, 256)
		if err != nil {
			return false
		}
		frames = frames[:0]
		for _, m := range msgs {
			fs, err := e2a.SplitBurst(m.Header.Get(subjects.HeaderFrames), m.Data)
			if err != nil {
				t.Fatalf("burst: %v", err)
			}
			frames = append(frames, fs...)
		}
		if len(frames) == 0 {
			return false
		}
		h, err := e2a.UnmarshalResponse(frames[len(frames)-1])
		return err == nil && h.IsFinal
	})
	return frames
}

// runWrites runs handler h for one request and returns what each of its writes
// returned (in order) and the stored frames.
func runWrites(t *testing.T, id string, writes func(w agent.Writer) []error) ([]error, [][]byte) {
	t.Helper()
	s := startServer(t)
	got := make(chan []error, 1)
	startWorker(t, s.nc, "specw", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		got <- writes(w)
		return nil
	}))
	waitConsumer(t, s.js, "specw")
	publish(t, s.js, "specw", request(id, map[string]any{"text": "hi"}))
	var errs []error
	select {
	case errs = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not run")
	}
	return errs, rawFramesFinal(t, s, id)
}

// Spec §12.5: an e2a.chunk body's "delta_kind: text / reasoning / tool /
// custom; delta: string or structured object". Writer.Chunk refuses only an
// empty delta kind: a typo ("Text") or a number delta is published as a
// frame that is outside the specification (and that no renderer shows as
// text), with no error for the handler.
func TestWriterChunkOutsideSpecRefused(t *testing.T) {
	t.Parallel()
	errs, frames := runWrites(t, "spec-chunk-enum", func(w agent.Writer) []error {
		return []error{w.Chunk("Text", "hello"), w.Chunk(e2a.DeltaText, 42), w.Chunk(e2a.DeltaTool, nil)}
	})
	for i, what := range []string{`Chunk("Text", "hello") (delta_kind outside the spec's enum)`, `Chunk("text", 42) (delta neither string nor object)`, `Chunk("tool", nil) (delta null)`} {
		if errs[i] == nil {
			t.Errorf("%s returned nil", what)
		}
	}
	for _, f := range frames {
		r, err := e2a.UnmarshalResponse(f)
		if err != nil || r.ResponseKind != e2a.KindChunk {
			continue
		}
		c, _ := r.Chunk()
		switch c.DeltaKind {
		case e2a.DeltaText, e2a.DeltaReasoning, e2a.DeltaTool, e2a.DeltaCustom:
		default:
			t.Errorf("frame %d published with delta_kind %q: %s", r.Sequence, c.DeltaKind, f)
		}
		switch c.Delta.(type) {
		case string, map[string]any:
		default:
			t.Errorf("frame %d published with delta %v (%T): %s", r.Sequence, c.Delta, c.Delta, f)
		}
	}
}

// Write documents "the frame is validated". A typed body of another kind
// (e2a.CompleteBody, e2a.ExtBody, e2a.ChunkBody) skips the validation
// (checkRaw), so Write(e2a.error, failed, CompleteBody{…}, true) publishes a
// final e2a.error frame without the code and message §12.5 requires — a
// frame e2a.ResponseFromJSON itself refuses — and returns nil.
func TestWriterWriteTypedBodyOfAnotherKindValidated(t *testing.T) {
	for i, tc := range []struct {
		kind, status string
		body         any
		final        bool
	}{
		{e2a.KindError, e2a.StatusFailed, e2a.CompleteBody{Result: "oops"}, true},
		{e2a.KindError, e2a.StatusFailed, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "oops"}, true},
		{e2a.KindA2AStreamEvent, e2a.StatusInProgress, e2a.ExtBody{ExtMethod: "x"}, false},
	} {
		t.Run(fmt.Sprintf("%d_%s_%T", i, tc.kind, tc.body), func(t *testing.T) {
			t.Parallel()
			id := fmt.Sprintf("spec-typed-%d", i)
			errs, frames := runWrites(t, id, func(w agent.Writer) []error {
				return []error{w.Write(tc.kind, tc.status, tc.body, tc.final)}
			})
			if errs[0] == nil {
				t.Errorf("Write(%s, %s, %T) returned nil", tc.kind, tc.status, tc.body)
			} else if !errors.Is(errs[0], e2a.ErrInvalidResponse) {
				t.Logf("Write error: %v", errs[0])
			}
			for _, f := range frames {
				if _, err := e2a.ResponseFromJSON(f); err != nil {
					t.Errorf("the writer published a frame the spec's validation refuses (%v): %s", err, f)
				}
			}
		})
	}
}
