package push

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/streams"
)

// A consumer of the stage can disappear under it: an operator's `nats
// consumer rm`, a stream restored from a backup, a cluster that lost the
// consumer's state. Its consume then ends with ErrConsumerDeleted (the
// server's 409 "Consumer Deleted" to the pull waiting: nats.go stops the
// consume) or, for one that missed it, pulls answered by nobody
// (nats.ErrNoResponders). The stage binds the consumer again the way it
// bound it at start (bindConsumer, bindWake) and consumes it again.
//
// Nothing is lost or sent twice: the deliveries are kept per config in
// the bucket, not by the consumer. The response consumer made again
// starts, as when first made, at the oldest stored config's start
// (startSeq): a task update stored while it was gone is delivered, and one
// delivered before is skipped by its config's cursor (handled). A stream
// made again (its consumers go with it) numbers its messages from 1
// again: a config's start and a cursor name the stream they are of (its
// creation time, Config.Stream), and in a newer one the config starts at
// the stream's first message, its cursor again (cursor.inStream). A
// stream restored from a backup numbers its messages from the backup's
// again; nats-server 2.15's snapshots carry no creation time, so it is
// made with a new one and counts as made again
// (TestRestoredBackupRebasesPositions). A backup in the format of
// earlier servers (a tar holding the stream's meta.inf) restored keeps,
// by the server's code (not run here), the creation time it had:
// positions written after that backup are not recognised as another
// stream's, and updates stored at sequences up to them are skipped. The
// wake-up consumer delivers the last wake-up of every parked config
// (DeliverLastPerSubject): each parked config is drained again.

// feed is one of the stage's consumers and its consume.
type feed struct {
	stream, name string
	bind         func(context.Context) (jetstream.Consumer, error)
	handler      jetstream.MessageHandler
	cc           jetstream.ConsumeContext
	gone         chan error // a consume's error saying the consumer may be gone
}

// consume consumes c into f's handler; an error of the consume saying
// that the consumer may be gone is signalled on f.gone (waitStop).
func (s *stage) consume(f *feed, c jetstream.Consumer) error {
	if f.gone == nil {
		f.gone = make(chan error, 1)
	}
	cc, err := c.Consume(f.handler, jetstream.PullMaxMessages(256),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if consumerGone(err) {
				select {
				case f.gone <- err:
				default:
				}
			}
		}))
	if err != nil {
		return fmt.Errorf("push: consume %s: %w", f.name, err)
	}
	f.cc = cc
	return nil
}

// consumerGone reports whether a consume's error may mean that its
// consumer no longer exists.
func consumerGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, nats.ErrNoResponders)
}

// rebind binds f's consumer again after its consume said it may be gone
// (cause) and consumes it again, retried with a backoff from 100 ms to 5 s
// while it cannot be bound, until ctx is done or the connection closed.
// A consume that goes on (a pull answered by nobody while the consumer is
// there: a leader change) is left alone.
func (s *stage) rebind(ctx context.Context, f *feed, cause error) {
	if !errors.Is(cause, jetstream.ErrConsumerDeleted) {
		look, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := s.js.Consumer(look, f.stream, f.name)
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			if err == nil && f.stream == streams.ResponsesStream {
				// Another replica may have bound it again on a stream
				// made again: its sequences are the new stream's.
				_ = s.refreshEpoch(look)
			}
			cancel()
			return
		}
		cancel()
	}
	s.log.Warn("push: consumer gone: binding it again with the start-up configuration", "consumer", f.name, "stream", f.stream, "cause", cause)
	f.cc.Stop()
	backoff := 100 * time.Millisecond
	for {
		c, err := f.bind(ctx)
		if err == nil {
			if err = s.consume(f, c); err == nil {
				s.log.Warn("push: consumer bound again", "consumer", f.name, "stream", f.stream)
				return
			}
		}
		if ctx.Err() != nil || s.nc.IsClosed() {
			return
		}
		s.log.Warn("push: cannot bind the consumer again, retrying", "consumer", f.name, "err", err, "wait", backoff)
		if sleepctx.Sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
