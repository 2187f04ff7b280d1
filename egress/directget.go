package egress

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/streams"
)

// streamsGetter reads with streams.DirectGetBatch (a subscription per
// call) instead of the shared reply inbox; kept for the benchmark that
// compares both.
func streamsGetter(nc *nats.Conn) batchGetter {
	return func(ctx context.Context, stream, subject string, start uint64, batch, _ int, fn func(uint64, nats.Header, []byte) error) (uint64, error) {
		msgs, more, err := streams.DirectGetBatch(ctx, nc, stream, subject, start, batch)
		if errors.Is(err, streams.ErrNoMessages) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		for _, m := range msgs {
			if err := fn(m.Seq, m.Header, m.Data); err != nil {
				return 0, err
			}
		}
		if more {
			return 1, nil
		}
		return 0, nil
	}
}
