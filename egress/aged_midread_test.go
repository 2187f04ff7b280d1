package egress

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// readSome opens a reader of request id, two frames per batch, and
// returns it with the stream sequence of the last of the n frames it read.
func readSome(t *testing.T, ctx context.Context, e *testEnv, id string, n int) (*Reader, uint64) {
	t.Helper()
	r, err := Open(ctx, e.nc, id, 0, WithBatch(2, 0), WithoutRequestCheck())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	var last uint64
	for i := range n {
		f, err := r.Next(ctx)
		if err != nil || f.Sequence() != int64(i) {
			t.Fatalf("frame %d: %d %v", i, f.Sequence(), err)
		}
		last = f.StreamSeq
	}
	return r, last
}

// A slow reader whose next frames aged out of E2A_RESPONSES between two of
// its batches (DiscardOld at the stream's byte bound, or its max age) ends
// with ErrFramesExpired (410 frames_expired, the audit copy named), not
// ErrInvalidFrame ("stored sequence 4 where 2 was expected", 502), which
// tells the client the pipeline broke. A hole in the middle of the stored
// frames (a message deleted while older ones stay) is still ErrInvalidFrame.
func TestFramesAgedOutMidRead(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	aged := uuid.Must(uuid.NewV7()).String()
	e.finished(t, aged, 4) // frames 0-3 text, 4 complete
	r, _ := readSome(t, ctx, e, aged, 2)
	natstest.PurgeBelowLast(t, e.js, streams.ResponsesStream) // frames 0-3 age out, 4 stays
	if _, err := r.Next(ctx); !errors.Is(err, ErrFramesExpired) {
		t.Errorf("next frames aged out mid-read: %v, want ErrFramesExpired", err)
	}

	holed := uuid.Must(uuid.NewV7()).String()
	e.finished(t, holed, 4)
	r, last := readSome(t, ctx, e, holed, 2)
	st, err := e.js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, last+1); err != nil { // frame 2 of the request
		t.Fatal(err)
	}
	if _, err := r.Next(ctx); !errors.Is(err, ErrInvalidFrame) {
		t.Errorf("a frame deleted from the middle: %v, want ErrInvalidFrame", err)
	}
}
