package streams

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRetryPlacement: a create refused as not placeable for now (no
// suitable peers, cluster not available: the errors a cluster that has
// just started answers; deploy's TestProductionDeployment met "no suitable
// peers for placement, peer offline" from `e2a streams apply`) is tried
// again with a doubling back-off, within 30 s; any other error, and a
// done context, end it at once.
func TestRetryPlacement(t *testing.T) {
	noPeers := &jetstream.APIError{Code: 400, ErrorCode: errCodeNoSuitablePeers, Description: "no suitable peers for placement, peer offline"}
	notAvail := &jetstream.APIError{Code: 503, ErrorCode: errCodeClusterNotAvailable, Description: "JetStream system temporarily unavailable"}
	other := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeBadRequest, Description: "bad request"}
	run := func(t *testing.T, ctx context.Context, errs ...error) (error, int, time.Duration) {
		calls, start := 0, time.Now()
		err := RetryPlacement(ctx, func(context.Context) error {
			calls++
			if calls <= len(errs) {
				return errs[calls-1]
			}
			return errs[len(errs)-1]
		})
		return err, calls, time.Since(start)
	}
	synctest.Test(t, func(t *testing.T) {
		if err, calls, took := run(t, context.Background(), noPeers, notAvail, nil); err != nil || calls != 3 || took != 750*time.Millisecond {
			t.Errorf("refused twice then placed: %v after %d calls, %v", err, calls, took)
		}
		if err, calls, took := run(t, context.Background(), other); !errors.Is(err, other) || calls != 1 || took != 0 {
			t.Errorf("another error: %v after %d calls, %v", err, calls, took)
		}
		// A request that timed out (its answer late under load): again.
		if err, calls, took := run(t, context.Background(), context.DeadlineExceeded, nats.ErrTimeout, nil); err != nil || calls != 3 || took != 750*time.Millisecond {
			t.Errorf("timed out twice then placed: %v after %d calls, %v", err, calls, took)
		}
		// 250 ms, 500 ms, 1 s, then 2 s each while the next wait ends within 30 s:
		// 17 waits, 29.75 s.
		if err, calls, took := run(t, context.Background(), noPeers); !errors.Is(err, noPeers) || calls != 18 || took != 29750*time.Millisecond {
			t.Errorf("always refused: %v after %d calls, %v", err, calls, took)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err, calls, took := run(t, ctx, noPeers); !errors.Is(err, noPeers) || calls != 3 || took != time.Second {
			t.Errorf("context done: %v after %d calls, %v", err, calls, took)
		}
	})
}
