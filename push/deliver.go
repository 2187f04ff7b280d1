package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/retryafter"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Headers of a delivery.
const (
	// HeaderEventID is the stable id of the update: the same on every
	// attempt and redelivery, so a receiver can drop duplicates.
	HeaderEventID = "E2A-Event-Id"
	// HeaderTokenV1 and HeaderTokenV03 carry the config's token: a v0.3
	// config's in HeaderTokenV03, a v1.0 config's in both (a2a-go/v2's
	// sender uses HeaderTokenV1; a2a-python 1.x's, @a2a-js/sdk 1.0's and
	// a2a-java's HeaderTokenV03, which their receivers read).
	HeaderTokenV1  = "A2A-Notification-Token"
	HeaderTokenV03 = "X-A2A-Notification-Token"
)

// cursor is a config's delivery position, in the bucket under its
// cursorKey: every update up to event Event of the message at stream
// sequence Seq (of request Request) is handled (delivered or
// dead-lettered).
type cursor struct {
	Request string `json:"request,omitempty"`
	Seq     uint64 `json:"seq,omitempty"`
	// At is the time the message at Seq was stored (Unix nanoseconds; 0:
	// not known, written before cursors had it): a message stored later at
	// a sequence not after Seq says the stream went back under the cursor
	// (wentBack).
	At    int64 `json:"at,omitempty"`
	Event int   `json:"event"`
	// EventID is the E2A-Event-Id of the last update handled (shown by
	// the console). Stored as EventAt, its part after Request and a
	// colon, when it has Request's id (always, as the stage writes it): a
	// request id of up to subjects.MaxIDLength is not stored twice.
	EventID string `json:"event_id,omitempty"`
	EventAt string `json:"event_at,omitempty"`
	// Done: every update of the message at Seq is handled.
	Done bool `json:"done,omitempty"`
	// Final: Done, and that message held its request's final frame.
	Final bool `json:"final,omitempty"`
	// Dead: an update was dead-lettered at the end of its retry window;
	// the next ones go to the dead-letter stream too, in order, until a
	// redelivery empties it.
	Dead         bool      `json:"dead,omitempty"`
	FailingSince time.Time `json:"failing_since,omitzero"`
	Attempts     int       `json:"attempts,omitempty"`
	NextAttempt  time.Time `json:"next_attempt,omitzero"`
	// Gen is the config the cursor was written for: its Created time
	// (Unix nanoseconds). See forConfig.
	Gen int64 `json:"gen,omitempty"`
	// Stream is the E2A_RESPONSES whose sequences Seq and Tail are: its
	// creation time (Unix nanoseconds), as Config.Stream. See inStream.
	Stream int64 `json:"stream,omitempty"`
	// Backlog, when set, says the config is parked (park.go): the first
	// and the last of the requests (the task's turns) whose messages
	// after the position above are left to handle, one when they are the
	// same; the turns between them are found by following
	// E2A-After-Request back from the last (backlogPath). The config's
	// wake-up drains them in turn order, reading the messages back from
	// E2A_RESPONSES. Two ids at most, whatever the number of turns parked
	// (and one more per gap, Ends: at most maxBacklogGaps), so a cursor
	// stays a few KiB (request ids are at most subjects.MaxIDLength).
	// (Earlier versions listed every turn: such a list is read as its
	// first and last.) Tail is the largest stream sequence handed to the
	// parked config.
	Backlog []string `json:"backlog,omitempty"`
	Tail    uint64   `json:"tail,omitempty"`
	// Settle, set when a config is parked with a message that is not the
	// one its position waits for (Unix nanoseconds), is when a
	// POST that a lane of any replica began before the park, from the
	// cursor not yet parked (its webhook's answer awaited, or its next
	// message queued), has surely ended: its message's last POST timed
	// out (WithTimeout). Until then the drain does not post (it looks
	// again after the order wait), so that it does not post again an
	// update in flight elsewhere; the lane that posted clears it when it
	// writes its position (casCursor), and so does the message the cursor
	// waits for when it comes to a lane and finds the config parked
	// (handOff): no POST of it is in flight then. The drain goes on before
	// it too once the stage's consumer has acked every message a lane may
	// be posting from the position (lanesDone): so when the awaited
	// message never comes to a lane (deleted or aged out before its
	// delivery).
	Settle int64 `json:"settle,omitempty"`
	// Drainer is the replica (stage.id) that drains the parked config,
	// until DrainUntil (Unix nanoseconds): written when its drain begins
	// and again, a POST timeout ahead, after each update it handles. A
	// wake-up taken by another replica meanwhile (a config parked again,
	// or its wake-up written again, has two) waits for it, so that two
	// drains do not post the same update side by side.
	Drainer    string `json:"drainer,omitempty"`
	DrainUntil int64  `json:"drain_until,omitempty"`
	// Poster is the replica (stage.id) whose lane posts the config's next
	// update from a message another replica may hold too (job.shared: a
	// redelivery, or a delivery the consumer may have redelivered before
	// its holder kept it in progress), until PostUntil (Unix nanoseconds,
	// a POST timeout and settleMargin ahead): written before that POST,
	// cleared by the write after it (advance, outcome). Another replica's
	// lane or drain does not post while it holds (postsElsewhere): two
	// live replicas holding one message do not both post its update.
	Poster    string `json:"poster,omitempty"`
	PostUntil int64  `json:"post_until,omitempty"`
	// Ends, when the backlog's turns are not one chain (a turn handed to
	// the parked config follows a gap: a turn never stored, or no longer:
	// placeAfterGap), are the last turns of its chains before the one
	// ending at the backlog's last, in order; each chain after the first
	// starts after a gap. At most maxBacklogGaps.
	Ends []string `json:"ends,omitempty"`
}

