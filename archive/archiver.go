package archive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// errConflict: another archiver stored a batch since this one read the
// archive's last batch.
var errConflict = errors.New("archive: another archiver stored a batch first")

// archiver is one Run.
type archiver struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	o   options
	m   *metrics
	log *slog.Logger
	enc encoder
	r   *Reader // the archive's batches before a corrupt last one

	corrupt      uint64         // the corrupt last batch counted last
	failingSince time.Time      // the first failure since the last progress; zero while progressing
	drops        sync.WaitGroup // the ended sessions' consumers being deleted
}

// Run archives E2A_AUDIT into E2A_ARCHIVE until ctx is done, then returns
// nil. It keeps no state of its own: it reads the archive's last batch
// (its E2A-Archive-Last header) and reads E2A_AUDIT on from the next
// sequence with an ordered consumer, closing a batch at WithBatchBytes or
// WithFlushInterval. Each batch is stored with the subject's expected last
// sequence, so several archivers may run (a rolling update, a second
// replica): a batch another stored first is refused, and the refused
// archiver starts again after the new last batch. Nothing is stored twice
// and, while E2A_AUDIT still holds them, nothing is skipped: messages
// E2A_AUDIT dropped before they were archived are counted
// (e2a_archive_missed_total) and logged.
//
// It returns ErrInvalidOption for a bad option or a nil connection, and an
// error when the connection is closed under it; every other failure (a
// stream missing, a NATS node failing over) is logged and retried.
func Run(ctx context.Context, nc *nats.Conn, opts ...Option) error {
	o, err := buildOptions(nc, opts)
	if err != nil {
		return err
	}
	m, err := newMetrics(o.registerer)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	r, err := NewReader(nc)
	if err != nil {
		return err
	}
	if o.health != nil {
		o.health.setAfter(o.stallAfter)
	}
	a := &archiver{nc: nc, js: js, o: o, m: m, log: o.log, r: r}
	defer a.awaitDrops(dropTimeout)
	var wait retryWait
	for {
		err := a.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if nc.IsClosed() {
			return fmt.Errorf("archive: %w", nats.ErrConnectionClosed)
		}
		var d time.Duration
		if errors.Is(err, errConflict) {
			a.m.conflicts.Inc()
			a.log.Info("another archiver stored a batch first: reading the archive again")
			d = wait.next(true)
		} else {
			// The first failure since the archive progressed (a batch
			// stored, E2A_AUDIT read to its end) is retried at once, not
			// after the back-off of failures long past.
			d = wait.next(a.failingSince.IsZero())
			a.failed(err)
			a.log.Warn("archiving stopped, retrying", "err", err, "in", d)
		}
		if sleepctx.Sleep(ctx, d) != nil {
			return nil
		}
	}
}

// Run's waits between sessions: the first after a fresh start, then
// doubled up to the last.
const (
	firstRetryWait = 100 * time.Millisecond
	lastRetryWait  = 5 * time.Second
)

// retryWait is Run's back-off between sessions that ended without the
// caller stopping it.
type retryWait struct{ d time.Duration }

// next returns the wait before the next session: firstRetryWait on the
// first call and when fresh (a conflict, or the first failure since the
// archive progressed), else twice the previous wait, at most
// lastRetryWait.
func (w *retryWait) next(fresh bool) time.Duration {
	if fresh || w.d == 0 {
		w.d = firstRetryWait
	} else {
		w.d = min(2*w.d, lastRetryWait)
	}
	return w.d
}

// position is where the archive ends: the E2A_AUDIT sequence of its last
// archived message (0 before the first of the epoch), the archive's
// sequence of the batch holding it (0 for an empty archive), and the
// epoch of E2A_AUDIT the sequences are of.
type position struct {
	auditSeq, batchSeq uint64
	epoch              time.Time
}

// lastPosition reads the archive's last batch; after a corrupt one, see
// pastCorrupt.
func (a *archiver) lastPosition(ctx context.Context) (position, error) {
	m, err := streams.LastBySubject(ctx, a.nc, streams.ArchiveStream, subjects.ArchiveBatches)
	if errors.Is(err, streams.ErrNoMessages) {
		return position{}, nil
	}
	if err != nil {
		return position{}, err
	}
	b, err := parseHeader(m)
	if _, ok := corruptAt(err); ok {
		return a.pastCorrupt(ctx, m.Seq, err)
	}
	if err != nil {
		return position{}, err
	}
	return position{auditSeq: b.Last, batchSeq: b.Seq, epoch: b.Epoch}, nil
}

