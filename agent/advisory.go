package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// maxDeliveriesAdvisory is the part of the server's
// io.nats.jetstream.advisory.v1.max_deliver event the runtime reads.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// A request is given up after WithMaxDeliver deliveries: the consumer
// delivers it once more (its MaxDeliver is one more), and the worker that
// picks that delivery up writes the final e2a.error max_deliveries without
// running the handler (giveUp). That delivery waits in the consumer until a
// worker pulls it, so a request is closed even when no worker of the pool
// was running when its last delivery expired: a poison request that kills
// the pool's one worker, restarted after a crash-loop back-off. The
// server's max-deliveries advisory, published once and only to who is
// listening then, closed it before; it stays as the backstop of a worker
// dying during the give-up delivery.

// giveUp ends the delivery d, past the pool's WithMaxDeliver deliveries,
// with the final e2a.error max_deliveries (none when its final frame is
// already stored) and acks it; the handler does not run again.
func (w *worker) giveUp(d *delivery) string {
	written, err := w.closeExhausted(maxDeliveriesAdvisory{StreamSeq: d.meta.Sequence.Stream, Deliveries: d.meta.NumDelivered - 1})
	if err != nil {
		d.log.get().Warn("cannot close the request after max deliveries: handing back", "err", err)
		_ = d.m.NakWithDelay(time.Second)
		return OutcomeLost
	}
	_ = d.m.Ack()
	if !written {
		return OutcomeAlreadyFinal
	}
	return OutcomeMaxDeliveries
}

// onMaxDeliveries receives the consumer's max-deliveries advisory: the
// request at stream_seq will not be delivered again. Every worker of the pool
// receives it and tries to write the final e2a.error max_deliveries frame;
// fencing lets exactly one succeed, and never after a real final frame.
//
// Only the server's own advisory is taken (streams.ServerPublished): a
// push consumer's delivery pointed at this subject would end another
// principal's running request.
func (w *worker) onMaxDeliveries(m *nats.Msg) {
	if !streams.ServerPublished(m) {
		w.log.Warn("ignored a max deliveries advisory the server did not send (it has a reply subject)", "reply", m.Reply)
		return
	}
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
		w.log.Warn("unreadable max deliveries advisory", "err", err)
		return
	}
	// Run waits for the close it starts (joinAdvisories); one received
	// while Run returns, its subscription ending, is left to the other
	// workers of the pool and to the give-up delivery.
	w.mu.Lock()
	if w.advisoriesJoined {
		w.mu.Unlock()
		return
	}
	w.advisories.Add(1)
	w.mu.Unlock()
	go func() {
		defer w.advisories.Done()
		written, err := w.closeExhausted(adv)
		if err != nil {
			w.log.Warn("cannot close request after max deliveries", "stream_seq", adv.StreamSeq, "err", err)
		}
		if written {
			w.metrics.handled.WithLabelValues(w.pool, OutcomeMaxDeliveries).Inc()
		}
	}()
}

// joinAdvisories waits for the closes onMaxDeliveries started, bounded
// by closeExhausted's own (ioTimeout and its retries); none starts after
// it.
func (w *worker) joinAdvisories() {
	w.mu.Lock()
	w.advisoriesJoined = true
	w.mu.Unlock()
	w.advisories.Wait()
}

// closeExhausted writes the final e2a.error max_deliveries of the request
// adv names; written is false when its final frame was already stored.
func (w *worker) closeExhausted(adv maxDeliveriesAdvisory) (written bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	filter, err := subjects.RequestFilter(w.pool)
	if err != nil {
		return false, err
	}
	req, err := msgAt(ctx, w.js, w.streams.Requests, filter, adv.StreamSeq)
	if err != nil {
		return false, err
	}
	if req == nil {
		return false, fmt.Errorf("request at stream sequence %d is gone", adv.StreamSeq)
	}
	env, perr := e2a.FromJSON(req.data)
	if perr != nil {
		env = &e2a.Envelope{}
	}
	_, id, err := subjects.ParseRequest(req.subject)
	if err != nil {
		if env.RequestID == "" {
			return false, err
		}
		id = env.RequestID
	}
	env.RequestID = id
	respSubj, err := subjects.Response(id)
	if err != nil {
		return false, err
	}
	f := errorFrame(e2a.ErrCodeMaxDeliveries,
		fmt.Sprintf("the request was delivered %d times without completing", adv.Deliveries), false,
		map[string]any{"deliveries": adv.Deliveries})
	backoff := 10 * time.Millisecond
	for attempt := 0; attempt < 20; attempt++ {
		last, err := lastMsg(ctx, w.js, w.streams.Responses, respSubj)
		if err != nil {
			return false, err
		}
		lastSeq := int64(-1)
		if last != nil {
			h, ferr := last.frame()
			if ferr != nil {
				return false, ferr
			}
			if h.IsFinal {
				w.stopLocal(id, h.Sequence)
				return false, nil
			}
			lastSeq = h.Sequence
		}
		wr := newWriter(w, env, id, respSubj, last, lastSeq)
		written, err := wr.finish(f)
		if err == nil {
			w.stopLocal(id, lastSeq+1)
			if written {
				w.log.Info("request closed after max deliveries", "request_id", id, "deliveries", adv.Deliveries)
			}
			return written, nil
		}
		if !errors.Is(err, ErrFenced) {
			return false, err
		}
		// Someone wrote meanwhile (a zombie, or another worker closing it):
		// read again.
		time.Sleep(backoff)
		backoff = min(2*backoff, 200*time.Millisecond)
	}
	return false, errors.New("gave up after 20 conflicting writes")
}

// stopLocal stops this process's deliveries of request id, whose final frame
// finalSeq is written: they are stale.
func (w *worker) stopLocal(id string, finalSeq int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.byID[id] {
		if r.stop != nil {
			r.stop(&fencedError{lastSeq: finalSeq, lastFinal: true})
		}
	}
}