// holds reports whether id is one of the turns the parked cursor names.
func (c cursor) holds(id string) bool {
	return slices.Contains(c.Backlog, id) || slices.Contains(c.Ends, id)
}

// parked reports whether the config is parked.
func (c cursor) parked() bool { return len(c.Backlog) > 0 }

// postsElsewhere is how long another replica than id (stage.id) holds
// the config's next POST (Poster), 0 when none does.
func (c cursor) postsElsewhere(id string) time.Duration {
	if c.Poster == "" || c.Poster == id {
		return 0
	}
	return max(time.Until(time.Unix(0, c.PostUntil)), 0)
}

// first and last are the first and the last turn of a parked config's
// backlog.
func (c cursor) first() string { return c.Backlog[0] }
func (c cursor) last() string  { return c.Backlog[len(c.Backlog)-1] }

// backlog is the Backlog of the turns first to last.
func backlog(first, last string) []string {
	if first == last {
		return []string{first}
	}
	return []string{first, last}
}

// forConfig is cur as cfg's cursor. A cursor written for an earlier
// config of the same id, replaced since (A2A's set) or deleted and made
// again while a delivery of the old one was in flight, is no position of
// cfg's: cfg starts with an empty cursor (its From decides what it gets),
// none of the old one's failures, backoff or dead-letter mode. A cursor
// written before cursors named their config (Gen 0) is taken as cfg's.
func (c cursor) forConfig(cfg Config) cursor {
	gen := cfg.Created.UnixNano()
	if c.Gen != 0 && c.Gen != gen {
		return cursor{Event: -1, Gen: gen}
	}
	c.Gen = gen
	return c
}

// errOtherStream: a config or cursor names a newer E2A_RESPONSES than
// the one the stage took the message from (it has not seen the stream
// made again yet, or the message is of the stream removed): looked at
// again once the stage reads the newer one (stage.refreshEpoch).
var errOtherStream = errors.New("push: the config's position is in a newer " + streams.ResponsesStream)

