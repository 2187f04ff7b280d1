package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// On an R1 E2A_RESPONSES that allows fast batches (the embedded server, a
// single-server deployment), the frames a handler writes with Write go out
// in a JetStream fast batch, without waiting for each other's PubAck, so
// that a burst reaches egress at once: a first delivery's from frame 0 on, a
// redelivery's after its first (published alone, expecting the last stored
// frame).
//
//   - A first delivery's frame 0 expects the frame subject to be empty, as
//     when it is published alone: a frame already there (another writer's)
//     refuses it, and by the gap rule below every frame after it.
//   - Later batched frames cannot expect the frame subject's last sequence
//     (the writer does not know it before the previous PubAck). They expect the
//     last sequence of the request's lease subject (subjects.ResponseLease)
//     instead: 0 for a first delivery, which never writes a lease; a
//     redelivered worker stores a lease message before it reads the stored
//     frames, and expects that. Once a newer delivery has stored its lease,
//     every batched frame of an older one is refused (fenced), wherever it
//     is in flight. Frames published alone keep expecting the previous
//     frame, as always.
//   - The batch is in "gap: fail" mode: the server stores its frames in order
//     and none after one it refused, so a refused or lost frame never leaves
//     a hole. Its PubAck (at its final frame, or at an end-of-batch marker
//     before a frame published alone) confirms it.
//   - A batch that failed, or whose PubAck did not come, is resolved the way
//     a redelivery starts: store a new lease (nothing of ours sent before can
//     land after it), read the last stored frame from the stream leader, and
//     publish again, one at a time, what did not land. So is a batch the
//     server forgot while its handler paused (a batch idle for its
//     max_batch_timeout, 10 s by default, which the worker's own ending of
//     batches idle for batchIdle normally prevents): the frames sent after
//     are refused.
//   - The server keeps at most max_batch_inflight_per_stream batches open on
//     a stream (1,000 by default; a batch stays open while its handler
//     streams). A batch it refuses to open stored nothing, and nothing of it
//     can land later, so its frames go out one at a time without a lease or
//     a read, and the worker opens no batch for batchBusyPause.
//
// On a replicated stream the server refuses a second in-flight expectation
// on the same subject, so batches are off there (R3 deployments write one
// frame at a time, as before).

// batchFlow is how often the server acknowledges a batch's messages
// (every batchFlow messages): the writer frees the frames confirmed.
const batchFlow = 32

// maxBatchFrames bounds the frames a batch holds unconfirmed: at this many
// the writer ends the batch and waits for its PubAck.
const maxBatchFrames = 256

// batchIdle ends a batch that sent nothing for this long: the worker's
// sweep (every half of it) or the next frame sends its end-of-batch marker,
// before the server forgets it (a batch idle for 10 s, its default
// max_batch_timeout) and so that a handler waiting, on a tool say, does not
// hold one of the stream's open batches.
const batchIdle = 5 * time.Second

// Fast batch reply subject operations (nats-server's FastBatchOp*).
const (
	batchOpStart     = 0
	batchOpAppend    = 1
	batchOpCommit    = 2
	batchOpCommitEOB = 3
)

// errCodeBatchPublishDisabled is nats-server's JSBatchPublishDisabledErr.
const errCodeBatchPublishDisabled jetstream.ErrorCode = 10205

// errCodeBatchTooManyInflight is nats-server's
// JSBatchPublishTooManyInflightErr: the stream already has its limit of
// open fast batches (max_batch_inflight_per_stream, 1,000 by default) and
// refused to open another.
const errCodeBatchTooManyInflight jetstream.ErrorCode = 10211

// batchBusyPause is how long a worker opens no batch after the server
// refused one for having too many open: its frames go out one at a time
// meanwhile.
const batchBusyPause = 2 * time.Second