// pastCorrupt is the position after the archive's corrupt last batch seq
// (its headers do not read: it does not say where the archive ends, and
// E2A_ARCHIVE denies its deletion): after the newest sound batch before it,
// fenced on seq. What seq may have held is archived again from E2A_AUDIT
// (what E2A_AUDIT no longer holds is counted missed), in batches after it
// that readers read instead (Reader.Records reads around it); every
// archiver finds the same position, and the fence lets one store. Without
// a sound batch before it, the archive starts again from E2A_AUDIT's first
// message. Counted once per batch (e2a_archive_corrupt_batches_total).
func (a *archiver) pastCorrupt(ctx context.Context, seq uint64, cause error) (position, error) {
	st, err := a.js.Stream(ctx, streams.ArchiveStream)
	if err != nil {
		return position{}, fmt.Errorf("stream %s: %w", streams.ArchiveStream, err)
	}
	prev, err := a.r.prevSound(ctx, seq-1, st.CachedInfo().State.FirstSeq)
	if err != nil && !errors.Is(err, errNoSound) {
		return position{}, fmt.Errorf("the sound batch before corrupt batch %d: %w", seq, err)
	}
	pos := position{batchSeq: seq}
	if prev != nil {
		pos.auditSeq, pos.epoch = prev.Last, prev.Epoch
	}
	if a.corrupt != seq {
		a.corrupt = seq
		a.m.corrupt.Inc()
		a.log.Error("E2A_ARCHIVE's last batch is corrupt: archiving again after the sound batch before it",
			"batch", seq, "err", cause, "from_audit_seq", pos.auditSeq+1)
	}
	return pos, nil
}

// Watching the ordered consumer: it notices a consumer lost with its
// server only by missed heartbeats, then recreates it, and while the
// cluster elects leaders after a crash those creates can fail or go
// unanswered for long (CI once saw nothing archived for 40 s, nothing
// logged).
const (
	// maxResets bounds the client's attempts to recreate a lost consumer
	// (each up to 10 s; unbounded by default): past them the session ends
	// with the error and the next one starts from the archive's last batch.
	maxResets = 2
	// watchEvery is how often a session reads E2A_AUDIT's state while
	// nothing arrives (one stream info call, never one per message).
	watchEvery = 2 * time.Second
	// stallAfter ends a session whose consumer delivered nothing for this
	// long while E2A_AUDIT holds messages past what it read.
	stallAfter = 4 * time.Second
	// dropTimeout bounds the deletion of a session's consumer.
	dropTimeout = 2 * time.Second
	// apiTimeout bounds each JetStream request of a session.
	apiTimeout = 5 * time.Second
	// createTimeout bounds the creation of a session's consumer (a few
	// milliseconds when it is answered at all).
	createTimeout = 3 * time.Second
)

// errNothingDelivered: E2A_AUDIT holds messages the session's consumer
// does not deliver.
var errNothingDelivered = errors.New("archive: E2A_AUDIT's consumer delivers nothing")

// session archives from the archive's last batch on, until an error or
// ctx is done. Its consumer is deleted when it ends.
func (a *archiver) session(ctx context.Context) error {
	pos, cons, err := a.open(ctx)
	if err != nil {
		return err
	}
	// At most 2 MiB read ahead (a batch and more), whatever the messages'
	// sizes: the client's default (500 messages, no byte bound) held 7.6 MB
	// of a running e2a dev's heap. Never less than the largest message the
	// server takes, with room for its subject and headers: the server
	// delivers no message over a pull's byte bound, and the archive would
	// stop at it for good.
	it, err := cons.Messages(jetstream.PullMaxBytes(max(2<<20, int(a.js.Conn().MaxPayload())+64<<10)),
		jetstream.PullHeartbeat(streams.PullHeartbeat)) // a consumer lost noticed in 2 s (the client's default, 5 s, took 10)
	if err != nil {
		a.dropConsumer(cons, nil)
		return err
	}
	defer a.dropConsumer(cons, it)
	return a.read(ctx, it, pos)
}