// inStream is cur as a position in the E2A_RESPONSES e (its epoch 0:
// not known), the stream of the message looked at. A position in an
// older stream (made again since: its sequences start at 1 again) is
// none in this one: the config starts again, as after a delivery
// stopped (its turn's rest and its backlog went with the old stream's
// messages), keeping its dead-letter mode, whose updates are in
// E2A_PUSH_DEAD; unless e is that stream restored from a backup
// (restoredIn). In e gone back under it (a message it lost: e.lost), it
// is at the restore point as in a restored stream. Not ok: cur is of a
// newer stream (errOtherStream). A cursor written before cursors named
// their stream (Stream 0) is taken as the stream's.
func (c cursor) inStream(e streamEpoch) (cursor, bool) {
	switch {
	case e.at == 0:
		return c, true
	case c.Stream > e.at:
		return c, false
	case c.Stream != 0 && c.Stream < e.at && e.holds(c.Stream):
		return c.restoredIn(e), true
	case c.Stream != 0 && c.Stream < e.at:
		return cursor{Event: -1, Gen: c.Gen, Stream: e.at, Dead: c.Dead}, true
	case e.lost(c.Seq, c.At):
		return c.restoredIn(streamEpoch{at: e.at, restored: e.rewound}), true
	}
	c.Stream = e.at
	return c, true
}

// restoredIn is c, a position in the stream e was restored from a backup
// of, as a position in e: the same where the backup holds it (its
// messages are the stream's, at the same sequences). A position past the
// backup's last message (written after the backup) is at the restore
// point, done: every restored message was handled, and its request's
// messages stored after the restore (and its backlog's, parked) are the
// config's next ones (the time of the message at the restore point is
// not known: At 0).
func (c cursor) restoredIn(e streamEpoch) cursor {
	c.Stream, c.Tail = e.at, min(c.Tail, e.restored)
	if c.Seq > e.restored {
		c.Seq, c.At, c.Final, c.Done = e.restored, 0, c.Done && c.Final, true
	}
	return c
}

func readCursor(ctx context.Context, kv jetstream.KeyValue, key string) (cursor, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return cursor{Event: -1}, 0, nil
	}
	if err != nil {
		return cursor{}, 0, err
	}
	var c cursor
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return cursor{Event: -1}, e.Revision(), nil
	}
	if c.EventAt != "" {
		c.EventID, c.EventAt = c.Request+":"+c.EventAt, ""
	}
	return c, e.Revision(), nil
}

// errMoved: another replica changed the cursor first.
var errMoved = errors.New("push: cursor moved")

func writeCursor(ctx context.Context, kv jetstream.KeyValue, key string, c cursor, rev uint64) (uint64, error) {
	if at, ok := strings.CutPrefix(c.EventID, c.Request+":"); ok && c.Request != "" && at != "" {
		c.EventID, c.EventAt = "", at
	}
	b, err := json.Marshal(c)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		rev, err = kv.Create(ctx, key, b)
	} else {
		rev, err = kv.Update(ctx, key, b, rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, errMoved
	}
	return rev, err
}

// errGone: the item's config is no longer its task's config of its id
// (deleted, or set again since): its message is done with for it,
// neither delivered nor its cursor written.
var errGone = errors.New("push: config deleted or replaced")

// configured reports whether cfg is still ref's config as stored: its id
// among the task's configs, made at cfg.Created (not a config set again
// under the id since). One KV get of the task's configs.
//
// It is read when a cursor is missing or another config's (tryItem),
// when a cursor is created (putCursor) and when a drain's cursor moved
// under it (drain), not before every POST: Store.Delete removes the
// config, then its cursor, so a message of a deleted config finds the
// cursor missing, or its compare-and-set fails. A POST in flight when the
// config is deleted (or one whose cursor was read just before) may
// complete; none starts after that. A config set again with another
// target whose cursor the new config has not written yet is not seen
// until then: the old target may get the messages already handed to its
// lane (at most maxLaneQueue+1), as before the set.
func (s *stage) configured(ref configRef, cfg Config) (bool, error) {
	tc, _, err := readConfigs(s.ctx, s.kv, taskKey(ref.principal, ref.taskID), s.o.sealer)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(tc.Configs, func(c Config) bool { return c.ID == ref.id })
	return i >= 0 && tc.Configs[i].Created.Equal(cfg.Created), nil
}

