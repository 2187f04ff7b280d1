package audit

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestCallRetriesWhatADisconnectCut: nats.go ends a flush under way when
// its connection is lost (it closes the flush's channel) with
// nats.ErrConnectionClosed, though the connection reconnects. e2a tail
// took that for its end and exited during its set-up (CI on 537075a:
// TestTailSaysNATSConnectionLost, "e2a: nats: connection closed"); a call
// tries it again unless the connection is closed for good.
func TestCallRetriesWhatADisconnectCut(t *testing.T) {
	_, nc := natstest.RunServer(t)
	a, err := New(nc)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	cutOnce := func(context.Context) error {
		if calls++; calls == 1 {
			return nats.ErrConnectionClosed
		}
		return nil
	}
	if err := a.call(context.Background(), cutOnce); err != nil || calls != 2 {
		t.Fatalf("a call cut once by a disconnect: %v after %d attempts, want nil after 2", err, calls)
	}
	nc.Close()
	calls = 0
	closed := func(context.Context) error { calls++; return nats.ErrConnectionClosed }
	if err := a.call(context.Background(), closed); !errors.Is(err, nats.ErrConnectionClosed) || calls != 1 {
		t.Fatalf("a call on a closed connection: %v after %d attempts, want nats.ErrConnectionClosed after 1", err, calls)
	}
}