// batchRouter receives the replies of one worker's fast batches (flow
// acknowledgements, errors, PubAcks) on one subscription and hands each to
// its batch.
type batchRouter struct {
	prefix string // <inbox>: replies are <prefix>.<batch id>.<flow>.fail.<seq>.<op>.$FI
	sub    *nats.Subscription
	mu     sync.Mutex
	open   map[string]*fastBatch
	// off is set when the stream refuses fast batches (a deployment whose
	// E2A_RESPONSES predates allow_batched): frames go out one at a time.
	off atomic.Bool
	// busyUntil (Unix nanoseconds): until then the worker opens no batch
	// (the server refused one for having too many open).
	busyUntil atomic.Int64
	busyPause time.Duration // batchBusyPause, but in tests
	idle      time.Duration // batchIdle, but in tests
	done      chan struct{} // closed by close: the sweep stops
}

// pause makes the worker open no batch for a while.
func (r *batchRouter) pause() { r.busyUntil.Store(time.Now().Add(r.busyPause).UnixNano()) }

// paused reports whether the worker opens no batch now.
func (r *batchRouter) paused() bool {
	u := r.busyUntil.Load()
	return u != 0 && time.Now().UnixNano() < u
}

func newBatchRouter(nc *nats.Conn, busyPause, idle time.Duration) (*batchRouter, error) {
	r := &batchRouter{prefix: nc.NewInbox(), open: map[string]*fastBatch{}, busyPause: busyPause, idle: idle, done: make(chan struct{})}
	sub, err := nc.Subscribe(r.prefix+".>", r.onReply)
	if err != nil {
		return nil, err
	}
	r.sub = sub
	go r.sweep()
	return r, nil
}

func (r *batchRouter) close() {
	if r == nil {
		return
	}
	close(r.done)
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
	}
}

// sweep ends, every half of r.idle, the open batches that sent nothing for
// r.idle (endIdleBatch), until close.
func (r *batchRouter) sweep() {
	t := time.NewTicker(r.idle / 2)
	defer t.Stop()
	var open []*fastBatch
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		r.mu.Lock()
		for _, b := range r.open {
			open = append(open, b)
		}
		r.mu.Unlock()
		for i, b := range open {
			if b.wr.idleBatch(b, r.idle) {
				go b.wr.endIdleBatch(b, r.idle)
			}
			open[i] = nil
		}
		open = open[:0]
	}
}

func (r *batchRouter) add(b *fastBatch) {
	r.mu.Lock()
	r.open[b.id] = b
	r.mu.Unlock()
}

func (r *batchRouter) remove(b *fastBatch) {
	r.mu.Lock()
	if r.open[b.id] == b {
		delete(r.open, b.id)
	}
	r.mu.Unlock()
}

// replySubject is the reply subject of message seq of batch id.
func (r *batchRouter) replySubject(id string, seq, op int) string {
	return r.prefix + "." + id + "." + strconv.Itoa(batchFlow) + ".fail." + strconv.Itoa(seq) + "." + strconv.Itoa(op) + ".$FI"
}

// batchReply is any reply to a fast batch message: a flow
// acknowledgement, a gap, an error ({"type":...}), or the batch's PubAck.
type batchReply struct {
	Type   string              `json:"type"`
	Seq    uint64              `json:"seq"`
	Stream string              `json:"stream"`
	Count  int                 `json:"count"`
	Error  *jetstream.APIError `json:"error"`
}

// decode reads a reply: the flow acknowledgements and PubAcks, which come
// several times per batch, without reflection; an error reply through
// encoding/json.
func (rep *batchReply) decode(data []byte) error {
	ok := jsonstr.Members(data, func(key, val []byte) bool {
		switch string(key) {
		case "type", "stream":
			s, ok := jsonstr.String(val)
			if string(key) == "type" {
				rep.Type = s
			} else {
				rep.Stream = s
			}
			return ok
		case "seq":
			n, err := strconv.ParseUint(string(val), 10, 64)
			rep.Seq = n
			return err == nil
		case "count":
			n, err := strconv.Atoi(string(val))
			rep.Count = n
			return err == nil
		case "error":
			return false // the full decode below
		}
		// encoding/json matches keys without regard to case: leave such
		// a key to it.
		for _, k := range [...]string{"type", "stream", "seq", "count", "error"} {
			if strings.EqualFold(string(key), k) {
				return false
			}
		}
		return true
	})
	if ok {
		return nil
	}
	*rep = batchReply{}
	return json.Unmarshal(data, rep)
}

