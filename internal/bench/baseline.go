package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Baseline is the raw JetStream async publish rate of the server under
// test: the broker's limit, measured first in the same run.
type Baseline struct {
	Messages   int     `json:"messages"`
	MsgBytes   int     `json:"message_bytes"`
	Window     int     `json:"max_pending"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgs_per_s"`
}

// BaselineStream is the scratch stream of the baseline, deleted after it.
const BaselineStream = "E2A_BENCH_RAW"

// measureBaseline publishes n messages of size bytes asynchronously (at most
// window unacknowledged) to a scratch file stream on nc's server, with one
// subject per 8 messages as response frames have, and returns the rate of
// acknowledged publishes.
func measureBaseline(ctx context.Context, nc *nats.Conn, n, size, window int) (Baseline, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window))
	if err != nil {
		return Baseline{}, err
	}
	_ = js.DeleteStream(ctx, BaselineStream)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: BaselineStream, Subjects: []string{"e2a_bench_raw.>"},
		Storage: jetstream.FileStorage, Replicas: 1, MaxAge: time.Hour,
	}); err != nil {
		return Baseline{}, fmt.Errorf("bench: baseline stream: %w", err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), BaselineStream) }()
	data := []byte(payload(size))
	// Subjects are built first so that the loop measures the publish only.
	subs := make([]string, (n+7)/8)
	for i := range subs {
		subs[i] = "e2a_bench_raw." + strconv.Itoa(i)
	}
	// A full window waits for acknowledgements (the rate is the measure):
	// nats.go's default gives up after 200 ms ("stalled with too many
	// outstanding async published messages"), which a shared machine's
	// load reached (twice at load 10, 2026-11-30).
	stall := jetstream.WithStallWait(time.Minute)
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := js.PublishAsync(subs[i/8], data, stall); err != nil {
			return Baseline{}, fmt.Errorf("bench: baseline publish: %w", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return Baseline{}, ctx.Err()
	case <-time.After(2 * time.Minute):
		return Baseline{}, fmt.Errorf("bench: baseline: %d publishes unacknowledged", js.PublishAsyncPending())
	}
	el := time.Since(start)
	info, err := js.Stream(ctx, BaselineStream)
	if err != nil {
		return Baseline{}, err
	}
	if got := info.CachedInfo().State.Msgs; got != uint64(n) {
		return Baseline{}, fmt.Errorf("bench: baseline stored %d of %d messages", got, n)
	}
	return Baseline{Messages: n, MsgBytes: size, Window: window, Seconds: el.Seconds(), MsgsPerSec: float64(n) / el.Seconds()}, nil
}
