package agent

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Test hooks for package agent_test.
var (
	WithFetchWait     = withFetchWait
	WithoutHeartbeats = withoutHeartbeats
	WithCancelSeen    = withCancelSeen
	WithMissedControl = withMissedControl
	WithBeforeBurst   = withBeforeBurst
	WithEnqueueWait   = withEnqueueWait
	WithTurnHeld      = withTurnHeld
	WithStopGrace     = withStopGrace
)

// PublishRaw publishes data as frame seq of requestID with the writer's
// fencing and retry logic, as a worker of pool "test" would.
func PublishRaw(js jetstream.JetStream, requestID string, seq int64, expected uint64, data []byte) (uint64, error) {
	w := &worker{js: js, pool: "test", cfg: defaultConfig(), streams: defaultStreams}
	w.cfg.publishTimeout = 10 * time.Second
	w.metrics, _ = newMetrics(nil)
	subj, err := subjects.Response(requestID)
	if err != nil {
		return 0, err
	}
	wr := newWriter(w, &e2a.Envelope{RequestID: requestID}, requestID, subj, nil, -1)
	return wr.publishData(seq, 1, expected, data)
}

// ConflictRetries returns how many publishes were retried after a
// wrong-last-sequence refusal on an unchanged subject.
func ConflictRetries() int64 { return conflictRetries.Load() }

// RunWithAnchorSpawn is Run with the cancel watch's background reads of its
// anchor started by spawn (cancelWatch.spawn; Run's runs f in a goroutine).
func RunWithAnchorSpawn(ctx context.Context, nc *nats.Conn, pool string, h Handler, spawn func(f func()), opts ...Option) error {
	w, err := newWorker(nc, pool, h, opts)
	if err != nil {
		return err
	}
	w.cancels.spawn = spawn
	return w.run(ctx)
}