func (r *batchRouter) onReply(m *nats.Msg) {
	rest, ok := strings.CutPrefix(m.Subject, r.prefix+".")
	if !ok {
		return
	}
	id, _, _ := strings.Cut(rest, ".")
	r.mu.Lock()
	b := r.open[id]
	r.mu.Unlock()
	if b == nil {
		return
	}
	var rep batchReply
	if err := rep.decode(m.Data); err != nil {
		b.wr.batchEvent(b, func() { b.fail(fmt.Errorf("agent: batch reply does not decode: %w", err)) })
		return
	}
	b.wr.batchEvent(b, func() { b.reply(&rep) })
}

// fastBatch is a writer's open batch. Its fields are guarded by the
// writer's mu.
type fastBatch struct {
	wr    *writer
	id    string
	sent  int       // messages sent (batch sequences 1..sent)
	first int64     // frame sequence of batch message 1
	data  [][]byte  // frames of batch messages confirmed+1..sent
	base  int       // batch sequence of data[0] minus one (confirmed)
	last  time.Time // when the last message went out
	err   error     // the first failure the server reported
	// fenceSeen: the writer was told of err being a fence.
	fenceSeen bool
	ack       *batchReply
	done      chan struct{} // closed when the PubAck (or a failure) arrives
}

// reply records a reply. Lock held.
func (b *fastBatch) reply(rep *batchReply) {
	switch rep.Type {
	case "ack":
		if n := int(rep.Seq) - b.base; n > 0 && n <= len(b.data) {
			clear(b.data[:n])
			b.data, b.base = b.data[n:], int(rep.Seq)
		}
	case "gap":
		b.fail(fmt.Errorf("agent: batch %s: gap before message %d", b.id, rep.Seq))
	case "err":
		if rep.Error != nil {
			b.fail(fmt.Errorf("nats: %w", rep.Error))
		} else {
			b.fail(fmt.Errorf("agent: batch %s: message %d refused", b.id, rep.Seq))
		}
	default: // the PubAck
		if rep.Error != nil {
			b.fail(fmt.Errorf("nats: %w", rep.Error))
		}
		if b.ack == nil {
			b.ack = rep
			close(b.done)
		}
	}
}

// fail records the batch's first failure and wakes its waiter. Lock held.
func (b *fastBatch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
	if b.ack == nil {
		b.ack = &batchReply{}
		close(b.done)
	}
}

// batchEvent runs f on batch b under the writer's lock. When the server
// refused a frame of the batch as fenced, the writer fails at once (its
// handler's context is cancelled with ErrFenced), as it would have at the
// frame's own write.
func (wr *writer) batchEvent(b *fastBatch, f func()) {
	wr.mu.Lock()
	f()
	fence := b.err != nil && isLeaseRefusal(b.err) && !b.fenceSeen
	if fence {
		b.fenceSeen = true
	}
	wr.mu.Unlock()
	if fence {
		go wr.failFenced()
	}
}

// failFenced makes the writer fail with the fence the server reported.
func (wr *writer) failFenced() {
	err := wr.fencedNow()
	wr.mu.Lock()
	notify := wr.fatal == nil
	if notify {
		wr.fatal = err
		wr.pending = nil
	}
	wr.cond.Broadcast()
	wr.mu.Unlock()
	if notify && wr.onFatal != nil {
		wr.onFatal(err)
	}
}