// open reads where the archive ends and creates the ordered consumer that
// reads E2A_AUDIT on from there, each request bounded (apiTimeout,
// createTimeout) whatever ctx's deadline: right after a server's crash a
// consumer's create can go unanswered (the three-server deploy test saw
// it), and another attempt is answered.
func (a *archiver) open(ctx context.Context) (position, jetstream.Consumer, error) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	pos, err := a.lastPosition(actx)
	cancel()
	if err != nil {
		return pos, nil, err
	}
	actx, cancel = context.WithTimeout(ctx, apiTimeout)
	st, err := a.js.Stream(actx, streams.AuditStream)
	cancel()
	if err != nil {
		return pos, nil, fmt.Errorf("stream %s: %w", streams.AuditStream, err)
	}
	if epoch := st.CachedInfo().Created; !pos.epoch.Equal(epoch) {
		if pos.batchSeq > 0 && !pos.epoch.IsZero() { // (zero: after a corrupt batch with no sound one before it)
			// E2A_AUDIT was deleted and applied again: its sequences
			// start again. The archive keeps the old epoch's batches.
			a.log.Warn("E2A_AUDIT is a new stream: archiving it from its first message in a new epoch",
				"previous_epoch", pos.epoch, "epoch", epoch)
		}
		pos.auditSeq, pos.epoch = 0, epoch
	}
	actx, cancel = context.WithTimeout(ctx, createTimeout)
	defer cancel()
	cons, err := a.js.OrderedConsumer(actx, streams.AuditStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy:    jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:      pos.auditSeq + 1,
		MaxResetAttempts: maxResets,
	})
	if err != nil {
		return pos, nil, fmt.Errorf("ordered consumer on %s: %w", streams.AuditStream, err)
	}
	return pos, cons, nil
}

// read archives what it delivers after pos, until an error or ctx is done.
func (a *archiver) read(ctx context.Context, it jetstream.MessagesContext, pos position) error {
	// Next blocks in a goroutine of its own, not in the loop below: the
	// ordered consumer notices a consumer lost with its server (no
	// heartbeat for twice its interval) only inside a Next that waits
	// that long, and then recreates it; a Next bounded by the flush
	// interval never would (found by the three-server deploy test).
	msgs, errc := make(chan jetstream.Msg), make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			m, err := it.Next()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-done:
				return
			}
		}
	}()
	b := &batch{}
	read := pos.auditSeq // the last sequence read
	watch := stallWatch{arrived: time.Now()}
	for {
		wait := min(a.o.flushInterval, watchEvery)
		if len(b.recs) > 0 {
			wait = min(time.Until(b.started.Add(a.o.flushInterval)), watchEvery)
		}
		msg, err := a.next(ctx, msgs, errc, wait)
		if err != nil {
			return err
		}
		if msg != nil {
			watch.delivered(time.Now())
			if seq := a.add(b, msg); seq > 0 {
				read = seq
			}
		}
		full := len(b.recs) > 0 && (b.size >= a.o.batchBytes || len(b.recs) >= MaxBatchRecords || time.Since(b.started) >= a.o.flushInterval)
		if msg == nil || full {
			// Idle, or about to store: is E2A_AUDIT still the stream the
			// sequences are of? (The ordered consumer follows a new one
			// from the old sequence, silently.) Idle: does it hold
			// messages the consumer has not delivered for long?
			last, err := a.auditLast(ctx, pos.epoch)
			if err != nil {
				return err
			}
			if msg == nil {
				if idle, stalled := watch.check(time.Now(), last, read); stalled {
					return fmt.Errorf("%w: E2A_AUDIT ends at %d, read up to %d, nothing delivered for %v: starting again from the archive's last batch",
						errNothingDelivered, last, read, idle.Round(time.Millisecond))
				}
			}
		}
		if msg == nil && len(b.recs) == 0 {
			a.progressed() // caught up with E2A_AUDIT
		}
		if full {
			if err := a.store(ctx, b.recs, &pos); err != nil {
				return err
			}
			*b = batch{}
		}
	}
}