// putCursor writes it's config's cursor c at rev. One created (rev 0: a
// first delivery, or a first park) is checked to be an existing config's
// once written, and deleted again (errGone) when it is not: kv.Create
// succeeds over the delete marker Store.Delete leaves, and Store.Delete
// removes the config before the cursor, so a cursor created after that
// delete sees the config gone, and one created before is deleted by it.
func (s *stage) putCursor(it item, c cursor, rev uint64) (uint64, error) {
	key := it.ref.cursorKey()
	r, err := writeCursor(s.ctx, s.kv, key, c, rev)
	if err != nil || rev != 0 {
		return r, err
	}
	ok, err := s.configured(it.ref, it.cfg)
	if err != nil || ok {
		return r, err
	}
	_ = s.kv.Delete(s.ctx, key, jetstream.LastRevision(r))
	return 0, errGone
}

// deliverItem delivers one message's updates to one config, as far as it
// can: done, or retry after a delay (its webhook failed, or an earlier
// message of the config is not handled yet).
func (s *stage) deliverItem(it item) result {
	for range 4 {
		r, err := s.tryItem(it)
		if err == nil && r.retry && s.ctx.Err() == nil {
			// Not now: the config is parked, so that the message is done
			// with and the consumer is not held (park.go).
			r, err = s.park(it)
		}
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

// stateFailed is the verdict on a message whose config's state could not
// be read or written (err): looked at again after the order wait, unless
// the state cannot be written at all (unwritable): then the message is
// done for the config, an error logged, so that it is not nak'd for ever
// and does not hold the consumer's MaxAckPending from the other tenants.
// (A cursor is bounded, a few KiB: see cursor, so this takes a server
// whose max_payload is below that.)
func (s *stage) stateFailed(it item, err error) result {
	switch {
	case s.ctx.Err() != nil:
	case unwritable(err):
		s.metrics.skipped.Inc()
		s.log.Error("push: delivery state cannot be written; the update is skipped for the config", "config", it.cfg.String(),
			"request_id", it.job.m.requestID, "seq", it.job.m.seq, "err", err)
		return result{}
	case errors.Is(err, errBehind):
		s.log.Debug("push: a replica behind answered; retrying", "config", it.cfg.String(), "err", err)
	case errors.Is(err, errOtherStream):
		err = errors.Join(err, s.refreshEpoch(s.ctx))
		s.log.Warn("push: delivery state of a newer stream; retrying", "config", it.cfg.String(), "err", err)
	default:
		s.log.Warn("push: delivery state unavailable; retrying", "config", it.cfg.String(), "err", err)
	}
	return result{retry: true, after: s.o.orderWait}
}

// unwritable reports whether err says a write can never succeed: the
// message is over the server's max_payload or the stream's largest
// message.
func unwritable(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrMaxPayload) ||
		errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
}

func (s *stage) tryItem(it item) (result, error) {
	ctx := s.ctx
	m := it.job.m
	key := it.ref.cursorKey()
	cur, rev, err := readCursor(ctx, s.kv, key)
	if err != nil {
		return result{}, err
	}
	if rev == 0 || (cur.Gen != 0 && cur.Gen != it.cfg.Created.UnixNano()) {
		// it.cfg was read when the message came (prepare), maybe a POST
		// ago: the cursor missing (never written, or deleted with its
		// config by Store.Delete) or another config's (the id set again)
		// is when it may be gone. Read only then: one KV get at a config's
		// first delivery and after a delete or replace, none per POST in
		// the steady state (see configured).
		if ok, err := s.configured(it.ref, it.cfg); err != nil || !ok {
			return result{}, err
		}
	}
	if cur, rev, err = s.position(it, cur, rev); err != nil {
		return result{}, err
	}
	if cur.parked() {
		return s.handOff(it, cur, rev)
	}
	start := 0
	switch {
	case m.seq < cur.Seq || (m.seq == cur.Seq && cur.Done):
		return result{}, nil // handled already
	case m.seq == cur.Seq:
		start = cur.Event + 1
	case m.seq <= it.cfg.From:
		return result{}, nil // stored before the config
	default:
		ok, err := s.isNext(ctx, it, cur)
		if err != nil {
			return result{}, err
		}
		if !ok {
			// An earlier message is in flight or backing off: look again
			// when it may be done.
			return result{retry: true, after: max(s.o.orderWait, time.Until(cur.NextAttempt))}, nil
		}
	}
	if wait := cur.postsElsewhere(s.id); wait > 0 {
		// Another replica posts the update from its copy of this message
		// (redelivered while held): handed to the config's backlog, for
		// the drain once that POST is over.
		return result{retry: true, after: min(wait, s.o.orderWait)}, nil
	}
	if wait := time.Until(cur.NextAttempt); wait > 0 && !cur.Dead {
		return result{retry: true, after: wait}, nil
	}
	return s.deliverFrom(it, cur, rev, start)
}

// isNext reports whether the item's message is the next one of its
// config after cur. Within a request: its next stored message after the
// cursor's. The first message of a request (the task's turns are chained
// by E2A-After-Request): when the cursor is on the previous turn and that
// turn is over (its final frame handled, or nothing of it left in the
// stream), or when the cursor is empty and the previous turn (if any) had
// nothing stored after the config was made. A later message of a request
// the cursor is not on (a config made during the request): when the
// request's message before it was stored before the config.
//
// A direct get may be answered by a replica behind the stream's leader
// (a follower, or a MirrorDirect mirror), which holds a prefix of the
// stream: its answers that a message exists are true, its "nothing" may
// not be. Every absence acted on here is confirmed by the leader
// (storedAfter), or met with errBehind (look again) when the message
// itself, stored at m.seq, was not found.
func (s *stage) isNext(ctx context.Context, it item, cur cursor) (bool, error) {
	m := it.job.m
	subj, err := subjects.Response(m.requestID)
	if err != nil {
		return false, err
	}
	switch {
	case cur.Request == m.requestID:
		if !cur.Done {
			return false, nil
		}
		page, _, err := streams.DirectGetBatch(ctx, s.nc, streams.ResponsesStream, subj, cur.Seq+1, 1)
		if errors.Is(err, streams.ErrNoMessages) {
			return false, errBehind // m itself is stored after cur.Seq
		}
		if err != nil {
			return false, err
		}
		return page[0].Seq == m.seq, nil
	case m.firstSeq > 0:
		// Next when no message of the request lies between the config's
		// start and m: the first one after the start is m (or a later one,
		// from a replica that holds m, hence every message before it).
		page, _, err := streams.DirectGetBatch(ctx, s.nc, streams.ResponsesStream, subj, it.cfg.From+1, 1)
		if errors.Is(err, streams.ErrNoMessages) {
			return false, errBehind
		}
		if err != nil {
			return false, err
		}
		return page[0].Seq >= m.seq, nil
	case m.after == "":
		return cur.Request == "", nil
	case cur.Request == m.after:
		if cur.Final {
			return true, nil
		}
		if !cur.Done {
			return false, nil
		}
		return s.turnOver(ctx, it, cur.Request, cur.Seq)
	case cur.Request == "":
		more, err := s.storedAfter(ctx, m.after, it.cfg.From)
		return err == nil && !more, err
	}
	// The cursor is on an older turn: the previous turn goes first, unless
	// nothing of it is stored.
	return s.turnOver(ctx, it, m.after, 0)
}

// errBehind: a direct get was answered by a replica that does not hold
// yet a message the stream's leader holds; look again.
var errBehind = errors.New("push: a replica of " + streams.ResponsesStream + " answered behind its leader")

// turnOver reports whether request id has no message after stream
// sequence seq: its rest will never come (lost, or gone with
// E2A_RESPONSES' age), so the task's next turn goes on.
func (s *stage) turnOver(ctx context.Context, it item, id string, seq uint64) (bool, error) {
	more, err := s.storedAfter(ctx, id, seq)
	if err != nil || more {
		return false, err
	}
	s.log.Warn("push: the previous turn of the task has no final frame; going on", "config", it.cfg.String(),
		"previous_request_id", id, "request_id", it.job.m.requestID)
	return true, nil
}

// storedAfter reports whether request id has a message stored after
// stream sequence seq. A direct get's yes is taken from whichever replica
// answers it; its no (nothing stored, or a last message at or before seq:
// a replica behind may not hold the later ones yet) is confirmed by the
// stream's leader, so that a turn is never taken for over, or for stored
// before the config, while its rest is stored.
func (s *stage) storedAfter(ctx context.Context, id string, seq uint64) (bool, error) {
	subj, err := subjects.Response(id)
	if err != nil {
		return false, err
	}
	raw, err := streams.LastBySubject(ctx, s.nc, streams.ResponsesStream, subj)
	switch {
	case err == nil && raw.Seq > seq:
		return true, nil
	case err != nil && !errors.Is(err, streams.ErrNoMessages):
		return false, err
	}
	last, err := streams.LeaderLastBySubject(ctx, s.nc, streams.ResponsesStream, subj)
	if errors.Is(err, streams.ErrNoMessages) {
		return false, nil
	}
	return err == nil && last.Seq > seq, err
}

// deliverFrom delivers the message's updates from index start, moving
// the cursor after each.
func (s *stage) deliverFrom(it item, cur cursor, rev uint64, start int) (result, error) {
	m := it.job.m
	base := cur
	lane := !cur.parked() // the consumer's path, not a drain
	advance := func(i int) error {
		cur.Request, cur.Seq, cur.At, cur.Event = m.requestID, m.seq, m.at(), i
		if i >= 0 && i < len(m.events) {
			cur.EventID = m.events[i].id
		}
		cur.Done = i >= len(m.events)-1
		cur.Final = cur.Done && m.final
		cur.FailingSince, cur.Attempts, cur.NextAttempt = time.Time{}, 0, time.Time{}
		cur.Poster, cur.PostUntil = "", 0
		if !lane {
			cur.DrainUntil = s.drainLease()
		}
		var err error
		rev, err = s.casCursor(it, base, &cur, rev)
		base = cur
		return err
	}
	if len(m.events) == 0 || start >= len(m.events) {
		return result{}, advance(len(m.events) - 1)
	}
	for i := start; i < len(m.events); i++ {
		ev := m.events[i]
		if lane && it.job.shared {
			// Another replica may hold this message too: the POST is
			// claimed first (a compare-and-set), so that only one posts.
			claim := cur
			claim.Poster, claim.PostUntil = s.id, s.drainLease()
			r, err := s.putCursor(it, claim, rev)
			if err != nil {
				return result{}, err // moved: the item is looked at again
			}
			cur, base, rev = claim, claim, r
		}
		if cur.Dead {
			if err := s.deadLetter(it, ev, "earlier updates of the config were dead-lettered", 0, cur); err != nil {
				return result{}, err
			}
			if err := advance(i); err != nil {
				return result{}, err
			}
			continue
		}
		ctx, span := deliverySpan(s.ctx, it, ev)
		out := s.post(ctx, it.cfg, ev.id, ev.body(it.cfg.Version))
		endDeliverySpan(span, out)
		if s.ctx.Err() != nil {
			return result{retry: true}, nil
		}
		if r, stop, err := s.outcome(it, ev, base, &cur, rev, out); stop || err != nil {
			return r, err
		}
		if err := advance(i); err != nil {
			return result{}, err
		}
		if lane && cur.parked() {
			// Parked meanwhile (casCursor took its backlog): the rest of
			// the message is the drain's.
			return result{parked: true}, nil
		}
	}
	return result{}, nil
}

// outcome records one attempt: stop with a retry for a transient failure
// within the retry window; otherwise the caller advances past the update
// (delivered, or dead-lettered).
func (s *stage) outcome(it item, ev event, base cursor, cur *cursor, rev uint64, out attempt) (result, bool, error) {
	now := time.Now()
	switch {
	case out.ok:
		s.metrics.delivered.Inc()
		s.metrics.lag.Observe(now.Sub(ev.time).Seconds())
		return result{}, false, nil
	case out.tooLarge:
		s.log.Warn("push: update too large to post; dead-lettered without its body", "config", it.cfg.String(), "event_id", ev.id,
			"reason", out.reason)
		return result{}, false, s.deadLetter(it, ev, out.reason, 0, *cur)
	case out.permanent:
		s.metrics.failed.Inc()
		if out.gone {
			if err := s.unsubscribed(it, ev); err == nil || errors.Is(err, errGone) {
				return result{}, true, errGone
			}
			// Not deleted: refused as another 4xx is; the next update's
			// 410 deletes it.
		}
		s.log.Warn("push: webhook refused an update; dead-lettered", "config", it.cfg.String(), "event_id", ev.id, "status", out.status,
			"reason", out.reason)
		return result{}, false, s.deadLetter(it, ev, out.reason, out.status, *cur)
	}
	s.metrics.failed.Inc()
	if cur.FailingSince.IsZero() {
		cur.FailingSince = now
	}
	cur.Attempts++
	if now.Sub(cur.FailingSince) >= s.o.retryWindow {
		s.log.Warn("push: webhook failing past the retry window; dead-lettering", "config", it.cfg.String(),
			"event_id", ev.id, "attempts", cur.Attempts, "reason", out.reason)
		cur.Dead = true
		return result{}, false, s.deadLetter(it, ev, out.reason, out.status, *cur)
	}
	s.metrics.retried.Inc()
	delay := backoff(s.o.backoffBase, s.o.backoffMax, cur.Attempts, rand.Float64())
	delay = max(delay, out.retryAfter)
	if left := s.o.retryWindow - now.Sub(cur.FailingSince); delay > left {
		delay = left
	}
	cur.NextAttempt = now.Add(delay)
	cur.Poster, cur.PostUntil = "", 0
	if cur.Drainer == s.id {
		// Its drain ends here until the next attempt, which any replica
		// may make.
		cur.Drainer, cur.DrainUntil = "", 0
	}
	if _, err := s.casCursor(it, base, cur, rev); err != nil {
		return result{}, true, err
	}
	return result{retry: true, after: delay}, true, nil
}

// unsubscribed deletes it's config, whose webhook answered ev's POST
// 410 Gone: the receiver says the subscription is gone for good, so no
// update is sent to it any more (REST Hooks' convention). The config is
// deleted as Store.Delete deletes it (the config, then its cursor: every
// replica's lane and drain finds it gone and sends nothing more), only
// when it is still the one that was posted to (not one set again under
// its id since: Store.deleteSent); a config already gone is errGone.
// The update is neither retried nor dead-lettered. Logged with the
// config's host only (Config.String), counted (e2a_push_gone_total).
func (s *stage) unsubscribed(it item, ev event) error {
	err := storeOver(s.js, s.kv, s.o).deleteSent(s.ctx, it.ref, it.cfg)
	switch {
	case err == nil:
		s.metrics.gone.Inc()
		s.log.Warn("push: webhook answered 410 Gone; config deleted", "config", it.cfg.String(), "event_id", ev.id)
		return nil
	case errors.Is(err, ErrNotFound):
		return errGone // deleted or set again meanwhile
	}
	s.log.Warn("push: webhook answered 410 Gone; the config could not be deleted, the update is dead-lettered",
		"config", it.cfg.String(), "event_id", ev.id, "err", err)
	return err
}

// backoff is the delay before attempt n+1 after n failures: base·2^(n-1)
// capped at max, the upper half of it jittered by j in [0,1).
func backoff(base, max time.Duration, n int, j float64) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return d/2 + time.Duration(j*float64(d/2))
}