// batchable reports whether f goes out in a fast batch: a Write (after the
// delivery's first frame, or as a first delivery's frame 0), or the final
// frame while a batch is open. Lock held.
func (wr *writer) batchable(f frame) bool {
	if wr.w.batches == nil || wr.w.batches.off.Load() {
		return false
	}
	if wr.fb != nil {
		return f.raw || f.final
	}
	if !f.raw || f.final || wr.w.batches.paused() {
		return false
	}
	// Frame 0 of a first delivery (nothing stored, no lease) opens a batch;
	// a redelivery's first frame goes alone.
	return wr.published > 0 || wr.lastStreamSeq == 0 && wr.resumeAfter < 0 && wr.lease == 0
}

// sendBatched sends frame seq as the next message of the writer's batch
// (opening one), and for a final frame waits for the batch's PubAck. It
// returns the final frame's stream sequence (0 for the others, whose
// failure a later write reports).
func (wr *writer) sendBatched(seq int64, f frame) (uint64, error) {
	if err := wr.batchCheck(); err != nil {
		return 0, err
	}
	data, err := wr.encode(seq, f)
	if err != nil {
		return 0, err
	}
	m := wr.message(seq, data)
	if seq == 0 {
		wr.expect(m, 0) // an empty frame subject
	} else {
		wr.expectLease(m)
	}
	if limit := wr.maxPayload(); limit > 0 {
		if size := streams.MessageSize(m); size > limit {
			return 0, &frameError{&frameTooLargeError{kind: f.kind, size: size, limit: limit}}
		}
	}
	wr.mu.Lock()
	b := wr.fb
	if b == nil {
		b = &fastBatch{wr: wr, id: nats.NewInbox()[len(nats.InboxPrefix):], first: seq, done: make(chan struct{})}
		wr.fb = b
		wr.w.batches.add(b)
	}
	b.sent++
	b.data = append(b.data, data)
	b.last = time.Now()
	n := b.sent
	wr.mu.Unlock()
	op := batchOpAppend
	switch {
	case f.final:
		op = batchOpCommit
	case n == 1:
		op = batchOpStart
	}
	m.Reply = wr.w.batches.replySubject(b.id, n, op)
	if wr.spanCtx != nil {
		endFrameSpan(wr.frameSpan(m.Header, seq), 0, nil)
	}
	err = wr.w.js.Conn().PublishMsg(m)
	m.Reply = ""
	if err != nil {
		wr.mu.Lock()
		b.fail(err)
		wr.mu.Unlock()
	}
	wr.w.metrics.frames.WithLabelValues(wr.w.pool).Inc()
	if !f.final {
		return 0, nil
	}
	return wr.settleBatch(b)
}

// batchCheck ends the open batch, waiting for its PubAck, when it failed,
// holds too many unconfirmed frames, or has been idle too long.
func (wr *writer) batchCheck() error {
	wr.mu.Lock()
	b := wr.fb
	end := b != nil && (b.err != nil || len(b.data) >= maxBatchFrames || time.Since(b.last) > wr.w.batches.idle)
	wr.mu.Unlock()
	if !end {
		return nil
	}
	return wr.endBatch()
}

// idleBatch reports whether b is the writer's open batch, sent nothing for
// idle and has no write in flight.
func (wr *writer) idleBatch(b *fastBatch, idle time.Duration) bool {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return wr.fb == b && !wr.inflight && wr.fatal == nil && time.Since(b.last) >= idle
}

// endIdleBatch ends batch b with its end-of-batch marker when it is still
// idle (idleBatch), taking the writer's publishing turn as a write does: a
// failure is the writer's, as a failed write's would be. The handler's next
// frame goes alone or opens a new batch.
func (wr *writer) endIdleBatch(b *fastBatch, idle time.Duration) {
	wr.mu.Lock()
	if wr.fb != b || wr.inflight || wr.fatal != nil || time.Since(b.last) < idle {
		wr.mu.Unlock()
		return
	}
	wr.inflight = true
	wr.mu.Unlock()
	err := wr.endBatch()
	wr.mu.Lock()
	wr.endTurnLocked(err)
}

