package streams

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Retryable reports whether err is a failure of the NATS cluster that the
// same request, sent again a moment later, may not meet: no server
// answering it (nats.ErrNoResponders, jetstream.ErrNoStreamResponse: a
// stream or bucket between two leaders), no answer in time
// (context.DeadlineExceeded, nats.ErrTimeout: sent to a server that
// stopped under it), a direct get refused (ErrDirectGet), or the
// JetStream API's 503 (the cluster unavailable). The caller decides
// whether its request may be sent twice (a compare-and-set may: a copy
// that landed is found by the next read) and how long to go on.
func Retryable(err error) bool {
	var ae *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, ErrDirectGet) || (errors.As(err, &ae) && ae.Code == 503)
}
