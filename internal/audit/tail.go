package audit

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
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
	// (default 100,000). Beyond it the request that finished first is
	// forgotten, or, when every one of them still runs, the oldest: the
	// later frames of such a running request are then ignored (up to
	// MaxTracked of their ids are remembered for that; so are those of
	// finished ones forgotten, so that a poll meeting such a request's
	// envelope after its frames does not show it again). A request known
	// not to match is not tracked: up to MaxTracked of their ids are
	// remembered, their frames dropped unchecked (one forgotten beyond
	// that has its envelope looked up again at its next frame).
	MaxTracked int
	// LiveBytes bounds the bytes (headers and data, as the server counts
	// them against its max_payload) of the live messages queued while
	// emit is slower than the traffic (default DefaultTailLiveBytes, 16
	// MiB, as egress's live buffer, egress.DefaultLiveBytes): beyond it,
	// or beyond 8192 messages, they are dropped and read back from
	// E2A_RESPONSES. One message is queued whatever its size when none is.
	// Bounded in messages alone, the queue held up to 8192 of the largest
	// message the server takes (8 MB in deploy/nats): 64 GiB.
	LiveBytes int64
	// Log receives what Tail rides out: a poll, a read-back or an
	// envelope's lookup that got no answer (a NATS server restarting),
	// tried again at the next poll (nil: not logged).
	Log *slog.Logger
}

// tailReq is one request Tail follows.
type tailReq struct {
	id      string
	pool    string
	match   bool
	emitted bool
	done    bool   // its final frame was seen
	lastSeq uint64 // stream sequence of its last response message seen
	// after: its envelope was stored after the live subscription was in
	// place (tailer.subscribedTo), so every frame of it is shown, one read
	// back because its live copy was lost included.
	after bool
	// unresolved: met through its frames, its envelope's lookup got no
	// answer yet, so whether it matches is not known: none of its messages
	// is added until a lookup answers (it is pending meanwhile, tried again
	// at the next poll), and then they are read back, shown from firstLive
	// on (every one when after).
	unresolved bool
	firstLive  uint64 // stream sequence of the first live message met
	check      *checker
}

// defaultMaxTracked is TailOptions.MaxTracked's default, and how many of
// the requests it reported last a scan of E2A_AUDIT remembers (scanAudit).
const defaultMaxTracked = 100_000

// liveBuffer is how many live messages (frames or bursts) Tail queues;
// beyond it they are read back from E2A_RESPONSES (the gap is seen on the
// next live message).
const liveBuffer = 8192

// DefaultTailLiveBytes is TailOptions.LiveBytes' default.
const DefaultTailLiveBytes = 16 << 20