// endBatch closes the open batch, if any, with an end-of-batch marker (not
// stored) and waits for its PubAck; on a failure it writes again what did
// not land. Frames written after it go out alone or in a new batch.
func (wr *writer) endBatch() error {
	wr.mu.Lock()
	b := wr.fb
	wr.mu.Unlock()
	if b == nil {
		return nil
	}
	m := nats.NewMsg(wr.subject)
	m.Reply = wr.w.batches.replySubject(b.id, b.sent+1, batchOpCommitEOB)
	if err := wr.w.js.Conn().PublishMsg(m); err != nil {
		wr.mu.Lock()
		b.fail(err)
		wr.mu.Unlock()
	}
	_, err := wr.settleBatch(b)
	return err
}

// settleBatch waits for batch b's PubAck and closes it. It returns the
// stream sequence of the batch's last frame, after writing again, when the
// batch failed or its PubAck did not come within an attempt's time, the
// frames that did not land.
func (wr *writer) settleBatch(b *fastBatch) (uint64, error) {
	wait := min(wr.w.cfg.publishTimeout, maxAttempt)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-b.done:
	case <-timer.C:
		wr.mu.Lock()
		b.fail(fmt.Errorf("agent: batch of %q not acknowledged within %v", wr.requestID, wait))
		wr.mu.Unlock()
	}
	wr.mu.Lock()
	wr.fb = nil
	berr, ack := b.err, b.ack
	wr.mu.Unlock()
	wr.w.batches.remove(b)
	if berr == nil && ack != nil && ack.Seq > 0 && ack.Count == b.sent {
		wr.mu.Lock()
		wr.lastStreamSeq = ack.Seq
		wr.mu.Unlock()
		return ack.Seq, nil
	}
	if berr == nil {
		berr = fmt.Errorf("agent: batch of %q acknowledged %d of %d frames", wr.requestID, ack.Count, b.sent)
	}
	if isLeaseRefusal(berr) {
		return 0, wr.fencedNow()
	}
	if apiErrCode(berr) == errCodeBatchTooManyInflight {
		// The server refused to open the batch: nothing of it was stored,
		// nor can be (its later messages name a batch the server does not
		// know), so no lease or read is needed: its frames go out one at a
		// time after the last one confirmed, and this worker opens no batch
		// for a while.
		wr.w.batches.pause()
		wr.mu.Lock()
		frames, prev := b.data, wr.lastStreamSeq
		wr.mu.Unlock()
		return wr.publishEach(b.first, prev, frames)
	}
	switch apiErrCode(berr) {
	case errCodeBatchPublishDisabled, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
		// The stream stopped taking batches, or became replicated (it
		// refuses a second expectation in flight on the lease subject):
		// this worker's frames go out one at a time from now on.
		wr.w.batches.off.Store(true)
	}
	return wr.rewrite(b, berr)
}

// isLeaseRefusal reports a batched frame refused because the lease it
// expects is no longer the last one: a newer delivery owns the request.
func isLeaseRefusal(err error) bool {
	return apiErrCode(err) == jetstream.JSErrCodeStreamWrongLastSequence
}

func apiErrCode(err error) jetstream.ErrorCode {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode
	}
	return 0
}

