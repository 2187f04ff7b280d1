package agent

import (
	"fmt"

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

// queuedFrame is an encoded frame waiting in the burst queue.
type queuedFrame struct {
	data         []byte
	final        bool
	status, code string
}

// enqueue encodes f as the frame after everything queued or in flight and
// queues it, starting the drain when nothing is in flight. It returns the
// frame's sequence, or the writer's failure, or f's own error (a frameError:
// invalid, or too large for one message) without queueing anything.
func (wr *writer) enqueue(f frame, runtime bool) (int64, error) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	for {
		if err := wr.writable(runtime); err != nil {
			return 0, err
		}
		// Pending text goes first; a text frame in flight (published by
		// schedule) must be stored before later sequences are fixed, since
		// a refusal of its own (too large) gives its sequence to the next.
		if wr.pending == nil && !(wr.inflight && !wr.bursting) {
			break
		}
		wr.flushNow = true
		wr.schedule()
		wr.cond.Wait()
	}
	seq := wr.nextSeq + int64(wr.sending+len(wr.queue))
	data, err := wr.encode(seq, f)
	if err != nil {
		return 0, err
	}
	limit := wr.maxPayload()
	if limit > 0 {
		if size := int64(wr.headerSize() + len(data)); size > limit {
			return 0, &frameError{&frameTooLargeError{kind: f.kind, size: size, limit: limit}}
		}
	}
	// Room in the queued burst: wait while it is full (the drain takes it
	// whole; the sequence fixed above stays this frame's).
	for len(wr.queue) > 0 && !wr.fits(len(data), limit) {
		wr.cond.Wait()
		if err := wr.writable(runtime); err != nil {
			return 0, err
		}
	}
	q := queuedFrame{data: data, final: f.final, status: f.status}
	if b, ok := f.body.(e2a.ErrorBody); ok {
		q.code = b.Code
	}
	wr.queue = append(wr.queue, q)
	wr.queueBytes += len(data)
	if !wr.inflight {
		wr.inflight = true
		wr.startDrainLocked()
	}
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

// fits reports whether a frame of n bytes joins the queued burst within
// limit (0: unknown) and maxBurstFrames. Lock held.
func (wr *writer) fits(n int, limit int64) bool {
	if len(wr.queue) >= maxBurstFrames {
		return false
	}
	return limit <= 0 || int64(wr.queueBytes+len(wr.queue)+n+wr.headerSize()) <= limit
}

// stored waits until frame seq is stored, or the writer fails.
func (wr *writer) stored(seq int64) error {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	for wr.nextSeq <= seq && wr.fatal == nil {
		wr.cond.Wait()
	}
	if wr.nextSeq > seq {
		return nil
	}
	return wr.fatal
}

// startDrainLocked starts publishing the queue, inflight being set. Lock
// held.
func (wr *writer) startDrainLocked() {
	wr.inflight, wr.bursting = true, true
	go wr.drain()
}

// dropQueueLocked forgets the frames not yet sent. Lock held.
func (wr *writer) dropQueueLocked() {
	clear(wr.queue)
	wr.queue, wr.queueBytes = wr.queue[:0], 0
}

// drain publishes the queue, a burst at a time, each expecting the message
// before it, until it is empty or the writer fails; then it ends the
// publishing turn.
func (wr *writer) drain() {
	wr.mu.Lock()
	for len(wr.queue) > 0 && wr.fatal == nil {
		first, expected := wr.nextSeq, wr.lastStreamSeq
		wr.sent, wr.queue = append(wr.sent[:0], wr.queue...), wr.queue[:0]
		wr.sending, wr.queueBytes = len(wr.sent), 0
		wr.cond.Broadcast() // room in the queue
		wr.mu.Unlock()
		if wr.w.cfg.beforeBurst != nil {
			wr.w.cfg.beforeBurst(wr.requestID, first, len(wr.sent))
		}
		streamSeq, err := wr.publishBurst(first, expected, wr.sent)
		wr.mu.Lock()
		wr.sending = 0
		if err != nil {
			wr.bursting = false
			clear(wr.sent)
			wr.endTurnLocked(err)
			return
		}
		n := len(wr.sent)
		wr.nextSeq += int64(n)
		wr.lastStreamSeq = streamSeq
		wr.published += n
		if last := wr.sent[n-1]; last.final {
			wr.final, wr.finalStatus, wr.finalCode = true, last.status, last.code
		}
		clear(wr.sent)
		wr.cond.Broadcast()
	}
	wr.bursting = false
	wr.endTurnLocked(nil)
}

// publishBurst publishes frames (sequences first, first+1, …) as one message
// expecting stream sequence expected: the frame itself when there is one,
// else a burst.
func (wr *writer) publishBurst(first int64, expected uint64, frames []queuedFrame) (uint64, error) {
	if len(frames) == 1 {
		return wr.publishData(first, 1, expected, frames[0].data)
	}
	buf := wr.burstBuf[:0]
	for _, q := range frames {
		buf = e2a.AppendBurst(buf, q.data)
	}
	streamSeq, err := wr.publishData(first, len(frames), expected, buf)
	if cap(buf) <= maxFrameBuf {
		wr.burstBuf = buf[:0]
	} else {
		wr.burstBuf = nil
	}
	if err != nil {
		return 0, fmt.Errorf("burst of %d frames: %w", len(frames), err)
	}
	return streamSeq, nil
}
