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
// made with a new one, and it holds the backup's messages, stored before
// it was made, at the sequences they had: the positions in the stream
// backed up stand up to the last of them (the restore point, epochOf),
// and one written after the backup is at the restore point
// (cursor.restoredIn, Config.fromIn). So a restore without consumers,
// whose new consumer starts at the stream's first message, sends nothing
// again that a cursor passed (TestRestoreWithoutConsumersSendsNothingTwice),
// and updates stored after the restore are delivered
// (TestRestoredBackupRebasesPositions). A backup in the format of
// earlier servers (a tar holding the stream's meta.inf) restored keeps
// the creation time it had: the stream went back under the positions
// written after that backup. A cursor and a config's From name the time
// their message was stored (cursor.At, Config.FromAt), so a message
// stored later at a sequence not after one (wentBack: no read, compared
// as the message is taken) shows it; one read of the stream's leader
// finds the restore point (noteRewind: the message before the first
// stored after the position's), and positions past it, of messages
// stored before that first one (streamEpoch.lost), are at the restore
// point as above (a cursor found so is written there at once). A new
// consumer starts no later than the first message stored after the
// oldest config's From was (startSeq), so messages stored after such a
// restore before the stage binds it are read too
// (TestPre215RestoreWhileStoppedDelivers). Positions written before
// cursors and configs had the time are not recognised. The wake-up
// consumer delivers the last wake-up of every parked config
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
	cc, err := c.Consume(f.handler, jetstream.PullMaxMessages(256), jetstream.PullHeartbeat(streams.PullHeartbeat),
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

// streamEpoch is an E2A_RESPONSES as the stage knows it: its creation
// time (the epoch of stage.epoch, Config.Stream, cursor.Stream) and, when
// it holds messages stored before it was made (it was restored from a
// backup), the last of those.
type streamEpoch struct {
	at int64 // creation time, Unix nanoseconds; 0: not known
	// restored is the sequence of the last message stored before the
	// stream was made (0: none), restoredAt the time it was stored.
	restored   uint64
	restoredAt int64
	// rewound, when resumed is set, is where the stream went back to
	// under positions written in it, its creation time kept (restored
	// from a backup in the format of servers before 2.15): the sequence
	// of the last restored message; resumed is the time the message after
	// it was stored (noteRewind).
	rewound uint64
	resumed int64
}

// lost reports whether a position in e at seq, whose message was stored
// at at (Unix nanoseconds; 0: not known), is one of the messages the
// stream lost going back (rewound): past the restore point, and stored
// before the first message stored after it, where every message of the
// stream past the restore point is stored since.
func (e streamEpoch) lost(seq uint64, at int64) bool {
	return e.resumed != 0 && at != 0 && seq > e.rewound && at < e.resumed
}

// wentBack reports whether a position in the stream at seq, whose message
// was stored at at (0: not known), cannot be one of the stream of the
// message at mseq stored at mat: that message was stored after the
// position's, at a sequence not after it. The stream went back under the
// position keeping its creation time (noteRewind).
func wentBack(seq uint64, at int64, mseq uint64, mat int64) bool {
	return at != 0 && mseq <= seq && mat > at
}

// at is the time m was stored, Unix nanoseconds (0: not known).
func (m *message) at() int64 {
	if m.stored.IsZero() {
		return 0
	}
	return m.stored.UnixNano()
}

// noteRewind finds where E2A_RESPONSES made at epoch went back to, given
// a position whose message was stored at at and the message at mseq of
// the stream, stored later at mat (wentBack): the restored messages were
// stored before at, the ones stored since the restore after it, so the
// first message stored after at is the first one after the restore
// point. Two reads of the stream's leader, only when a position is found
// to have gone back, none for one the stage noted it for (lost). The
// stream as the stage knows it (epochAt) takes it when it is the newest.
func (s *stage) noteRewind(ctx context.Context, epoch int64, seq uint64, at int64, mseq uint64, mat int64) (streamEpoch, error) {
	// Confirmed first: the position's own message still stored, as it was,
	// says the stream did not go back (a server's clock that stepped back,
	// a leader's behind the one before: times need not rise with
	// sequences). One more read of the leader, as rare.
	own, err := streams.LeaderNextBySubject(ctx, s.nc, streams.ResponsesStream, ">", seq)
	switch {
	case err == nil && own.Seq == seq && own.Time.UnixNano() == at:
		return s.epochAt(epoch), nil
	case err != nil && !errors.Is(err, streams.ErrNoMessages):
		return streamEpoch{}, fmt.Errorf("push: read where %s went back: %w", streams.ResponsesStream, err)
	}
	first, err := s.firstSince(ctx, time.Unix(0, at+1))
	switch {
	case errors.Is(err, streams.ErrNoMessages) || err == nil && first.Seq > mseq:
		first = streams.RawMsg{Seq: mseq, Time: time.Unix(0, mat)} // removed since it was read
	case err != nil:
		return streamEpoch{}, fmt.Errorf("push: read where %s went back: %w", streams.ResponsesStream, err)
	}
	for {
		old := s.restored.Load()
		e := streamEpoch{at: epoch}
		if old != nil && old.at == epoch {
			e = *old
		}
		if e.resumed >= first.Time.UnixNano() {
			return e, nil // noted already, or a later rewind
		}
		e.rewound, e.resumed = first.Seq-1, first.Time.UnixNano()
		if old != nil && old.at > epoch || s.restored.CompareAndSwap(old, &e) {
			s.log.Warn("push: "+streams.ResponsesStream+" went back under the delivery positions (restored from a backup "+
				"keeping its creation time); the positions past the restore point count as at it", "restore_point", e.rewound)
			return e, nil
		}
	}
}

// fromBack notes the stream at epoch gone back (noteRewind) when the
// message at seq, stored at at, says it went back under c's From
// (wentBack) and the stage has not noted it yet.
func (s *stage) fromBack(ctx context.Context, c Config, epoch int64, seq uint64, at int64) error {
	if epoch == 0 || c.Stream != epoch || !wentBack(c.From, c.FromAt, seq, at) || s.epochAt(epoch).lost(c.From, c.FromAt) {
		return nil
	}
	_, err := s.noteRewind(ctx, epoch, c.From, c.FromAt, seq, at)
	return err
}

// position is cur, it's config's cursor read at rev, as a position in
// the stream of it's message (forConfig, inStream). One the stream went
// back under (lost: noted, or found now with wentBack and noteRewind) is
// written at the restore point at once, so that the config's drain and
// the other replicas go on from there.
func (s *stage) position(it item, cur cursor, rev uint64) (cursor, uint64, error) {
	cur = cur.forConfig(it.cfg)
	epoch, m := it.job.epoch, it.job.m
	e := s.epochAt(epoch)
	ours := epoch != 0 && cur.Stream == epoch
	if ours && !e.lost(cur.Seq, cur.At) && wentBack(cur.Seq, cur.At, m.seq, m.at()) {
		var err error
		if e, err = s.noteRewind(s.ctx, epoch, cur.Seq, cur.At, m.seq, m.at()); err != nil {
			return cur, rev, err
		}
	}
	now, ok := cur.inStream(e)
	switch {
	case !ok:
		return now, rev, errOtherStream
	case ours && rev != 0 && e.lost(cur.Seq, cur.At):
		r, err := writeCursor(s.ctx, s.kv, it.ref.cursorKey(), now, rev)
		return now, r, err
	}
	return now, rev, nil
}

// holds reports whether the positions in the E2A_RESPONSES made at
// stream, older than e, stand in e up to e.restored: e was restored from a
// backup of that stream (its last restored message was stored since that
// stream was made), so those messages are the ones the positions counted,
// at the same sequences. (A position two streams old, of a stream made
// again before the one backed up, is taken as the backed up one's.)
func (e streamEpoch) holds(stream int64) bool {
	return e.restored > 0 && stream < e.at && e.restoredAt >= stream
}

// epochAt is the stream made at epoch as the stage last read it
// (refreshEpoch); without a restore point when it read a newer one since.
func (s *stage) epochAt(epoch int64) streamEpoch {
	if e := s.restored.Load(); e != nil && e.at == epoch {
		return *e
	}
	return streamEpoch{at: epoch}
}

// epochOf is the stream of info: its restore point is before the first
// message stored at or after its creation, both read from the stream's
// leader (a replica behind could count messages stored after the
// restore as restored). Two reads, only for a stream whose first message
// was stored before it was made, when the stage binds its consumer or
// finds the stream made again, never per message.
func (s *stage) epochOf(ctx context.Context, info *jetstream.StreamInfo) (streamEpoch, error) {
	e := streamEpoch{at: info.Created.UnixNano()}
	if p := s.restored.Load(); p != nil && p.at == e.at {
		return *p, nil
	}
	if info.State.Msgs == 0 || !info.State.FirstTime.Before(info.Created) {
		return e, nil // nothing stored before it was made: no request
	}
	last := info.State.LastSeq // read before: a message stored since is after the creation
	first, err := s.firstSince(ctx, info.Created)
	switch {
	case errors.Is(err, streams.ErrNoMessages):
	case err != nil:
		return e, fmt.Errorf("push: read where %s was restored: %w", streams.ResponsesStream, err)
	default:
		last = first.Seq - 1
	}
	if last < info.State.FirstSeq {
		return e, nil
	}
	m, err := streams.LeaderNextBySubject(ctx, s.nc, streams.ResponsesStream, ">", last)
	if err != nil && !errors.Is(err, streams.ErrNoMessages) {
		return e, fmt.Errorf("push: read where %s was restored: %w", streams.ResponsesStream, err)
	}
	if err == nil && m.Seq == last && m.Time.Before(info.Created) {
		e.restored, e.restoredAt = last, m.Time.UnixNano()
	}
	return e, nil
}

// firstSince is the first message of E2A_RESPONSES stored at t or
// later, as the stream's leader answers it (streams.LeaderFirstSince).
func (s *stage) firstSince(ctx context.Context, t time.Time) (streams.RawMsg, error) {
	return streams.LeaderFirstSince(ctx, s.nc, streams.ResponsesStream, t)
}
