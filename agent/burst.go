package agent

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// Bursts. A writer has one message in flight at a time, fenced on the
// previous one's stream sequence. The frames written while it is in flight
// queue (encoded, their sequences fixed) and, once its PubAck comes, go out
// together as the next message: a burst of frames (e2a.SplitBurst), stored,
// republished and audited as one message, fenced as one frame is. So a
// handler that writes faster than the stream acknowledges costs the broker
// one message per acknowledgement, not one per frame, on one replica as on
// three, and a zombie writer's burst is refused whole, like its frame.
//
// A non-final Write returns once its frame is queued; the final frame, and
// the runtime's frames, wait until they are stored. A burst that cannot be
// stored (fenced, the stream gone) fails the writer: the handler's context
// is cancelled and its next write reports the error. Bursts are bounded by
// the server's max_payload and by maxBurstFrames; a write that would
// overflow the queued burst waits until the burst is taken.

// maxBurstFrames bounds the frames of one burst.
const maxBurstFrames = 256

// burstBufs holds the writers' queue and burst buffers between requests
// (at most maxFrameBuf each), so that a request's frames are encoded into a
// buffer that has served before.
var burstBufs = sync.Pool{New: func() any { return new([]byte) }}

// getBurstBuf returns an empty buffer from burstBufs.
func getBurstBuf() []byte { return (*burstBufs.Get().(*[]byte))[:0] }

// putBurstBuf returns b to burstBufs unless it grew past maxFrameBuf.
func putBurstBuf(b []byte) {
	if b != nil && cap(b) <= maxFrameBuf {
		b = b[:0]
		burstBufs.Put(&b)
	}
}

// enqueue encodes f as the frame after everything queued or in flight,
// appended to the queued burst, and starts the drain when nothing is in
// flight. It returns the frame's sequence, or the writer's failure, or f's
// own error (a frameError: invalid, or too large for one message) without
// queueing anything.
func (wr *writer) enqueue(f frame, runtime bool) (int64, error) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	// Pending text goes first; a text frame in flight (published by
	// schedule) must be stored before later sequences are fixed, since a
	// refusal of its own (too large) gives its sequence to the next. Once
	// nothing is in flight the pending text is queued here, in f's burst,
	// rather than published alone before it (one message and one round
	// trip fewer: a model's last deltas and its final frame are stored
	// together); schedule leaves it to this loop while it waits.
	wr.enqueuers++
	for waited := false; ; waited = true {
		if err := wr.writable(runtime); err != nil {
			wr.enqueuers--
			wr.schedule()
			return 0, err
		}
		if wr.pending != nil && !wr.inflight {
			wr.queuePendingLocked(runtime)
			continue
		}
		if wr.pending == nil && !(wr.inflight && !wr.bursting) {
			break
		}
		wr.flushNow = true
		wr.schedule()
		if hook := wr.w.cfg.enqueueWait; hook != nil && !waited {
			hook(wr.requestID)
		}
		wr.cond.Wait()
	}
	wr.enqueuers--
	seq, err := wr.appendQueuedLocked(f, runtime)
	if err == nil {
		wr.queueFinal, wr.queueStatus, wr.queueCode = f.final, f.status, ""
		if b, ok := f.body.(e2a.ErrorBody); ok {
			wr.queueCode = b.Code
		}
	}
	if wr.queued > 0 && !wr.inflight {
		wr.startDrainLocked() // f, or the pending text queued before f was refused
	}
	return seq, err
}

// queuePendingLocked moves the pending text into the burst queue, as the
// frame after those queued (nothing is in flight). A frame refused as too
// large is dropped as schedule's publish drops it: its Chunk has returned,
// so the next handler write reports it. Lock held.
func (wr *writer) queuePendingLocked(runtime bool) {
	p := wr.pending
	wr.pending, wr.flushNow = nil, false
	if wr.timer != nil {
		wr.timer.Stop()
		wr.timer = nil
	}
	f := frame{kind: e2a.KindChunk, status: e2a.StatusInProgress, body: e2a.ChunkBody{DeltaKind: p.kind, Delta: p.b.String()}}
	_, err := wr.appendQueuedLocked(f, runtime)
	switch {
	case err == nil:
		wr.queueFinal = false
	case errors.Is(err, ErrFrameTooLarge):
		if wr.tooLarge == nil {
			wr.tooLarge = err
		}
	case wr.fatal == nil:
		wr.fatal = err
	}
	wr.cond.Broadcast() // the pending text is taken
}

