package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
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

// onMaxDeliveries receives the consumer's max-deliveries advisory: the
// request at stream_seq will not be delivered again. Every worker of the pool
// receives it and tries to write the final e2a.error max_deliveries frame;
// fencing lets exactly one succeed, and never after a real final frame.
func (w *worker) onMaxDeliveries(m *nats.Msg) {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
		w.log.Warn("unreadable max deliveries advisory", "err", err)
		return
	}
	go func() {
		if err := w.closeExhausted(adv); err != nil {
			w.log.Warn("cannot close request after max deliveries", "stream_seq", adv.StreamSeq, "err", err)
		}
	}()
}

func (w *worker) closeExhausted(adv maxDeliveriesAdvisory) error {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	filter, err := subjects.RequestFilter(w.pool)
	if err != nil {
		return err
	}
	req, err := msgAt(ctx, w.js, w.streams.Requests, filter, adv.StreamSeq)
	if err != nil {
		return err
	}
	if req == nil {
		return fmt.Errorf("request at stream sequence %d is gone", adv.StreamSeq)
	}
	env, perr := e2a.FromJSON(req.data)
	if perr != nil {
		env = &e2a.Envelope{}
	}
	_, id, err := subjects.ParseRequest(req.subject)
	if err != nil {
		if env.RequestID == "" {
			return err
		}
		id = env.RequestID
	}
	env.RequestID = id
	respSubj, err := subjects.Response(id)
	if err != nil {
		return err
	}
	f := errorFrame(e2a.ErrCodeMaxDeliveries,
		fmt.Sprintf("the request was delivered %d times without completing", adv.Deliveries), false,
		map[string]any{"deliveries": adv.Deliveries})
	backoff := 10 * time.Millisecond
	for attempt := 0; attempt < 20; attempt++ {
		last, err := lastMsg(ctx, w.js, w.streams.Responses, respSubj)
		if err != nil {
			return err
		}
		lastSeq := int64(-1)
		if last != nil {
			h, ferr := last.frame()
			if ferr != nil {
				return ferr
			}
			if h.IsFinal {
				w.stopLocal(id, h.Sequence)
				return nil
			}
			lastSeq = h.Sequence
		}
		wr := newWriter(w, env, id, respSubj, last, lastSeq)
		written, err := wr.finish(f)
		if err == nil {
			w.stopLocal(id, lastSeq+1)
			if written {
				w.metrics.handled.WithLabelValues(w.pool, OutcomeMaxDeliveries).Inc()
				w.log.Info("request closed after max deliveries", "request_id", id, "deliveries", adv.Deliveries)
			}
			return nil
		}
		if !errors.Is(err, ErrFenced) {
			return err
		}
		// Someone wrote meanwhile (a zombie, or another worker closing it):
		// read again.
		time.Sleep(backoff)
		backoff = min(2*backoff, 200*time.Millisecond)
	}
	return errors.New("gave up after 20 conflicting writes")
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
