package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// rawResponseMessages reads every stored message of a request's response subject,
// without decoding them (a message after the final frame may not decode).
func rawResponseMessages(t *testing.T, s *server, id string) []streams.RawMsg {
	t.Helper()
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msgs, err := streams.DirectGetAll(ctx, s.nc, streams.ResponsesStream, subj, 0, 256)
	if err != nil && !errors.Is(err, streams.ErrNoMessages) {
		t.Fatal(err)
	}
	return msgs
}

// lateWriteAfterReturn runs a handler that returns nil without a final
// frame and leaves a goroutine that writes once the runtime's own final
// frame (e2a.complete, null result) is taken for publishing. write is the
// late write. It returns the late write's error and the request's id.
func lateWriteAfterReturn(t *testing.T, id string, write func(agent.Writer) error) (*server, error) {
	s := startServer(t)
	release, written := make(chan struct{}), make(chan struct{})
	var lateErr error
	var once sync.Once
	// The runtime's final frame is frame 0 (the handler wrote nothing):
	// hold its publish until the late write has returned.
	hook := agent.WithBeforeBurst(func(rid string, first int64, n int) {
		if rid != id || first != 0 {
			return
		}
		once.Do(func() {
			close(release)
			select {
			case <-written:
			case <-time.After(10 * time.Second):
			}
		})
	})
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		go func() {
			<-release
			lateErr = write(w)
			close(written)
		}()
		return nil // the runtime writes the final e2a.complete
	})
	startWorker(t, s.nc, "late", h, hook)
	publish(t, s.js, "late", request(id, nil))
	select {
	case <-written:
	case <-time.After(30 * time.Second):
		t.Fatal("the late write never ran")
	}
	return s, lateErr
}

// storedAfterLateWrite waits for the request's final frame to be stored
// and, when the late write was accepted (lateErr nil), for what it became;
// it returns the messages stored.
func storedAfterLateWrite(t *testing.T, s *server, id string, lateErr error) []streams.RawMsg {
	t.Helper()
	var msgs []streams.RawMsg
	testkit.Eventually(t, 20*time.Second, "the final frame stored", func() bool {
		msgs = rawResponseMessages(t, s, id)
		return len(msgs) >= 1
	})
	if lateErr == nil {
		testkit.Eventually(t, 20*time.Second, "the late frame stored", func() bool {
			msgs = rawResponseMessages(t, s, id)
			return len(msgs) >= 2
		})
	}
	return msgs
}

// A handler that returned has handed the request to the runtime, which
// writes its final frame. A write after that (a goroutine the handler left
// behind) must be refused (ErrWriterClosed or ErrFinalWritten) and nothing
// may be stored after the final frame (§12.3: is_final means no further
// records). The writer accepts the write while the runtime's final frame
// is in flight and queued it as the frame after the final one: drain then
// published it after the final, with the queue's buffer already given back
// (an empty message on the response subject).
func TestWriteAfterHandlerReturnedRefused(t *testing.T) {
	const id = "late-write-1"
	s, err := lateWriteAfterReturn(t, id, func(w agent.Writer) error {
		return w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "late"}, false)
	})
	if err == nil {
		t.Errorf("a Write after the handler returned (runtime final frame in flight) returned nil; want ErrWriterClosed or ErrFinalWritten")
	}
	msgs := storedAfterLateWrite(t, s, id, err)
	first, ferr := e2a.BurstResponses(msgs[0].Header.Get(subjects.HeaderFrames), msgs[0].Data)
	if ferr != nil || len(first) == 0 || !first[len(first)-1].IsFinal {
		t.Fatalf("first message is not the final frame: %v", ferr)
	}
	for _, m := range msgs[1:] {
		t.Errorf("message stored after the final frame: E2A-Sequence %q, %d bytes: %q",
			m.Header.Get(subjects.HeaderSequence), len(m.Data), m.Data)
	}
}

// The same with a coalesced text Chunk: it was left pending behind the
// runtime's final frame and published after it as frame 1, a chunk that
// followed is_final.
func TestChunkAfterHandlerReturnedRefused(t *testing.T) {
	const id = "late-chunk-1"
	s, err := lateWriteAfterReturn(t, id, func(w agent.Writer) error {
		return w.Chunk(e2a.DeltaText, "late")
	})
	if err == nil {
		t.Errorf("a Chunk after the handler returned (runtime final frame in flight) returned nil; want ErrWriterClosed or ErrFinalWritten")
	}
	msgs := storedAfterLateWrite(t, s, id, err)
	for i, m := range msgs {
		fr, ferr := e2a.BurstResponses(m.Header.Get(subjects.HeaderFrames), m.Data)
		if ferr != nil {
			t.Errorf("message %d does not decode: %v", i, ferr)
			continue
		}
		for _, f := range fr {
			if i > 0 {
				t.Errorf("frame stored after the final frame: sequence %d kind %s final %v", f.Sequence, f.ResponseKind, f.IsFinal)
			}
		}
	}
}
