package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Parking. A config that cannot take a message now (its webhook backs
// off, an earlier message of it is not handled yet, or its lane is full
// or drains it) is parked: its cursor's Backlog names the first and the
// last of the requests whose messages it has left to handle (the task's
// turns between them are found by following E2A-After-Request back from
// the last; a turn after a gap starts a chain of its own, the last turn
// of each earlier chain kept in Ends), and the message is done for it.
// While it is parked, the consumer's messages for it only move the
// backlog's ends (and raise Tail), so the cursor stays a few KiB
// whatever the number of turns parked. A wake-up key in E2A_PUSH (wake.<cursor key>), read by a second
// durable consumer of the stage (<consumer>-wake), drains it: the
// replica that holds the wake-up delivers the backlog from the cursor,
// reading the messages back from E2A_RESPONSES, naks the wake-up with the
// webhook's backoff, and when nothing is left clears the backlog (a compare-and-set: a message
// handed to it meanwhile changed the cursor) and deletes the key. So a
// failing or hanging webhook holds none of the consumer's messages once
// parked, and at most maxLaneQueue+1 while it answers one POST: the
// consumer's MaxAckPending is never filled by one tenant.

// wakeRef is the value of a parked config's wake-up key.
type wakeRef struct {
	Principal string `json:"principal"`
	TaskID    string `json:"task_id"`
	ConfigID  string `json:"config_id"`
}

// wakeKey is the bucket key of the config's wake-up.
func (r configRef) wakeKey() string { return "wake." + r.cursorKey() }

// wakeSubjects are the wake-up keys' subjects in the bucket's stream.
const wakeSubjects = "$KV." + streams.PushBucket + ".wake.>"

// kvOperation is the header of a KV delete or purge marker.
const kvOperation = "KV-Operation"

func (s *stage) wakeConsumer() string { return WakeConsumer(s.o.consumer) }

// WakeConsumer is the name of the push stage's wake-up consumer on
// E2A_PUSH's stream beside its durable consumer consumer on E2A_RESPONSES
// (WithConsumer; DefaultConsumer's is push-wake).
func WakeConsumer(consumer string) string { return consumer + "-wake" }

// bindWake creates or updates the durable consumer of wake-ups. Its
// pending wake-ups are bounded by the configs (one key each), not by
// MaxAckPending: a wake-up waits, nak'd, for its webhook's next attempt.
func (s *stage) bindWake(ctx context.Context) (jetstream.Consumer, error) {
	return s.js.CreateOrUpdateConsumer(ctx, streams.KVStream(streams.PushBucket), jetstream.ConsumerConfig{
		Durable:       s.wakeConsumer(),
		Description:   "E2A push notification delivery: parked configs",
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.o.ackWait,
		MaxDeliver:    -1,
		FilterSubject: wakeSubjects,
		MaxAckPending: -1,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	})
}

// wakeIntake hands a wake-up to its config's lane (a deleted one is
// acked).
func (s *stage) wakeIntake(msg jetstream.Msg) {
	if s.ctx.Err() != nil {
		_ = msg.Nak()
		return
	}
	var w wakeRef
	if msg.Headers().Get(kvOperation) != "" || json.Unmarshal(msg.Data(), &w) != nil {
		_ = msg.Ack()
		return
	}
	s.jobs.Add(1)
	s.enqueue(item{ref: configRef{w.Principal, w.TaskID, w.ConfigID}, wake: msg})
}

// handled reports whether cur (or the config's start) is past m.
func handled(cur cursor, cfg Config, m *message) bool {
	return m.seq < cur.Seq || (m.seq == cur.Seq && cur.Done) || (m.seq != cur.Seq && m.seq <= cfg.From)
}

// parkItem parks it's config with it's message (park), retrying when the
// cursor moves meanwhile.
func (s *stage) parkItem(it item) result {
	for range 4 {
		r, err := s.park(it)
		if errors.Is(err, errMoved) {
			continue
		}
		if errors.Is(err, errGone) {
			return result{}
		}
		if err != nil {
			return s.stateFailed(it, err)
		}
		return r
	}
	return result{retry: true, after: s.o.orderWait}
}

// park parks it's config with the requests from its cursor to it's
// message (chain), then writes its wake-up; a parked config's message is
// handed to it (handOff). The cursor is written first: a replica that
// stops in between leaves the message unacked, and its redelivery writes
// the missing wake-up.
func (s *stage) park(it item) (result, error) {
	key := it.ref.cursorKey()
	cur, rev, err := readCursor(s.ctx, s.kv, key)
	if err != nil {
		return result{}, err
	}
	if cur, rev, err = s.position(it, cur, rev); err != nil {
		return result{}, err
	}
	if cur.parked() {
		return s.handOff(it, cur, rev)
	}
	if handled(cur, it.cfg, it.job.m) {
		return result{}, nil
	}
	ids, err := s.chain(s.ctx, it, cur)
	if err != nil || len(ids) == 0 {
		return result{}, err // none: a message after its request's final frame
	}
	cur.Backlog, cur.Tail = backlog(ids[0], ids[len(ids)-1]), it.job.m.seq
	if time.Until(cur.NextAttempt) <= 0 && !s.waitedFor(it, cur) {
		// A lane (of this replica or another) may be posting the
		// config's next update from the cursor read before this write:
		// the drain waits for it (Settle). Not when the update the
		// cursor waits for is this message's: no lane posts it (a copy
		// another replica holds has its POSTs claimed: Poster), and no
		// lane would come to clear the settle time (handOff).
		cur.Settle = time.Now().Add(s.o.timeout + settleMargin).UnixNano()
	}
	if _, err := s.putCursor(it, cur, rev); err != nil {
		return result{}, err
	}
	if err := s.putWake(it.ref); err != nil {
		return result{}, err
	}
	return result{parked: true}, nil
}

// handOff hands it's message to its parked config: its request becomes
// the backlog's last when it is a later turn than the last, its first
// when it is an earlier turn than the first (placeTurn); Tail is raised
// to its sequence. A message of a request of the backlog at or below Tail
// is there already: the cursor is not written.
func (s *stage) handOff(it item, cur cursor, rev uint64) (result, error) {
	if it.job.msg != nil {
		// A replica may have parked the config with this message and
		// stopped before it wrote the wake-up: written again.
		if md, err := it.job.msg.Metadata(); err == nil && md.NumDelivered > 1 {
			if err := s.putWake(it.ref); err != nil {
				return result{}, err
			}
		}
	}
	m := it.job.m
	if handled(cur, it.cfg, m) {
		return result{}, nil
	}
	next, err := s.placed(it, cur)
	if err != nil {
		return result{}, err
	}
	next.Tail = max(cur.Tail, m.seq)
	settled := cur.Settle != 0 && s.waitedFor(it, cur)
	if settled {
		next.Settle = 0
	}
	if settled || next.Tail != cur.Tail || !slices.Equal(next.Backlog, cur.Backlog) || !slices.Equal(next.Ends, cur.Ends) {
		if _, err := writeCursor(s.ctx, s.kv, it.ref.cursorKey(), next, rev); err != nil {
			return result{}, err
		}
	}
	return result{parked: true}, nil
}

// drainLease is a drain's DrainUntil, or a claimed POST's PostUntil: a
// POST timeout and a margin ahead.
func (s *stage) drainLease() int64 {
	return time.Now().Add(s.o.timeout + settleMargin).UnixNano()
}

// settleMargin is added to the POST timeout in a cursor's Settle: the
// time a lane takes to write its position after its POST.
const settleMargin = time.Second

// waitedFor reports whether it's message is the one the parked cursor's
// position waits for (its next): the lane holding it posts nothing of it,
// the config being parked, so no POST from before the park is in flight.
func (s *stage) waitedFor(it item, cur cursor) bool {
	m := it.job.m
	switch {
	case m.seq == cur.Seq:
		return !cur.Done
	case m.seq < cur.Seq:
		return false
	}
	next, err := s.isNext(s.ctx, it, cur)
	return err == nil && next
}

// lanesDone reports whether no lane can be posting from the parked
// cursor's position, so that its settle time need not be waited for: the
// stage's consumer has acked every message up to the backlog's Tail and
// up to the drain's next message (the first stored after the cursor of
// the backlog's first turn). A lane holds its message unacked while it
// posts and until it wrote its position after the POST (which clears
// the settle time), and the message a lane may be posting from the
// cursor is the drain's next one, or one stored before it (deleted
// since, or a turn's message stored after a later turn's: up to Tail):
// so none is in flight. This is
// when the message the cursor waited for at the park never came to a
// lane (deleted, or aged out of E2A_RESPONSES, before the consumer
// delivered it: the consumer skips it), or was the one parked (waitedFor
// could not tell). Any message taken by a lane after this sees the
// config parked (handOff). A redelivered copy's POST is claimed in the
// cursor first (Poster: postsElsewhere). Not done when any of it cannot
// be read, or the drain reads another E2A_RESPONSES than the consumer's.
func (s *stage) lanesDone(d *drainer, cur cursor) bool {
	if d.epoch != s.epoch.Load() || cur.Tail == 0 {
		return false
	}
	c, err := s.js.Consumer(s.ctx, streams.ResponsesStream, s.o.consumer)
	if err != nil {
		return false
	}
	floor := c.CachedInfo().AckFloor.Stream
	if floor < cur.Tail {
		return false // the common case while messages come: no more asked
	}
	path, err := s.backlogPath(d, cur)
	if err != nil {
		return false
	}
	raw, _, found, err := s.nextOf(d.cfg, cur, path[0])
	return err == nil && (!found || raw.Seq <= floor)
}

// placed is cur with it's message's request placed in its backlog
// (placeTurn): the backlog's last, or its first, or the last of one of
// its chains (Ends), or a new chain after a gap.
func (s *stage) placed(it item, cur cursor) (cursor, error) {
	id := it.job.m.requestID
	if cur.holds(id) || (id == cur.Request && cur.Final) {
		return cur, nil
	}
	first, last := cur.first(), cur.last()
	next := cur
	next.Ends = slices.Clone(cur.Ends)
	place, end, err := s.placeTurn(s.ctx, it, cur)
	if err != nil {
		return cur, err
	}
	switch place {
	case turnNewer:
		last = id
	case turnOlder:
		ids, err := s.chain(s.ctx, it, cur)
		if err != nil {
			return cur, err
		}
		if len(ids) > 0 {
			first = ids[0]
		}
	case turnExtends:
		next.Ends[end] = id
	case turnAfterGap:
		if len(cur.Ends) >= maxBacklogGaps {
			s.metrics.skipped.Inc()
			s.log.Error("push: a parked config's backlog has too many gaps; the turn is skipped for the config",
				"config", it.cfg.String(), "request_id", id, "gaps", maxBacklogGaps)
			return cur, nil
		}
		next.Ends, last = append(next.Ends, last), id
	}
	next.Backlog = backlog(first, last)
	return next, nil
}

// maxBacklogTurns bounds the turns of a parked config's backlog a drain
// follows back from its last (backlogPath): a task's turns within the
// retry window whose envelopes E2A_REQUESTS still holds are fewer in
// practice. The drain keeps their ids in memory, not the cursor.
const maxBacklogTurns = 100_000

// turnPlace is where a request stands against a parked config's backlog.
type turnPlace int

const (
	turnInside   turnPlace = iota // between its first and last turns
	turnNewer                     // a later turn than its last
	turnOlder                     // an earlier turn than its first
	turnExtends                   // a later turn than the last of one of its chains (Ends)
	turnAfterGap                  // a later turn than its last, after a gap: a chain of its own
)

// maxBacklogGaps bounds the chains of a parked config's backlog (Ends):
// a gap takes a turn published with none of its task's earlier turns
// stored (ingress leaves one when a publish and its undo both fail), so
// a backlog meets few.
const maxBacklogGaps = 8

// placeTurn places it's message's request, none of cur's backlog's ends,
// against that backlog, following the task's turns back from it
// (E2A-After-Request): newer when it meets the backlog's last, extends
// the k-th chain when it meets Ends[k], inside when it meets its first,
// older when it is or meets the cursor's request (the drain delivers the
// backlog's first turn only, so the cursor is on it or on an earlier
// turn) or the task's first turn. A walk that ends at a gap (a turn whose
// envelope is gone, never stored or another tenant's: afterOf) is placed
// by placeAfterGap. A request maxTurns turns from both ends (a message of
// the middle of a long backlog, delivered again) is taken for inside:
// nothing to change.
func (s *stage) placeTurn(ctx context.Context, it item, cur cursor) (turnPlace, int, error) {
	first, last := cur.first(), cur.last()
	id := it.job.m.requestID
	if id == cur.Request {
		return turnOlder, 0, nil
	}
	after := it.job.m.after
	for range maxTurns {
		switch k := slices.Index(cur.Ends, after); {
		case after == last:
			return turnNewer, 0, nil
		case k >= 0:
			return turnExtends, k, nil
		case after == first:
			return turnInside, 0, nil
		case after == "" || after == cur.Request || after == id:
			return turnOlder, 0, nil
		}
		next, ok, err := s.afterOf(ctx, it.ref, after)
		if err != nil {
			return turnInside, 0, err
		}
		if !ok {
			p, err := s.placeAfterGap(ctx, it.ref, cur, id)
			return p, 0, err
		}
		after = next
	}
	return turnInside, 0, nil
}

// placeAfterGap places request id, whose turns followed back end at a gap
// before they meet cur's backlog: inside when the backlog's turns hold
// it, older when it is met following the turns back from the backlog's
// first (at most maxTurns), else after the gap: a later chain than the
// backlog's, delivered after it, as the consumer's path goes on past a
// previous turn with nothing stored (turnOver).
func (s *stage) placeAfterGap(ctx context.Context, ref configRef, cur cursor, id string) (turnPlace, error) {
	path, err := s.walkBacklog(ctx, ref, cur, nil)
	if err != nil {
		return turnInside, err
	}
	if slices.Contains(path, id) {
		return turnInside, nil
	}
	seen := map[string]bool{}
	for at := cur.first(); !seen[at] && len(seen) < maxTurns; {
		seen[at] = true
		prev, ok, err := s.afterOf(ctx, ref, at)
		switch {
		case err != nil:
			return turnInside, err
		case !ok || prev == "":
			return turnAfterGap, nil
		case prev == id:
			return turnOlder, nil
		}
		at = prev
	}
	return turnAfterGap, nil
}

// chain is the requests it's config has left to handle up to it's
// message's, in turn order, that cur's backlog does not hold (its ends):
// the message's request and the turns before it (E2A-After-Request) back
// to the cursor's request (kept unless its final frame is handled), an
// end of the backlog, or a turn with nothing stored for the config (all
// of it before the config was made, or before the cursor, as the
// stream's leader confirms).
func (s *stage) chain(ctx context.Context, it item, cur cursor) ([]string, error) {
	m := it.job.m
	var ids []string
	id, after := m.requestID, m.after
	for range maxTurns {
		if cur.holds(id) || slices.Contains(ids, id) {
			break // a backlog's turn, or a cycle (a request id taken again)
		}
		if id == cur.Request {
			if !cur.Final {
				ids = append(ids, id)
			}
			break
		}
		ids = append(ids, id)
		if after == "" {
			break
		}
		if after != cur.Request && !cur.holds(after) {
			// The leader confirms a turn has nothing after the cursor
			// before the chain stops there (storedAfter).
			more, err := s.storedAfter(ctx, after, max(it.cfg.From, cur.Seq))
			if err != nil {
				return nil, err
			}
			if !more {
				break
			}
		}
		next, _, err := s.afterOf(ctx, it.ref, after)
		if err != nil {
			return nil, err
		}
		id, after = after, next
	}
	slices.Reverse(ids)
	return ids, nil
}

// afterOf is the previous turn of request id, a turn of ref's task ("":
// the task's first turn). Not ok: id is no turn of the task its envelope
// can tell, so the task's turns followed back end there (a gap): its
// envelope is gone (aged out, or never stored: a turn ingress left in
// the task's record unpublished), names no task, or names another
// principal or task (a request id taken again once its request aged out
// of the hot streams: its turns are another tenant's).
func (s *stage) afterOf(ctx context.Context, ref configRef, id string) (prev string, ok bool, err error) {
	env, h, err := s.envelope(ctx, id)
	if err != nil || !owns(ref.principal, ref.taskID, env) {
		return "", false, err
	}
	return h.Get(subjects.HeaderAfterRequest), true, nil
}

// owns reports whether env is a request of principal's task taskID: its
// own, or another principal's turn of principal's conversation (an
// admin's answer: e2a.Envelope.Owner).
func owns(principal, taskID string, env *e2a.Envelope) bool {
	return env != nil && env.TaskID != "" && env.TaskID == taskID && (env.UserID == principal || env.Owner() == principal)
}

func (s *stage) putWake(ref configRef) error {
	b, err := json.Marshal(wakeRef{Principal: ref.principal, TaskID: ref.taskID, ConfigID: ref.id})
	if err != nil {
		return err
	}
	_, err = s.kv.Put(s.ctx, ref.wakeKey(), b)
	return err
}

// casCursor writes c over base, read or written at rev. When the cursor
// changed meanwhile by messages handed to the parked config only (its
// Backlog and Tail), c takes them and is written again, after casBackoff:
// a hand-off does not undo the delivery that moves the cursor.
func (s *stage) casCursor(it item, base cursor, c *cursor, rev uint64) (uint64, error) {
	key := it.ref.cursorKey()
	for attempt := range 8 {
		r, err := s.putCursor(it, *c, rev)
		if !errors.Is(err, errMoved) {
			return r, err
		}
		if err := casBackoff(s.ctx, attempt+1); err != nil {
			return 0, err
		}
		now, nrev, err := readCursor(s.ctx, s.kv, key)
		if err != nil {
			return 0, err
		}
		now, ok := now.forConfig(it.cfg).inStream(s.epochAt(it.job.epoch))
		if !ok || !samePosition(now, base) {
			return 0, errMoved
		}
		// c's Settle is its own (none, on a lane's path, whose cursor was
		// read before the park): its write clears the park's, and the
		// drain waiting for it goes on.
		c.Backlog, c.Tail, c.Ends = now.Backlog, now.Tail, now.Ends
		base, rev = now, nrev
	}
	return 0, errMoved
}

// samePosition reports whether a and b differ in their backlog at most.
func samePosition(a, b cursor) bool {
	a.Backlog, a.Tail, a.Ends, a.Settle, b.Backlog, b.Tail, b.Ends, b.Settle = nil, 0, nil, 0, nil, 0, nil, 0
	ja, err := json.Marshal(a)
	if err != nil {
		return false
	}
	jb, err := json.Marshal(b)
	return err == nil && bytes.Equal(ja, jb)
}

// drainWake drains it's config and settles its wake-up: done when the
// config is no longer parked (or gone: its key is deleted, unless a newer
// wake-up replaced it), else looked at again after its webhook's backoff
// (wakeLater).
func (s *stage) drainWake(it item) {
	defer s.jobs.Done()
	stop := keepInProgress(it.wake, s.o.ackWait/3)
	r, err := s.drain(it.ref)
	stop()
	switch {
	case s.ctx.Err() != nil:
		_ = it.wake.Nak()
	case unwritable(err):
		// Its state cannot be written past an update: drained again, the
		// same update would be posted again and again (the cursor never
		// moves). As on the consumer's path (stateFailed), the config is
		// skipped: its backlog left is dropped.
		s.dropBacklog(it.ref, err)
		s.settleWake(it)
	case err != nil:
		if errors.Is(err, errOtherStream) {
			err = errors.Join(err, s.refreshEpoch(s.ctx))
		}
		s.log.Warn("push: cannot drain a parked config; retrying", "err", err)
		s.wakeLater(it, s.o.orderWait)
	case r.retry:
		s.wakeLater(it, max(r.after, time.Millisecond))
	default:
		s.settleWake(it)
	}
}

// settleWake deletes it's wake-up key (unless a newer wake-up replaced
// it) and acks it.
func (s *stage) settleWake(it item) {
	if md, err := it.wake.Metadata(); err == nil {
		_ = s.kv.Delete(s.ctx, it.ref.wakeKey(), jetstream.LastRevision(md.Sequence.Stream))
	}
	_ = it.wake.Ack()
}

// dropBacklog un-parks ref's config whose cursor cannot be written (err):
// the updates its backlog has left are skipped, an error logged and
// counted (e2a_push_skipped_total). The cursor keeps its position; it
// is written without its backlog, or, that too unwritable, with its
// position only (no event id). Messages handed to the config afterwards
// go the consumer's path.
func (s *stage) dropBacklog(ref configRef, err error) {
	s.metrics.skipped.Inc()
	key := ref.cursorKey()
	for range 4 {
		cur, rev, rerr := readCursor(s.ctx, s.kv, key)
		if rerr != nil || !cur.parked() {
			break
		}
		s.log.Error("push: a parked config's delivery state cannot be written; the updates it has left are skipped",
			"config", ref.id, "principal", ref.principal, "task_id", ref.taskID, "first_request_id", cur.first(),
			"last_request_id", cur.last(), "err", err)
		cur.Backlog, cur.Tail, cur.Ends = nil, 0, nil
		_, werr := writeCursor(s.ctx, s.kv, key, cur, rev)
		if unwritable(werr) {
			cur.EventID = ""
			_, werr = writeCursor(s.ctx, s.kv, key, cur, rev)
		}
		if !errors.Is(werr, errMoved) {
			if werr != nil {
				s.log.Error("push: cannot un-park a config whose delivery state cannot be written", "config", ref.id,
					"principal", ref.principal, "task_id", ref.taskID, "err", werr)
			}
			return
		}
	}
}

// wakeLater has it's wake-up delivered again after delay. E2A_PUSH's keys
// age out after TasksTTL without a write, the wake-up's with them, while
// its config may stay parked for the whole retry window: a wake-up is
// nak'd for at most a third of the TTL, and one older than that is
// written again (the new one delivered at once, looked at, and nak'd
// for the rest of the backoff) and the old one acked.
func (s *stage) wakeLater(it item, delay time.Duration) {
	ttl := s.o.streams.TasksTTL
	if ttl <= 0 {
		_ = it.wake.NakWithDelay(delay)
		return
	}
	if md, err := it.wake.Metadata(); err == nil && time.Since(md.Timestamp) >= ttl/3 {
		if err := s.putWake(it.ref); err == nil {
			_ = it.wake.Ack()
			return
		}
	}
	_ = it.wake.NakWithDelay(min(delay, ttl/3))
}

// keepInProgress extends msg's ack wait every period until stopped.
func keepInProgress(msg jetstream.Msg, every time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

// drainer is a drain's own state: its config and mappers (the consumer
// callback's s.mappers are not shared).
type drainer struct {
	cfg     Config // its From as a sequence of the stream at epoch (fromIn)
	ref     configRef
	epoch   int64 // the E2A_RESPONSES the drain reads (stage.epoch)
	tasks   bool
	mappers map[string]*mapState
	reqs    map[string]*request
	// path is the backlog's turns in order (backlogPath), for the
	// backlog's chains ends; after each turn's previous one as its
	// envelope says (memo of afterOf).
	path  []string
	ends  []string
	after map[string]prevTurn
}

// prevTurn is an answer of afterOf.
type prevTurn struct {
	prev string
	ok   bool
}

// drain delivers ref's parked config's backlog, in order, from its
// cursor: retry when its webhook fails (the cursor records the backoff)
// or it must wait for its next attempt; done when it is not parked any
// more, or the config is gone.
func (s *stage) drain(ref configRef) (result, error) {
	tc, _, err := readConfigs(s.ctx, s.kv, taskKey(ref.principal, ref.taskID), s.o.sealer)
	if err != nil {
		return result{}, err
	}
	i := slices.IndexFunc(tc.Configs, func(c Config) bool { return c.ID == ref.id })
	if i < 0 {
		return result{}, nil
	}
	d := &drainer{cfg: tc.Configs[i], ref: ref, epoch: s.epoch.Load(), mappers: map[string]*mapState{}, reqs: map[string]*request{},
		after: map[string]prevTurn{},
		tasks: slices.ContainsFunc(tc.Configs, func(c Config) bool { return c.Version == V03 })}
	if d.cfg.Stream > d.epoch && d.epoch != 0 {
		return result{}, errOtherStream
	}
	d.cfg.From = d.cfg.fromIn(s.epochAt(d.epoch))
	for s.ctx.Err() == nil {
		cur, rev, err := readCursor(s.ctx, s.kv, ref.cursorKey())
		if err != nil {
			return result{}, err
		}
		cur, ok := cur.forConfig(d.cfg).inStream(s.epochAt(d.epoch))
		if !ok {
			return result{}, errOtherStream
		}
		if !cur.parked() {
			return result{}, nil
		}
		if wait := time.Until(cur.NextAttempt); wait > 0 && !cur.Dead {
			return result{retry: true, after: wait}, nil
		}
		if wait := time.Until(time.Unix(0, cur.Settle)); cur.Settle != 0 && wait > 0 && !s.lanesDone(d, cur) {
			// A lane's POST begun before the park may be in flight: looked
			// at again after the order wait, as a message that is not its
			// config's next one. (Not woken by a new wake-up: the one
			// nak'd would then drain beside it.)
			return result{retry: true, after: min(wait, s.o.orderWait)}, nil
		}
		cur.Settle = 0
		if wait := cur.postsElsewhere(s.id); wait > 0 {
			// A lane of another replica posts the config's next update
			// from a message both replicas held (Poster).
			return result{retry: true, after: min(wait, s.o.orderWait)}, nil
		}
		if wait := time.Until(time.Unix(0, cur.DrainUntil)); cur.Drainer != "" && cur.Drainer != s.id && wait > 0 {
			// Another replica drains it (a second wake-up of the config).
			return result{retry: true, after: min(wait, s.o.orderWait)}, nil
		}
		if cur.Drainer != s.id {
			cur.Drainer, cur.DrainUntil = s.id, s.drainLease()
			nrev, err := writeCursor(s.ctx, s.kv, ref.cursorKey(), cur, rev)
			if errors.Is(err, errMoved) {
				continue
			}
			if err != nil {
				return result{}, err
			}
			rev = nrev
		}
		r, finished, err := s.drainStep(d, cur, rev)
		if errors.Is(err, errMoved) {
			// The cursor moved under the drain: another replica, or
			// Store.Delete (the config removed, then its cursor). The
			// config read above is confirmed before the next step posts
			// (configured: read then only, not at every step; a cursor
			// deleted with its config is found not parked above).
			if ok, err := s.configured(ref, d.cfg); err != nil || !ok {
				return result{}, err
			}
			continue
		}
		if errors.Is(err, errGone) {
			return result{}, nil
		}
		if err != nil || r.retry || finished {
			return r, err
		}
	}
	return result{retry: true}, nil
}

// drainStep handles the next message of the backlog's first request, or,
// when it has none stored, takes the request off the backlog: its next
// turn becomes the first (finished: it was the last, the config is no
// longer parked).
func (s *stage) drainStep(d *drainer, cur cursor, rev uint64) (result, bool, error) {
	path, err := s.backlogPath(d, cur)
	if err != nil {
		return result{}, false, err
	}
	id := path[0]
	raw, start, found, err := s.nextOf(d.cfg, cur, id)
	if err != nil {
		return result{}, false, err
	}
	var m *message
	if found {
		if m, found, err = s.drainMessage(d, id, raw); err != nil {
			return result{}, false, err
		}
	}
	if found {
		r, err := s.deliverFrom(item{job: &job{m: m, header: raw.Header, epoch: d.epoch}, cfg: d.cfg, ref: d.ref}, cur, rev, start)
		return r, false, err
	}
	// Nothing of the request is left: the next turn goes on (the rest of
	// a turn that has a next one will never come), or, with none, the
	// config is not parked any more.
	next := cur
	next.Backlog, next.Tail, next.Ends, next.Drainer, next.DrainUntil = nil, 0, nil, "", 0
	if len(path) > 1 {
		next.Drainer, next.DrainUntil = cur.Drainer, cur.DrainUntil
		next.Backlog, next.Tail = backlog(path[1], cur.last()), cur.Tail
		for _, end := range cur.Ends {
			if slices.Contains(path[1:], end) {
				next.Ends = append(next.Ends, end)
			}
		}
	}
	if _, err := writeCursor(s.ctx, s.kv, d.ref.cursorKey(), next, rev); err != nil {
		return result{}, false, err
	}
	if next.parked() {
		return result{}, false, nil
	}
	// Its wake-up key is deleted by drainWake, unless a new one was
	// written meanwhile (parked again).
	return result{}, true, nil
}

// backlogPath is the parked config's turns left, in turn order
// (walkBacklog). The drain keeps the path while the backlog's last and
// chains stay (a pop moves its first along it) and reads each turn's
// envelope once.
func (s *stage) backlogPath(d *drainer, cur cursor) ([]string, error) {
	first, last := cur.first(), cur.last()
	if n := len(d.path); n > 0 && d.path[n-1] == last && slices.Equal(d.ends, cur.Ends) {
		if i := slices.Index(d.path, first); i >= 0 {
			d.path = d.path[i:]
			return d.path, nil
		}
	}
	path, err := s.walkBacklog(s.ctx, d.ref, cur, d.after)
	if err != nil {
		return nil, err
	}
	if len(path) >= maxBacklogTurns {
		s.log.Warn("push: a parked config's backlog is longer than the turns followed; the older ones are skipped",
			"config", d.cfg.String(), "turns", maxBacklogTurns)
	}
	d.path, d.ends = path, slices.Clone(cur.Ends)
	return path, nil
}

// walkBacklog is cur's backlog's turns, in turn order: its first turn,
// then each of its chains (Ends, then its last) followed back
// (E2A-After-Request) to the backlog's first, to the previous chain's
// last, to the task's first turn or to a gap (afterOf). Each turn comes
// once (a request id taken again cannot make a cycle), at most
// maxBacklogTurns (the older ones of a longer backlog, but its first,
// are skipped). A first turn the walk does not meet (a gap between it and
// the chains) is still the first: delivered, or taken off when nothing
// of it is stored (nextOf, drainMessage). memo (nil: none) keeps
// afterOf's answers.
func (s *stage) walkBacklog(ctx context.Context, ref configRef, cur cursor, memo map[string]prevTurn) ([]string, error) {
	first := cur.first()
	ends := append(slices.Clone(cur.Ends), cur.last())
	seen := map[string]bool{first: true}
	var back []string
	for k := len(ends) - 1; k >= 0; k-- {
		for id := ends[k]; !seen[id] && len(back) < maxBacklogTurns-1; {
			seen[id] = true
			back = append(back, id)
			p, ok := memo[id]
			if !ok {
				var err error
				if p.prev, p.ok, err = s.afterOf(ctx, ref, id); err != nil {
					return nil, err
				}
				if memo != nil {
					memo[id] = p
				}
			}
			if !p.ok || p.prev == "" || slices.Contains(ends[:k], p.prev) {
				break
			}
			id = p.prev
		}
	}
	back = append(back, first)
	slices.Reverse(back)
	return back, nil
}

// nextOf is the config's next stored message of request id after cur,
// and the index of its first update left.
func (s *stage) nextOf(cfg Config, cur cursor, id string) (streams.RawMsg, int, bool, error) {
	subj, err := subjects.Response(id)
	if err != nil {
		return streams.RawMsg{}, 0, false, nil // not a request id: nothing of it is stored
	}
	from, start := max(cfg.From, cur.Seq)+1, 0
	if cur.Request == id && !cur.Done {
		from, start = cur.Seq, cur.Event+1
	}
	page, _, err := streams.DirectGetBatch(s.ctx, s.nc, streams.ResponsesStream, subj, from, 1)
	if errors.Is(err, streams.ErrNoMessages) {
		// A direct get may be answered by a replica behind the stream's
		// leader: the request's end is confirmed by the leader before the
		// request leaves the backlog, or a message handed off (and acked)
		// would be skipped.
		last, err := streams.LeaderLastBySubject(s.ctx, s.nc, streams.ResponsesStream, subj)
		switch {
		case errors.Is(err, streams.ErrNoMessages):
			return streams.RawMsg{}, 0, false, nil
		case err != nil:
			return streams.RawMsg{}, 0, false, err
		case last.Seq >= from:
			return streams.RawMsg{}, 0, false, fmt.Errorf("%w for %s; again", errBehind, id)
		}
		return streams.RawMsg{}, 0, false, nil
	}
	if err != nil {
		return streams.RawMsg{}, 0, false, err
	}
	if page[0].Seq != from {
		start = 0
	}
	return page[0], start, true, nil
}

// drainMessage is stored message raw of request id rendered as prepare
// renders it (from the stage's cache when the consumer rendered it; else
// with the drain's own mappers, caught up from the request's earlier
// messages). Not found: the request is not one of the config's task (its
// envelope is gone, or names another principal or task).
func (s *stage) drainMessage(d *drainer, id string, raw streams.RawMsg) (*message, bool, error) {
	r := d.reqs[id]
	if r == nil {
		env, h, err := s.envelope(s.ctx, id)
		if err != nil {
			return nil, false, err
		}
		r = requestFrom(env, h)
		d.reqs[id] = r
	}
	if !r.found || !r.ownedBy(d.ref.principal) || r.taskID != d.ref.taskID {
		return nil, false, nil
	}
	if m := s.rendered.get(raw.Seq, id, raw.Time, d.tasks); m != nil {
		return m, true, nil
	}
	fs, err := frames(raw.Header, raw.Data)
	if err != nil || len(fs) == 0 {
		return &message{requestID: id, after: r.after, seq: raw.Seq, firstSeq: undecodableFirst(raw.Header), stored: raw.Time}, true, nil
	}
	m := &message{requestID: id, after: r.after, seq: raw.Seq, firstSeq: fs[0].Sequence, final: fs[len(fs)-1].IsFinal, stored: raw.Time}
	if err := s.render(s.ctx, d.mappers, r, m, fs, d.tasks); err != nil {
		delete(d.mappers, id)
		return nil, false, err
	}
	return m, true, nil
}