// rewrite resolves a failed batch: it stores a new lease (from then on
// nothing of ours sent before can land), reads the last stored frame from
// the stream leader, and publishes one at a time, each expecting the one
// before, the batch's frames after it. A last frame that is none of ours
// means another worker wrote it: fenced.
func (wr *writer) rewrite(b *fastBatch, cause error) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wr.w.cfg.publishTimeout)
	defer cancel()
	if err := wr.renewLease(ctx); err != nil {
		return 0, fmt.Errorf("agent: frames of %q: %w (after %v)", wr.requestID, err, cause)
	}
	last, err := leaderLastMsg(ctx, wr.w.js, wr.w.streams.Responses, wr.subject)
	if err != nil {
		return 0, fmt.Errorf("agent: frames of %q: %w (after %v)", wr.requestID, err, cause)
	}
	wr.mu.Lock()
	frames, base, prev := b.data, b.base, wr.lastStreamSeq
	wr.mu.Unlock()
	// frames[i] is the frame of batch message base+1+i, frame sequence
	// b.first+base+i; the messages up to base are confirmed stored.
	from := 0
	switch {
	case last == nil && prev == 0 && base == 0:
		// Nothing of a batch that began with frame 0 landed.
	case last == nil:
		return 0, &fencedError{lastSeq: -1} // the subject lost its frames
	case last.seq == prev && base == 0:
		// Nothing of the batch landed.
	default:
		h, ferr := last.frame()
		if ferr != nil {
			return 0, &fencedError{lastSeq: -1}
		}
		i := int(h.Sequence - b.first - int64(base))
		switch {
		case i >= 0 && i < len(frames) && bytes.Equal(last.data, frames[i]):
			from = i + 1
		case i == -1 && (base > 0 || last.seq == prev):
			// The last confirmed frame.
		default:
			return 0, wr.fenced(last)
		}
	}
	var prevSeq uint64 // 0: the subject holds no frame
	if last != nil {
		prevSeq = last.seq
	}
	wr.mu.Lock()
	wr.lastStreamSeq = prevSeq
	wr.mu.Unlock()
	return wr.publishEach(b.first+int64(base+from), prevSeq, frames[from:])
}

// publishEach publishes frames (frame sequences first, first+1, …) one at a
// time, the first expecting stream sequence prev, each later one the
// frame before it, and returns the last one's stream sequence (prev when
// frames is empty).
func (wr *writer) publishEach(first int64, prev uint64, frames [][]byte) (uint64, error) {
	for i, data := range frames {
		s, err := wr.publishData(first+int64(i), prev, data)
		if err != nil {
			return 0, err
		}
		prev = s
		wr.mu.Lock()
		wr.lastStreamSeq = s
		wr.mu.Unlock()
	}
	return prev, nil
}

// renewLease stores a new lease message for the request and fences the
// writer's next batched frames on it.
func (wr *writer) renewLease(ctx context.Context) error {
	seq, err := storeLease(ctx, wr.w.js.Conn(), wr.leaseSubj, wr.requestID, wr.w.cfg.workerID)
	if err != nil {
		return err
	}
	wr.mu.Lock()
	wr.lease = seq
	wr.mu.Unlock()
	return nil
}

// storeLease stores a lease message on subject and returns its stream
// sequence, retrying while the outcome is unknown (a later lease only
// fences more).
func storeLease(ctx context.Context, nc *nats.Conn, subject, requestID, workerID string) (uint64, error) {
	m := nats.NewMsg(subject)
	if headerSafe(requestID) {
		m.Header.Set(subjects.HeaderRequestID, requestID)
	}
	m.Data = fmt.Appendf(nil, `{"worker":%q}`, workerID)
	ack, err := publishAcked(ctx, nc, m)
	if err != nil {
		return 0, fmt.Errorf("lease %s: %w", subject, err)
	}
	return ack.Seq, nil
}

// fencedNow reads the last stored frame to tell who fenced the writer.
func (wr *writer) fencedNow() error {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	last, err := leaderLastMsg(ctx, wr.w.js, wr.w.streams.Responses, wr.subject)
	if err != nil || last == nil {
		return &fencedError{lastSeq: -1}
	}
	return wr.fenced(last)
}

// expectLease sets the message's fence on the lease: the lease subject's
// last sequence must be the writer's lease.
func (wr *writer) expectLease(m *nats.Msg) {
	wr.mu.Lock()
	lease := wr.lease
	wr.mu.Unlock()
	if wr.hdr[1] == "" || wr.hdrExpected != lease {
		wr.hdr[1], wr.hdrExpected = strconv.FormatUint(lease, 10), lease
	}
	m.Header[jetstream.ExpectedLastSubjSeqHeader] = wr.hdr[1:2:2]
	m.Header[jetstream.ExpectedLastSubjSeqSubjHeader] = wr.leaseHdr[:]
}