// attempt is the outcome of one POST.
type attempt struct {
	ok, permanent bool
	// gone: the webhook answered 410 Gone (permanent too): its config is
	// deleted (unsubscribed).
	gone bool
	// tooLarge: not posted, the body is over the limit (WithMaxBody).
	tooLarge   bool
	status     int
	retryAfter time.Duration
	reason     string
}

// post sends one update to cfg's webhook: its token and authentication,
// the event id, no redirect followed, the response body read up to 64 KiB
// within the POST's timeout and dropped. A 2xx is ok; a 3xx or another 4xx than 408 and 429
// permanent, 410 gone too; any other answer or error transient
// (Retry-After read on 429 and 503).
func (s *stage) post(ctx context.Context, cfg Config, eventID string, body []byte) attempt {
	return postUpdate(ctx, s.client, s.o, cfg, eventID, body)
}

func postUpdate(ctx context.Context, client *http.Client, o options, cfg Config, eventID string, body []byte) attempt {
	if len(body) > o.maxBody {
		return attempt{permanent: true, tooLarge: true, reason: tooLarge(len(body), o.maxBody)}
	}
	if _, _, err := o.urls.rules(cfg.URL); err != nil {
		// Stored under an allow-list that named its host (http, any
		// address): this one does not. The connection's check alone
		// refuses a private address only, and sent http to a public one.
		return attempt{permanent: true, reason: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return attempt{permanent: true, reason: "invalid webhook URL"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderEventID, eventID)
	if o.signer != nil {
		req.Header.Set(HeaderSignature, o.signer.Sign(eventID, body))
	}
	if cfg.Token != "" {
		// A2A v1.0 names no token header: a v1.0 config's token goes in
		// both the SDKs' v1.0 senders use (a2a-go/v2's; the Python, JS and
		// Java SDKs', which v0.3's used too), so that a receiver written
		// for any of them finds it.
		req.Header.Set(HeaderTokenV03, cfg.Token)
		if cfg.Version != V03 {
			req.Header.Set(HeaderTokenV1, cfg.Token)
		}
	}
	if cfg.Auth != nil && cfg.Auth.Credentials != "" {
		req.Header.Set("Authorization", cfg.Auth.Scheme+" "+cfg.Auth.Credentials)
	}
	resp, err := client.Do(req)
	if err != nil {
		return attempt{reason: "request failed: " + errorClass(err)}
	}
	// The body's read ends with the POST's timeout too: net/http ends it
	// with ctx for every answer but a 101 Switching Protocols, whose body
	// is the raw connection, read for ever from a receiver that then
	// sends nothing (its config's lane stalled, its messages unacked).
	stop := context.AfterFunc(ctx, func() { _ = resp.Body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	stop()
	_ = resp.Body.Close()
	a := attempt{status: resp.StatusCode, reason: "status " + strconv.Itoa(resp.StatusCode)}
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		a.ok = true
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests:
		a.retryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	case c == http.StatusGone:
		a.permanent, a.gone = true, true
	case c >= 300 && c < 500:
		// A 4xx, and a redirect: it is not followed (it would carry the
		// update and its credentials elsewhere), so no retry delivers it.
		a.permanent = true
	default:
		a.retryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return a
}

// errorClass names a transport failure without the URL (which may hold
// a secret in its query).
func errorClass(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		err = ue.Unwrap()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return err.Error()
}

// retryAfter reads a Retry-After value (internal/retryafter: seconds or
// an HTTP date), 0 when absent or invalid, at most 24 h.
func retryAfter(v string, now time.Time) time.Duration {
	d, _ := retryafter.Parse(v, now)
	return min(d, 24*time.Hour)
}

// httpClient is the client of deliveries: the URL policy's transport, no
// redirects.
func (o options) httpClient() *http.Client {
	return &http.Client{
		Transport: o.urls.transport(min(o.timeout, 10*time.Second)),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
