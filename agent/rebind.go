package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A pool's durable consumer can disappear under its workers: an operator's
// `nats consumer rm`, a stream restored from a backup, a cluster that lost
// the consumer's state. A fetch then ends with ErrConsumerDeleted (the
// server's 409 "Consumer Deleted" to the pull waiting) and every later one
// with nats.ErrNoResponders (nothing answers the pull requests of a
// consumer that does not exist). The worker looks the consumer up and,
// when it is not found, makes it again through consumerHandle: with the
// configuration of the start-up path (consumerConfig), retried with its
// backoff while the server refuses; without WithProvisionConsumer it waits
// for the consumer to be made again by whoever made it.
//
// What the deletion lost is the consumer's state: which requests were
// acknowledged. E2A_REQUESTS keeps its requests by limits (not a work
// queue: an acked request stays stored), and the consumer delivers all
// (streams.AgentConsumerConfig), so the new consumer delivers the pool's
// requests again from the oldest stored: one stored while there was no
// consumer is delivered, as is one answered long ago, each as a first
// delivery. A first delivery of a request stored before its consumer was
// made is therefore read like a redelivery (resume): a request whose final
// frame is stored is acked (OutcomeAlreadyFinal), never served again, and
// one with frames but no final frame (held by a worker when its consumer
// went) is resumed or interrupted as a redelivery is.

// bound records when the consumer the worker fetches from was made.
func (w *worker) bound(ci *jetstream.ConsumerInfo) {
	if ci != nil {
		w.created.Store(ci.Created.UnixNano())
	}
}

// deliveredBefore reports whether a first delivery stored at stored may
// have been delivered (and answered) by an earlier consumer of the pool:
// it was stored before the consumer that delivers it was made.
func (w *worker) deliveredBefore(stored time.Time) bool {
	return stored.UnixNano() < w.created.Load()
}

// consumerGone reports whether a fetch's error may mean that the pool's
// consumer no longer exists (rebind looks it up).
func consumerGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, nats.ErrNoResponders)
}

// fetchFailed handles a failed or ended fetch: when the error may mean the
// consumer is gone it is looked up and, if gone, made again (rebind);
// otherwise, and when it is still there, retryFetch backs off. It returns
// the consumer to fetch from next.
func (w *worker) fetchFailed(ctx context.Context, cons jetstream.Consumer, err error, log func(string, ...any), msg string, backoff *time.Duration) (jetstream.Consumer, bool, error) {
	if consumerGone(err) && !w.js.Conn().IsClosed() {
		next, made, rerr := w.rebind(ctx, err)
		switch {
		case rerr != nil && ctx.Err() != nil:
			return cons, true, nil
		case rerr != nil:
			return cons, true, rerr
		case made:
			*backoff = 10 * time.Millisecond
			w.maxFirst = 0
			return next, false, nil
		case next != nil:
			cons, w.maxFirst = next, 0
		}
	}
	stop, err := w.retryFetch(ctx, err, log, msg, backoff)
	return cons, stop, err
}

// rebind looks the pool's consumer up after a fetch said it may be gone
// (cause). Found (a leader change, or made again by another worker), it
// is returned with made false. Not found, it is made again, or waited for
// without WithProvisionConsumer (consumerHandle), and returned with made
// true. A failed look-up returns nothing: the fetch is retried. err is set
// only when ctx is done or the connection closed.
func (w *worker) rebind(ctx context.Context, cause error) (cons jetstream.Consumer, made bool, err error) {
	look, cancel := context.WithTimeout(ctx, ioTimeout)
	cons, err = w.js.Consumer(look, w.streams.Requests, w.consumer)
	cancel()
	if err == nil {
		w.bound(cons.CachedInfo())
		return cons, false, nil
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		if isClosed(err) {
			return nil, false, fmt.Errorf("agent: consumer %s: %w", w.consumer, err)
		}
		return nil, false, nil
	}
	if w.cfg.provision {
		w.log.Warn("the pool's consumer is gone: making it again with the start-up configuration; its requests are delivered again from the oldest stored, those answered only acked",
			"consumer", w.consumer, "stream", w.streams.Requests, "cause", cause)
	} else {
		w.log.Warn("the pool's consumer is gone: waiting for it to be made again (consumer provisioning is off)",
			"consumer", w.consumer, "stream", w.streams.Requests, "cause", cause)
	}
	cons, err = w.consumerHandle(ctx)
	if err != nil {
		return nil, false, err
	}
	w.bound(cons.CachedInfo())
	w.log.Warn("the pool's consumer is bound again", "consumer", w.consumer)
	return cons, true, nil
}

// noteFirst watches the first deliveries the fetch loop gets: one consumer
// delivers new requests in stream order, and one worker's fetches follow
// each other, so a first delivery at or below the highest one seen comes
// from a consumer made again by another worker while this one did not
// fetch. The consumer's creation time is then read again, before m is
// handled, so that m and the requests after it are read like redeliveries
// (deliveredBefore). Called by the fetch loop only.
func (w *worker) noteFirst(cons jetstream.Consumer, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil || md.NumDelivered != 1 {
		return
	}
	seq := md.Sequence.Stream
	if seq > w.maxFirst {
		w.maxFirst = seq
		return
	}
	w.maxFirst = seq
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	ci, err := cons.Info(ctx)
	if err != nil {
		w.log.Warn("the pool's consumer delivered an older request first: cannot read when it was made", "consumer", w.consumer, "err", err)
		return
	}
	if ci.Created.UnixNano() != w.created.Load() {
		w.log.Warn("the pool's consumer was made again by another worker", "consumer", w.consumer)
	}
	w.bound(ci)
}
