package audit

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TailOptions configure Tail.
type TailOptions struct {
	// Pool, TaskID, ContextID and SessionID filter the requests followed;
	// frames are shown for the requests that match.
	Pool      string
	TaskID    string
	ContextID string
	SessionID string
	// Since starts with the requests stored since then (zero: only new
	// ones). Frames are live only.
	Since time.Time
	// PollInterval is how often E2A_REQUESTS is read for new requests
	// (default 200 ms).
	PollInterval time.Duration
	// MaxTracked bounds the requests whose frames are being checked
	// (default 100,000); the oldest is forgotten beyond it.
	MaxTracked int
}

// tailReq is one request Tail follows.
type tailReq struct {
	id      string
	pool    string
	match   bool
	emitted bool
	done    bool   // its final frame was seen: later live copies are ignored
	lastSeq uint64 // stream sequence of its last response message seen
	// after: its envelope was stored after the live subscription was in
	// place (tailer.backfillTo), so every frame of it is shown, one read
	// back because its live copy was lost included.
	after bool
	check *checker
}

// liveBuffer is how many live messages (frames or bursts) Tail queues;
// beyond it they are read back from E2A_RESPONSES (the gap is seen on the
// next live message).
const liveBuffer = 8192

// Tail follows live traffic until ctx is done: new requests (read from
// E2A_REQUESTS every PollInterval, batched direct gets, no consumer) and
// their frames (the server's republish on e2a.live.>, one message per frame
// or burst of frames), each checked as it comes. A message whose
// predecessor on its subject was not seen (a request already running when
// Tail started, or a live message lost) is read back from E2A_RESPONSES
// first. Each request ends with a KindSummary record when the message
// holding its final frame arrives. Records of different requests
// interleave; a request record may follow the first frames of its request
// by up to PollInterval. It returns nil when ctx ends, or the error of emit.
func (a *Auditor) Tail(ctx context.Context, o TailOptions, emit func(Record) error) error {
	if o.PollInterval <= 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	if o.MaxTracked <= 0 {
		o.MaxTracked = 100_000
	}
	q := Query{Pool: o.Pool, TaskID: o.TaskID, ContextID: o.ContextID, SessionID: o.SessionID}
	if o.Pool != "" {
		if err := subjects.ValidatePool(o.Pool); err != nil {
			return err
		}
	}
	reqs, err := a.state(ctx, streams.RequestsStream)
	if err != nil {
		return err
	}
	resps, err := a.state(ctx, streams.ResponsesStream)
	if err != nil {
		return err
	}
	live := make(chan *nats.Msg, liveBuffer)
	sub, err := a.nc.Subscribe(subjects.AllLive, func(m *nats.Msg) {
		select {
		case live <- m:
		default: // the gap is refilled from the stream
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(-1, -1)
	// The subscription is in place before the first poll. FlushWithContext
	// needs a deadline, which the CLI's context (cancelled by a signal) does
	// not have: bound the flush by the call timeout.
	if err := a.call(ctx, a.nc.FlushWithContext); err != nil {
		return nilIfDone(ctx, err)
	}

	// A request stored up to here may have had frames republished before
	// the subscription was in place (it ran, or finished, before Tail
	// started: with Since, or in the moment between the state read above
	// and the subscription): the poll that finds it reads its stored frames
	// back. Requests stored later get all of theirs live.
	subscribed, err := a.state(ctx, streams.RequestsStream)
	if err != nil {
		return nilIfDone(ctx, err)
	}
	t := &tailer{a: a, q: q, emit: emit, reqs: reqs, resps: resps, tracked: map[string]*tailReq{}, max: o.MaxTracked,
		backfillTo: subscribed.last}
	filter := subjects.AllRequests
	if o.Pool != "" {
		filter, _ = subjects.RequestFilter(o.Pool)
	}
	next := reqs.last + 1
	if !o.Since.IsZero() && reqs.exists {
		if next, err = a.seqAtTime(ctx, reqs, subjects.AllRequests, o.Since); err != nil {
			return nilIfDone(ctx, err)
		}
	}
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-live:
			if err := t.frame(ctx, m); err != nil {
				return nilIfDone(ctx, err)
			}
		case <-poll.C:
			n, err := t.poll(ctx, filter, next)
			if err != nil && !errors.Is(err, streams.ErrDirectGet) {
				return nilIfDone(ctx, err)
			}
			next = n
			poll.Reset(o.PollInterval)
		}
	}
}

func nilIfDone(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

type tailer struct {
	a       *Auditor
	q       Query
	emit    func(Record) error
	reqs    streamState
	resps   streamState
	tracked map[string]*tailReq
	order   []string
	max     int
	// backfillTo is the last request stored before the live subscription
	// was in place (see Tail).
	backfillTo uint64
}

// poll reads the requests stored from sequence next on and returns the
// sequence to read from next time.
func (t *tailer) poll(ctx context.Context, filter string, next uint64) (uint64, error) {
	for {
		msgs, more, err := t.a.batch(ctx, t.reqs.name, filter, next, t.a.page)
		if errors.Is(err, streams.ErrNoMessages) {
			return next, nil
		}
		if err != nil {
			return next, err
		}
		for _, m := range msgs {
			next = m.Seq + 1
			sm := hotMsg(t.reqs.name, m)
			s, err := subjects.Parse(sm.subject)
			if err != nil || s.Kind != subjects.KindRequest {
				continue
			}
			r := t.track(s.RequestID)
			if r.emitted {
				continue
			}
			env, _ := e2a.FromJSON(sm.data)
			r.pool, r.match, r.emitted = s.Agent, t.q.match(s.Agent, env), true
			r.after = m.Seq > t.backfillTo
			if r.match {
				if err := t.emit(requestRecord(sm, s.RequestID, s.Agent)); err != nil {
					return next, err
				}
			}
			if r.match && m.Seq <= t.backfillTo && t.resps.exists {
				if err := t.backfill(ctx, r); err != nil {
					return next, err
				}
			}
		}
		if !more || len(msgs) == 0 {
			return next, nil
		}
	}
}

// backfill shows the frames of r already stored (it was stored before the
// live subscription was in place); live copies of them are then skipped by
// stream sequence.
func (t *tailer) backfill(ctx context.Context, r *tailReq) error {
	subj, err := subjects.Response(r.id)
	if err != nil {
		return nil
	}
	for sm, err := range t.a.seq(ctx, t.resps.name, subj, r.lastSeq+1) {
		if err != nil {
			return err
		}
		if r.done {
			return nil
		}
		if err := t.add(r, hotMsg(t.resps.name, sm), true); err != nil {
			return err
		}
	}
	return nil
}

// track returns the state of request id, creating it.
func (t *tailer) track(id string) *tailReq {
	if r := t.tracked[id]; r != nil {
		return r
	}
	r := &tailReq{id: id, check: newChecker(id)}
	t.tracked[id] = r
	t.order = append(t.order, id)
	for len(t.tracked) > t.max && len(t.order) > 0 {
		delete(t.tracked, t.order[0])
		t.order = t.order[1:]
	}
	if len(t.order) > 4*t.max {
		// Compact: drop ids no longer tracked.
		kept := t.order[:0]
		for _, x := range t.order {
			if t.tracked[x] != nil {
				kept = append(kept, x)
			}
		}
		t.order = kept
	}
	return r
}

// frame handles one live response message (a frame or a burst).
func (t *tailer) frame(ctx context.Context, m *nats.Msg) error {
	stored := m.Header.Get(subjects.HeaderSubject)
	if stored == "" {
		return nil
	}
	id, err := subjects.ParseResponse(stored)
	if err != nil {
		return nil
	}
	seq, _ := strconv.ParseUint(m.Header.Get(subjects.HeaderStreamSequence), 10, 64)
	prev, _ := strconv.ParseUint(m.Header.Get(subjects.HeaderLastSequence), 10, 64)
	r := t.tracked[id]
	if r != nil && r.done {
		return nil // a live copy of a frame read back, or after the final one
	}
	if r == nil {
		r = t.track(id)
		// A request met through its frames: look its envelope up.
		if req, err := t.a.hotRequest(ctx, t.reqs, id, ""); err == nil && req != nil {
			s, _ := subjects.Parse(req.subject)
			env, _ := e2a.FromJSON(req.data)
			r.pool, r.match, r.emitted = s.Agent, t.q.match(s.Agent, env), true
			r.after = req.seq > t.backfillTo
			if r.match {
				if err := t.emit(requestRecord(req, id, r.pool)); err != nil {
					return err
				}
			}
		} else {
			r.match = t.q.Pool == "" && t.q.TaskID == "" && t.q.ContextID == "" && t.q.SessionID == ""
		}
	}
	if seq != 0 && seq <= r.lastSeq {
		return nil // already seen (read back from the stream)
	}
	// Read back what the live subscription did not deliver: the earlier
	// frames of a request already running, or lost live messages.
	if prev != 0 && prev != r.lastSeq && t.resps.exists {
		// Frames before the first one seen only prime the checker when
		// the request started before Tail did; lost ones are shown (the
		// first one's too, of a request stored after Tail started).
		show := r.lastSeq != 0 || r.after
		for sm, err := range t.a.seq(ctx, t.resps.name, stored, r.lastSeq+1) {
			if err != nil {
				return err
			}
			if seq != 0 && sm.Seq >= seq {
				break
			}
			if err := t.add(r, hotMsg(t.resps.name, sm), show); err != nil {
				return err
			}
		}
	}
	rm := streams.RawMsg{Subject: stored, Seq: seq, Header: m.Header, Data: m.Data}
	if ts := m.Header.Get(subjects.HeaderTimeStamp); ts != "" {
		rm.Time, _ = time.Parse(time.RFC3339Nano, ts)
	}
	return t.add(r, hotMsg(t.resps.name, rm), true)
}

// add checks the frames of a stored response message (one, or a burst),
// emits them when show is set and the request matches, and closes the
// request at the message holding its final frame (frames after it in that
// message are checked, and reported in the summary).
func (t *tailer) add(r *tailReq, sm *storedMsg, show bool) error {
	hadFinal := r.check.final != nil
	frames := r.check.add(sm)
	r.lastSeq = sm.seq
	if show && r.match {
		for _, f := range frames {
			if err := t.emit(frameRecord(sm, r.id, r.pool, f)); err != nil {
				return err
			}
		}
	}
	if !hadFinal && r.check.final != nil {
		if r.match {
			sum := r.check.summary(r.emitted)
			if err := t.emit(Record{Kind: KindSummary, RequestID: r.id, Pool: r.pool, Summary: sum}); err != nil {
				return err
			}
		}
		// Kept (until MaxTracked newer ones push it out) as done, so that
		// a live copy of a frame read back does not show it again.
		r.done = true
	}
	return nil
}