// stallWatch tells a session's consumer that stopped delivering (read's
// idle check) from one that is merely idle: it is given up once
// E2A_AUDIT has held messages past those read, with none delivered, for
// stallAfter, counted from the first check that saw them (or the last
// delivery, if later). Not from the last delivery alone: after a quiet
// spell of stallAfter, a check falling between a new message's store and
// its delivery gave the consumer up, and its session's batch was read
// again, with a warning that nothing had come for the whole spell.
type stallWatch struct {
	arrived time.Time // when the last message arrived (or the session began)
	behind  time.Time // when a check first saw E2A_AUDIT hold more since then (zero: none did)
}

// delivered records a message's arrival at now.
func (w *stallWatch) delivered(now time.Time) { w.arrived, w.behind = now, time.Time{} }

// check is the idle check at now, E2A_AUDIT ending at last and the
// session having read up to read: how long E2A_AUDIT has held more with
// nothing delivered, and whether the consumer is given up (stallAfter).
func (w *stallWatch) check(now time.Time, last, read uint64) (time.Duration, bool) {
	if last <= read {
		w.behind = time.Time{}
		return 0, false
	}
	if w.behind.IsZero() {
		w.behind = now
	}
	waited := now.Sub(w.behind)
	return waited, waited >= stallAfter
}

// dropConsumer stops it (nil: none) and deletes cons, the ended session's
// ordered consumer, from its server: otherwise it stays there for its
// inactive threshold (5 min). In the background (Run waits for it at its
// end, a while at most): Stop waits while the client recreates a lost
// consumer. Best effort: a consumer not deleted goes at its threshold.
func (a *archiver) dropConsumer(cons jetstream.Consumer, it jetstream.MessagesContext) {
	a.drops.Add(1)
	go func() {
		defer a.drops.Done()
		if it != nil {
			it.Stop()
		}
		info := cons.CachedInfo()
		if info == nil || a.nc.IsClosed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		if err := a.js.DeleteConsumer(ctx, streams.AuditStream, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			a.log.Info("the ended session's consumer on E2A_AUDIT not deleted: its server drops it after 5 min idle",
				"consumer", info.Name, "err", err)
		}
	}()
}