// Tail follows live traffic until ctx is done: new requests (read from
// E2A_REQUESTS every PollInterval, batched direct gets, no consumer) and
// their frames (the server's republish on e2a.live.>, one message per frame
// or burst of frames), each checked as it comes. A message whose
// predecessor on its subject was not seen (a request already running when
// Tail started, or a live message lost) is read back from E2A_RESPONSES
// first, and so is, after the connection reconnected, every request
// followed and not done (its live messages went by meanwhile): of a
// request that does not match the filter, none is read, only its envelope,
// once (the lookup of a request met through its frames), and its live
// messages are dropped unchecked once that is known. Each request
// ends with a KindSummary record when the message holding its final frame
// arrives; a message stored after that one is shown too, with a further
// summary that reports it. Records of different requests interleave; a
// request record may follow the first frames of its request by up to
// PollInterval. A poll, a read-back or the lookup of the envelope of a
// request met through its frames that gets no answer (the connection down)
// is logged and tried again at the next poll; the frames of a request
// whose lookup got no answer wait for it, and are shown, each once, if it
// matches. It returns nil when ctx ends, or the
// error of emit.
func (a *Auditor) Tail(ctx context.Context, o TailOptions, emit func(Record) error) error {
	if o.PollInterval <= 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	if o.MaxTracked <= 0 {
		o.MaxTracked = defaultMaxTracked
	}
	if o.LiveBytes <= 0 {
		o.LiveBytes = DefaultTailLiveBytes
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
	reconnects := a.nc.Stats().Reconnects
	live := make(chan *nats.Msg, liveBuffer)
	dropped := &atomic.Bool{}
	var held atomic.Int64 // bytes of the messages in live
	sub, err := a.nc.Subscribe(subjects.AllLive, func(m *nats.Msg) {
		n := streams.MessageSize(m)
		h := held.Add(n)
		queued := false
		if h <= o.LiveBytes || h == n {
			select {
			case live <- m:
				queued = true
			default:
			}
		}
		if !queued {
			held.Add(-n)
			dropped.Store(true) // the gap is refilled from the stream (tailer.resume)
		}
		if a.tailLive != nil {
			a.tailLive(h, queued)
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
		backfillTo: subscribed.last, subscribedTo: subscribed.last, reconnects: reconnects, dropped: dropped, log: o.Log}
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
			held.Add(-streams.MessageSize(m))
			if err := t.frame(ctx, m); err != nil {
				return nilIfDone(ctx, err)
			}
		case <-poll.C:
			if next, err = t.tick(ctx, filter, next); err != nil {
				return nilIfDone(ctx, err)
			}
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
	order   []string // tracked ids by first sighting (and some forgotten)
	doneQ   []string // tracked ids in the order they finished (and some forgotten)
	max     int
	// forgotten holds the ids of running requests forgotten beyond max
	// (up to max of them): their frames are ignored.
	forgotten idSet
	// others holds the ids of the requests known not to match (up to max
	// of them), which are not tracked: their frames are dropped unchecked.
	others idSet
	// finished holds the ids of the done requests forgotten beyond max (up
	// to max of them): a poll that meets one's envelope afterwards (it was
	// met through its frames, which came first) does not show it again as
	// a new request, nor push a running one out for it.
	finished idSet
	// pending holds the requests whose read-back failed for want of an
	// answer, or which a reconnect left behind, to read back at the next
	// poll: each from its last message seen on, showing the messages from
	// the stream sequence it maps to on.
	pending map[string]uint64
	// backfillTo is the last request stored before the live subscription
	// was in place (see Tail), or in place again after a reconnect.
	backfillTo uint64
	// subscribedTo is backfillTo as Tail first set it: a request stored
	// after it started after Tail did, whatever a reconnect raised
	// backfillTo to since (tailReq.after).
	subscribedTo uint64
	reconnects   uint64 // the connection's reconnects caught up with
	// dropped is set when the live buffer was full and a live message was
	// dropped (nil: never).
	dropped *atomic.Bool
	log     *slog.Logger
}

// tick is one poll: it catches up after a reconnect, retries the pending
// read-backs and reads the new requests. An error a later poll may not meet
// (no answer) is logged and the work tried again at the next poll, from the
// position reached.
func (t *tailer) tick(ctx context.Context, filter string, next uint64) (uint64, error) {
	err := t.resume(ctx)
	if err == nil {
		err = t.retryPending(ctx)
	}
	if err == nil {
		next, err = t.poll(ctx, filter, next)
	}
	if err != nil && (retryable(err) || t.a.cut(err)) && ctx.Err() == nil {
		t.warn("poll", err)
		return next, nil
	}
	return next, err
}

func (t *tailer) warn(what string, err error) {
	if t.log != nil {
		t.log.Warn("e2a tail: "+what+" failed, trying again at the next poll", "err", err)
	}
}

// resume catches up after the connection reconnected: the live messages
// republished while it was away never reach the subscription. Every request
// followed that matches and is not done is read back from its last message
// seen, and the requests stored up to now are backfilled when polled (their
// frames may have gone by as well). So it does after the live buffer dropped messages
// (a slow reader): a dropped message was read back only when a later live
// one of its request showed the gap, and a request's last messages, its
// final frame among them, have none.
func (t *tailer) resume(ctx context.Context) error {
	rc := t.a.nc.Stats().Reconnects
	dropped := t.dropped != nil && t.dropped.Swap(false)
	if rc == t.reconnects && !dropped {
		return nil
	}
	reqs, err := t.caughtUp(ctx)
	if err != nil {
		if dropped {
			t.dropped.Store(true) // caught up with at the next poll
		}
		return err
	}
	t.backfillTo = max(t.backfillTo, reqs.last)
	for id, r := range t.tracked {
		// A request that does not match shows nothing: its frames are not
		// read (those unresolved are pending already).
		if _, ok := t.pending[id]; !ok && !r.done && r.match {
			t.later(r, 0)
		}
	}
	t.reconnects = rc
	return nil
}

// caughtUp returns E2A_REQUESTS' state once the live subscription is in
// place (again, after a reconnect: once the server answers a flush).
func (t *tailer) caughtUp(ctx context.Context) (streamState, error) {
	if err := t.a.call(ctx, t.a.nc.FlushWithContext); err != nil {
		return streamState{}, err
	}
	return t.a.state(ctx, streams.RequestsStream)
}

// retryPending reads back the pending requests, looking up the envelope
// of those unresolved first.
func (t *tailer) retryPending(ctx context.Context) error {
	for id := range t.pending {
		if r := t.tracked[id]; r != nil {
			if r.unresolved {
				if err := t.lookup(ctx, r); err != nil {
					return err
				}
			}
			if r.match {
				if err := t.readBack(ctx, r, 0, t.pending[id]); err != nil {
					return err
				}
			}
		}
		delete(t.pending, id)
	}
	return nil
}

// later makes r pending (see tailer.pending), unless it is already.
func (t *tailer) later(r *tailReq, showFrom uint64) {
	if t.pending == nil {
		t.pending = map[string]uint64{}
	}
	if _, ok := t.pending[r.id]; !ok {
		t.pending[r.id] = showFrom
	}
}

// deferRead makes r pending after a read-back that failed with err, when a
// later one may not meet it (no answer), and returns nil; other errors are
// returned.
func (t *tailer) deferRead(r *tailReq, showFrom uint64, err error) error {
	if !retryable(err) && !t.a.cut(err) {
		return err
	}
	t.later(r, showFrom)
	t.warn("read back of request "+r.id, err)
	return nil
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
			if t.ignored(s.RequestID) || t.finished.has(s.RequestID) {
				continue
			}
			r := t.track(s.RequestID)
			if r.emitted {
				continue
			}
			if err := t.decide(r, sm, s.Agent); err != nil {
				return next, err
			}
			// Stored before the live subscription was in place: its frames
			// already stored are shown, and live copies of them then skipped
			// by stream sequence.
			if r.match && m.Seq <= t.backfillTo {
				if err := t.readBack(ctx, r, 0, 0); err != nil {
					if err := t.deferRead(r, 0, err); err != nil {
						return next, err
					}
				}
			}
		}
		if !more || len(msgs) == 0 {
			return next, nil
		}
	}
}

// readBack reads the messages of r stored after the last one seen, up to
// stream sequence until (excluded; 0: to the end), and adds them, showing
// those from sequence showFrom on.
func (t *tailer) readBack(ctx context.Context, r *tailReq, until, showFrom uint64) error {
	subj, err := subjects.Response(r.id)
	if err != nil || !t.resps.exists {
		return nil
	}
	for sm, err := range t.a.seq(ctx, t.resps.name, subj, r.lastSeq+1) {
		if err != nil {
			return err
		}
		if until != 0 && sm.Seq >= until {
			break
		}
		if err := t.add(r, hotMsg(t.resps.name, sm), sm.Seq >= showFrom); err != nil {
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
	for len(t.tracked) > t.max && t.evict() {
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

// evict forgets one request: the one that finished first or, when every
// request tracked still runs, the oldest, whose id is remembered so that
// its later frames are ignored (not taken for a new request's). It reports
// whether one was.
func (t *tailer) evict() bool {
	for len(t.doneQ) > 0 {
		id := t.doneQ[0]
		t.doneQ = t.doneQ[1:]
		if r := t.tracked[id]; r != nil && r.done {
			delete(t.tracked, id)
			t.finished.add(id, t.max)
			return true
		}
	}
	for len(t.order) > 0 {
		id := t.order[0]
		t.order = t.order[1:]
		if t.tracked[id] == nil {
			continue
		}
		delete(t.tracked, id)
		delete(t.pending, id)
		t.forgotten.add(id, t.max)
		return true
	}
	return false
}

// ignored reports whether the frames of request id are dropped: it was
// forgotten while running, or is known not to match.
func (t *tailer) ignored(id string) bool { return t.forgotten.has(id) || t.others.has(id) }

// dismiss stops following r, known not to match: its id is remembered
// instead (in others), so that its frames are dropped at once, not checked.
func (t *tailer) dismiss(r *tailReq) {
	delete(t.tracked, r.id)
	delete(t.pending, r.id)
	t.others.add(r.id, t.max)
}

// idSet is a set of request ids that holds the last max added.
type idSet struct {
	ids map[string]struct{}
	q   []string // the ids in the order they were added
}

func (s *idSet) add(id string, max int) {
	if _, ok := s.ids[id]; ok {
		return
	}
	if s.ids == nil {
		s.ids = map[string]struct{}{}
	}
	s.ids[id] = struct{}{}
	s.q = append(s.q, id)
	for len(s.q) > max {
		delete(s.ids, s.q[0])
		s.q = s.q[1:]
	}
}

func (s *idSet) has(id string) bool {
	_, ok := s.ids[id]
	return ok
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
	if r == nil {
		if t.ignored(id) {
			return nil
		}
		r = t.track(id)
		r.unresolved, r.firstLive = true, seq
		if err := t.lookup(ctx, r); err != nil {
			// This message is read back with the rest once a lookup
			// answers.
			return t.deferRead(r, 0, err)
		}
		if t.tracked[id] == nil {
			return nil // it does not match (dismissed)
		}
	} else if r.unresolved {
		// Its lookup got no answer: tried again at the next poll (one
		// lookup per poll, not per message, while the server does not
		// answer), which reads this message back.
		t.later(r, 0)
		return nil
	}
	if showFrom, ok := t.pending[id]; ok {
		// Its read-back failed: this message is stored, read it back too.
		if err := t.readBack(ctx, r, 0, showFrom); err != nil {
			return t.deferRead(r, showFrom, err)
		}
		delete(t.pending, id)
	}
	if seq != 0 && seq <= r.lastSeq || seq == 0 && r.done {
		return nil // already read (back from the stream)
	}
	// Read back what the live subscription did not deliver: the earlier
	// frames of a request already running, or lost live messages (not for
	// a request that does not match: nothing of it is shown).
	if prev != 0 && prev != r.lastSeq && r.match && t.resps.exists {
		// Frames before the first one seen only prime the checker when
		// the request started before Tail did; lost ones are shown (the
		// first one's too, of a request stored after Tail started).
		var showFrom uint64
		if r.lastSeq == 0 && !r.after {
			showFrom = seq
		}
		if err := t.readBack(ctx, r, seq, showFrom); err != nil {
			// This message is read back with the rest next time.
			return t.deferRead(r, showFrom, err)
		}
	}
	rm := streams.RawMsg{Subject: stored, Seq: seq, Header: m.Header, Data: m.Data}
	if ts := m.Header.Get(subjects.HeaderTimeStamp); ts != "" {
		rm.Time, _ = time.Parse(time.RFC3339Nano, ts)
	}
	return t.add(r, hotMsg(t.resps.name, rm), true)
}

// lookup looks up the envelope of r, unresolved (met through its frames),
// and decides r with it (shown when it matches). A lookup that gets no
// answer leaves r unresolved and returns its error; a request whose
// envelope E2A_REQUESTS does not hold (or another error) matches only
// when no filter is set. When r is pending, the read back shows its
// messages from the first live one on, or all of them when its envelope
// was stored after Tail started.
func (t *tailer) lookup(ctx context.Context, r *tailReq) error {
	req, err := t.a.hotRequest(ctx, t.reqs, r.id, "")
	if err != nil && retryable(err) {
		return err
	}
	r.unresolved = false
	if err != nil || req == nil {
		r.match = t.q.Pool == "" && t.q.TaskID == "" && t.q.ContextID == "" && t.q.SessionID == ""
	} else {
		s, _ := subjects.Parse(req.subject)
		if err := t.decide(r, req, s.Agent); err != nil {
			return err
		}
	}
	if _, ok := t.pending[r.id]; ok {
		t.pending[r.id] = 0
		if !r.after {
			t.pending[r.id] = r.firstLive
		}
	}
	return nil
}

// decide sets what the envelope of r, stored as sm in E2A_REQUESTS under
// pool, tells, and shows it when r matches; else r is dismissed.
func (t *tailer) decide(r *tailReq, sm *storedMsg, pool string) error {
	env, _ := e2a.FromJSON(sm.data)
	r.pool, r.match, r.emitted = pool, t.q.match(pool, env), true
	r.after = sm.seq > t.subscribedTo
	if !r.match {
		t.dismiss(r)
		return nil
	}
	return t.emit(requestRecord(sm, r.id, pool))
}

// add checks the frames of a stored response message (one, or a burst),
// emits them when show is set and the request matches, and closes the
// request at the message holding its final frame (frames after it in that
// message are checked, and reported in the summary). Each message stored
// after that one is reported in a further summary.
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
	if r.check.final == nil {
		return nil
	}
	if r.match {
		sum := r.check.summary(r.emitted)
		if err := t.emit(Record{Kind: KindSummary, RequestID: r.id, Pool: r.pool, Summary: sum}); err != nil {
			return err
		}
	}
	if !hadFinal {
		// Kept (until MaxTracked newer ones push it out, the first done
		// first) as done, so that a live copy of a frame read back does
		// not show it again.
		r.done = true
		t.doneQ = append(t.doneQ, r.id)
	}
	return nil
}