// appendQueuedLocked encodes f as the frame after everything queued or in
// flight and appends it to the queued burst, waiting while the burst is
// full. It returns the frame's sequence, or the writer's failure, or f's
// own error (a frameError) without queueing anything. Lock held.
func (wr *writer) appendQueuedLocked(f frame, runtime bool) (int64, error) {
	seq := wr.nextSeq + int64(wr.sending+wr.queued)
	if wr.queueBuf == nil {
		wr.queueBuf = getBurstBuf()
	}
	start := len(wr.queueBuf)
	if start > 0 {
		wr.queueBuf = append(wr.queueBuf, '\n')
	}
	buf, err := wr.appendFrame(wr.queueBuf, seq, f)
	if err != nil {
		wr.queueBuf = wr.queueBuf[:start]
		return 0, err
	}
	wr.queueBuf = buf
	size := len(buf) - start
	if start > 0 {
		size--
	}
	limit := wr.maxPayload()
	if limit > 0 {
		if n := int64(wr.headerSize() + size); n > limit {
			wr.queueBuf = wr.queueBuf[:start]
			return 0, wr.tooLargeError(f.kind, n, limit)
		}
	}
	if start > 0 && !wr.fits(len(wr.queueBuf), limit) {
		// The queued burst is full: take the frame out, wait until the
		// drain takes the burst (the sequence fixed above stays this
		// frame's), and queue it then.
		data := slices.Clone(wr.queueBuf[len(wr.queueBuf)-size:])
		wr.queueBuf = wr.queueBuf[:start]
		if !wr.inflight {
			wr.startDrainLocked() // pending text queued just before
		}
		for wr.queued > 0 {
			wr.cond.Wait()
		}
		if err := wr.writable(runtime); err != nil {
			return 0, err
		}
		wr.queueBuf = append(wr.queueBuf[:0], data...)
	}
	wr.queued++
	return seq, nil
}

// headerSize is headerBound, computed once per writer (its headers'
// lengths depend only on the request). Lock held.
func (wr *writer) headerSize() int {
	if wr.hdrSize == 0 {
		wr.hdrSize = wr.headerBound()
	}
	return wr.hdrSize
}

// fits reports whether a burst payload of n bytes holding the queued
// frames and one more stays within limit (0: unknown) and maxBurstFrames.
// Lock held.
func (wr *writer) fits(n int, limit int64) bool {
	if wr.queued+1 > maxBurstFrames {
		return false
	}
	return limit <= 0 || int64(n+wr.headerSize()) <= limit
}

// stored waits until frame seq (queued) is stored, the writer fails, or
// the frame is dropped unsent (the request handed back: close): then it
// returns the error the writer was closed with.
func (wr *writer) stored(seq int64) error {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	for wr.nextSeq <= seq && wr.fatal == nil {
		if seq >= wr.nextSeq+int64(wr.sending+wr.queued) {
			if wr.closedErr != nil {
				return wr.closedErr
			}
			return ErrWriterClosed
		}
		wr.cond.Wait()
	}
	if wr.nextSeq > seq {
		return nil
	}
	return wr.fatal
}

// startDrainLocked starts publishing the queue, setting inflight. Lock
// held.
func (wr *writer) startDrainLocked() {
	wr.inflight, wr.bursting = true, true
	go wr.drain()
}

// dropQueueLocked forgets the frames not yet sent, and wakes whoever waits
// for one of them. Lock held.
func (wr *writer) dropQueueLocked() {
	wr.queued, wr.queueFinal = 0, false
	if wr.queueBuf != nil {
		wr.queueBuf = wr.queueBuf[:0]
	}
	wr.cond.Broadcast()
}

// drain publishes the queue, a burst at a time, each expecting the message
// before it, until it is empty or the writer fails; then it ends the
// publishing turn. Once the final frame is stored the buffers go back to
// burstBufs.
func (wr *writer) drain() {
	wr.mu.Lock()
	for wr.queued > 0 && wr.fatal == nil {
		first, expected, n := wr.nextSeq, wr.lastStreamSeq, wr.queued
		final, status, code := wr.queueFinal, wr.queueStatus, wr.queueCode
		// The queue's buffer is the burst's payload; the next frames go
		// into the other one.
		if wr.sentBuf == nil {
			wr.sentBuf = getBurstBuf()
		}
		data := wr.queueBuf
		wr.queueBuf, wr.sentBuf = wr.sentBuf[:0], data
		wr.sending, wr.queued, wr.queueFinal = n, 0, false
		wr.cond.Broadcast() // room in the queue
		wr.mu.Unlock()
		if wr.w.cfg.beforeBurst != nil {
			wr.w.cfg.beforeBurst(wr.requestID, first, n)
		}
		streamSeq, err := wr.publishData(first, n, expected, data)
		wr.mu.Lock()
		wr.sending = 0
		if err != nil {
			wr.bursting = false
			if n > 1 {
				err = fmt.Errorf("burst of %d frames: %w", n, err)
			}
			wr.endTurnLocked(err)
			return
		}
		wr.nextSeq += int64(n)
		wr.lastStreamSeq = streamSeq
		wr.published += n
		if final {
			wr.final, wr.finalStatus, wr.finalCode = true, status, code
			putBurstBuf(wr.queueBuf)
			putBurstBuf(wr.sentBuf)
			wr.queueBuf, wr.sentBuf = nil, nil
		}
		wr.cond.Broadcast()
	}
	wr.bursting = false
	wr.endTurnLocked(nil)
}