// awaitDrops waits, at most d, for the consumers' deletions under way.
func (a *archiver) awaitDrops(d time.Duration) {
	done := make(chan struct{})
	go func() {
		a.drops.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// errNewEpoch: E2A_AUDIT was deleted and created again under the session.
var errNewEpoch = errors.New("archive: E2A_AUDIT is a new stream")

// auditLast returns E2A_AUDIT's last sequence, or errNewEpoch when it is
// not the stream created at epoch any more.
func (a *archiver) auditLast(ctx context.Context, epoch time.Time) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	st, err := a.js.Stream(ctx, streams.AuditStream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", streams.AuditStream, err)
	}
	if !st.CachedInfo().Created.Equal(epoch) {
		return 0, errNewEpoch
	}
	return st.CachedInfo().State.LastSeq, nil
}

// next returns the next E2A_AUDIT message, nil when wait passed first.
func (a *archiver) next(ctx context.Context, msgs <-chan jetstream.Msg, errc <-chan error, wait time.Duration) (jetstream.Msg, error) {
	t := time.NewTimer(max(wait, time.Millisecond))
	defer t.Stop()
	select {
	case m := <-msgs:
		return m, nil
	case err := <-errc:
		return nil, err
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// batch is the records read and not stored yet.
type batch struct {
	recs    []Record
	size    int
	started time.Time
}

// add appends msg to b and returns its E2A_AUDIT sequence (0: skipped).
func (a *archiver) add(b *batch, msg jetstream.Msg) uint64 {
	meta, err := msg.Metadata()
	if err != nil {
		a.log.Warn("E2A_AUDIT message without metadata skipped", "err", err)
		return 0
	}
	if len(b.recs) == 0 {
		b.started = time.Now()
	}
	r := Record{Seq: meta.Sequence.Stream, Time: meta.Timestamp, Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data()}
	b.recs = append(b.recs, r)
	b.size += r.size()
	return r.Seq
}

// gaps counts the E2A_AUDIT messages between pos and the records stored
// after it that E2A_AUDIT dropped before they were read: once, by the
// archiver whose batch was stored. Before the first batch of an epoch
// nothing was archived to miss from.
func (a *archiver) gaps(recs []Record, pos position) {
	prev := pos.auditSeq
	for _, r := range recs {
		if prev > 0 && r.Seq > prev+1 {
			a.m.missed.Add(float64(r.Seq - prev - 1))
			a.log.Error("E2A_AUDIT dropped messages before they were archived", "first", prev+1, "last", r.Seq-1)
		} else if prev == 0 && r.Seq > 1 {
			a.log.Info("the archive of this E2A_AUDIT starts at its first message", "seq", r.Seq)
		}
		prev = r.Seq
	}
}

// maxHeaderBytes is room kept under max_payload for a batch's headers.
const maxHeaderBytes = 512

// store stores recs as one batch or, when its compressed form does not fit
// max_payload, as several; one record that fits no batch is skipped
// (counted, logged: E2A_AUDIT keeps it for its retention).
func (a *archiver) store(ctx context.Context, recs []Record, pos *position) error {
	data, err := a.enc.encode(recs)
	if err != nil && !errors.Is(err, ErrBatchTooLarge) {
		return err
	}
	if err != nil || int64(len(data)+maxHeaderBytes) > a.nc.MaxPayload() {
		if len(recs) == 1 {
			// Left out; the next batch goes on after it (not a gap). After
			// a restart before that batch it is skipped, and counted, again.
			a.m.skipped.Inc()
			a.log.Error("E2A_AUDIT message too large to archive: left in E2A_AUDIT only", "seq", recs[0].Seq, "bytes", len(recs[0].Data))
			a.gaps(recs, *pos)
			pos.auditSeq = recs[0].Seq
			return nil
		}
		half := len(recs) / 2
		if err := a.store(ctx, recs[:half], pos); err != nil {
			return err
		}
		return a.store(ctx, recs[half:], pos)
	}
	first, last := recs[0], recs[len(recs)-1]
	msg := nats.NewMsg(subjects.ArchiveBatches)
	msg.Data = data
	msg.Header.Set(subjects.HeaderArchiveFirst, strconv.FormatUint(first.Seq, 10))
	msg.Header.Set(subjects.HeaderArchiveLast, strconv.FormatUint(last.Seq, 10))
	msg.Header.Set(subjects.HeaderArchiveFrom, first.Time.UTC().Format(time.RFC3339Nano))
	msg.Header.Set(subjects.HeaderArchiveUntil, last.Time.UTC().Format(time.RFC3339Nano))
	msg.Header.Set(subjects.HeaderArchiveCount, strconv.Itoa(len(recs)))
	msg.Header.Set(subjects.HeaderArchiveEpoch, pos.epoch.UTC().Format(time.RFC3339Nano))
	ack, err := a.publish(ctx, msg, pos.batchSeq)
	if err != nil {
		return err
	}
	a.gaps(recs, *pos)
	pos.batchSeq, pos.auditSeq = ack.Sequence, last.Seq
	in := 0
	for i := range recs {
		in += recs[i].size()
	}
	a.m.batches.Inc()
	a.m.records.Add(float64(len(recs)))
	a.m.bytesIn.Add(float64(in))
	a.m.bytesOut.Add(float64(len(data)))
	a.m.lastTime.Set(float64(last.Time.UnixNano()) / 1e9)
	a.progressed()
	return nil
}

// publish stores msg if the archive's last batch is still expected,
// retrying an unanswered publish (a second copy is refused as a conflict,
// after which the session reads the archive again and goes on after it).
func (a *archiver) publish(ctx context.Context, msg *nats.Msg, expected uint64) (*jetstream.PubAck, error) {
	var err error
	for attempt := range 3 {
		if attempt > 0 && sleepctx.Sleep(ctx, time.Duration(attempt)*500*time.Millisecond) != nil {
			return nil, ctx.Err()
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var ack *jetstream.PubAck
		ack, err = a.js.PublishMsg(pctx, msg, jetstream.WithExpectLastSequencePerSubject(expected))
		cancel()
		if err == nil {
			return ack, nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return nil, errConflict
		}
	}
	return nil, err
}
