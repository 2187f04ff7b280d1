package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// cancelWatch lets a pick-up know that no cancel is stored for its request
// without reading E2A_CONTROL (one direct get per request; removing it gave
// 3,076–3,750 against 2,898–3,087 requests/s in four a2a-stream pairs,
// docs/performance.md).
//
// The worker's subscription to every control subject (e2a.ctl.>) records
// the id of each cancel it receives. A cancel can only be sent for a request
// that is already stored (ingress reads its owner first; Cancel's doc asks
// the same of its callers), and
// a core subscription receives every message published after the server
// registered it. So once the subscription is registered (a flush) and the
// requests stream's last sequence read after it (the anchor), every cancel
// of a request stored after the anchor reaches the subscription: for such a
// request the set of recorded ids answers, and only requests stored before
// the anchor (a backlog found at start-up, after a reconnect) read the
// stored cancel as before.
//
// What the subscription can miss makes the anchor invalid until it is read
// again: a reconnect (messages published while disconnected are not
// delivered), a message dropped by the subscription (slow consumer), an id
// evicted from the bounded set; while the connection is down, nothing is
// covered either. While messages wait in the subscription's
// queue, the pick-up reads the stored cancel too. A cancel that reaches the
// process after the check (in flight between servers of a cluster) stops the
// handler as any cancel of a running request does; one the subscription
// missed after the check is read from the store (missed.go).
//
// A cancel received (or stored) well before a request was stored is not
// that request's: it cancelled an earlier request under the same id, whose
// envelope has left E2A_REQUESTS while its cancel stays in E2A_CONTROL (a
// client-chosen id taken again). Each id keeps the time of its latest
// cancel, and a check (checkAt) ignores one older than the request by more
// than margin (stale): nothing more is read for it.
type cancelWatch struct {
	mu    sync.Mutex
	seen  map[string]time.Time // ids of the cancels received: when the latest was (the worker's clock)
	order []string             // seen's ids, oldest first
	limit int                  // at most this many ids kept
	// margin: a cancel older than the request by more than this is stale
	// (staleCancelMargin; tests set less).
	margin time.Duration

	anchor     uint64 // requests stored after this stream sequence are covered
	valid      bool
	reconnects uint64 // the connection's reconnects when the anchor was read
	dropped    int    // the subscription's dropped messages then
	evictions  int    // times ids were forgotten
	anchoring  bool   // a read of the anchor is under way
	lastTry    time.Time

	nc  *nats.Conn
	sub *nats.Subscription
	// read returns the requests stream's last sequence.
	read func(context.Context) (uint64, error)
	now  func() time.Time
	// spawn runs a read of the anchor in the background.
	spawn func(func())
	// bg counts the reads spawned, which stop cancels (bgCtx) and awaits;
	// none is spawned once stopped is set (guarded by mu).
	bg      sync.WaitGroup
	bgCtx   context.Context
	bgStop  context.CancelFunc
	stopped bool
}

// cancelSetLimit bounds the ids a worker remembers; cancels are rare, and
// past it the oldest half is forgotten and the anchor read again.
const cancelSetLimit = 1 << 16

// errAnchorMissed: the subscription may have missed a cancel while the
// anchor was read.
var errAnchorMissed = errors.New("agent: cancels may have been missed while the anchor was read")

// anchorRetry is the least time between two failed reads of the anchor.
const anchorRetry = time.Second

// staleCancelMargin is how much older than a request a cancel of its id
// must be to be ignored as an earlier request's (stale).
//
// Every path stores a cancel once its request is stored (ingress reads the
// request's owner first, or waits until E2A_REQUESTS holds the turn;
// Cancel's doc and the README ask integrators the same), or within a
// publish's time of it: ACP stdio sends the cancel once the prompt's
// publish is sent, and a turn recorded but still in flight may be
// cancelled before it lands (bounded by ingress's publish timeout, 5 s by
// default). A cancel turn is stored before its request but ends cancelled
// whatever its stored cancel (e2a.MethodCancelTurn). The times compared
// come from different clocks: the stored cancel's from E2A_CONTROL's
// leader, the request's from E2A_REQUESTS' (two servers of a cluster), a
// cancel received live from the worker's own clock; the margin absorbs
// their skew and those delays. A stale cancel is far older: the id could be
// taken again only once the earlier request's envelope aged out of
// E2A_REQUESTS (its max age, 24 h by default). A cancel sent in the last
// margin of that envelope's life still counts for a request stored just
// after it.
const staleCancelMargin = time.Minute

func newCancelWatch(limit int) *cancelWatch {
	c := &cancelWatch{seen: map[string]time.Time{}, limit: limit, margin: staleCancelMargin, now: time.Now, spawn: func(f func()) { go f() }}
	c.bgCtx, c.bgStop = context.WithCancel(context.Background())
	return c
}

// stop ends the background read of the anchor under way, if any, and
// waits for it; none starts after (a pick-up then reads its stored cancel).
func (c *cancelWatch) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.bgStop()
	c.bg.Wait()
}

// stale reports whether a cancel at cancelAt (stored, or received) is older
// than a request stored at stored by more than the margin: an earlier
// request's. An unknown time (zero) is never stale.
func (c *cancelWatch) stale(cancelAt, stored time.Time) bool {
	return staleCancel(cancelAt, stored, c.margin)
}

// staleCancel is cancelWatch.stale with margin.
func staleCancel(cancelAt, stored time.Time, margin time.Duration) bool {
	return !cancelAt.IsZero() && !stored.IsZero() && cancelAt.Before(stored.Add(-margin))
}

// record remembers a cancel of id received now.
func (c *cancelWatch) record(id string) {
	c.recordAt(id, c.now())
}

// recordAt remembers a cancel of id received, or stored, at at. An id
// already known keeps the later of the two times.
func (c *cancelWatch) recordAt(id string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.seen[id]; ok {
		if at.After(prev) {
			c.seen[id] = at
		}
		return
	}
	if len(c.order) >= c.limit {
		// A forgotten id may belong to a request still queued: requests
		// stored up to now read the stored cancel again.
		half := len(c.order) / 2
		for _, old := range c.order[:half] {
			delete(c.seen, old)
		}
		c.order = append(c.order[:0], c.order[half:]...)
		c.valid = false
		c.evictions++
	}
	c.seen[id] = at
	c.order = append(c.order, id)
}

// checkAt reports whether a cancel of the request id, stored at stream
// sequence seq at time stored, was received (cancelled) and whether the
// answer is known without reading the stored cancel (covered). A request
// not covered starts a new read of the anchor when the anchor is invalid.
// A cancel of id received before the request was stored (stale) is an
// earlier request's: it does not count, and the request is covered as if
// none was received (a cancel of its own, received later, would have moved
// the id's time past the request's).
//
// The connection's and the subscription's state are read before c.mu is
// taken: their locks are those of every publish on the connection, and
// every pick-up takes c.mu (held across them, pick-ups queued behind
// publishes: 70 % of the process's mutex wait in a soak). The subscription's
// pending count is read first: the client counts a message as pending
// until its callback (record) has returned, so a count of 0 proves every
// cancel received by then is in seen, which is read after it.
func (c *cancelWatch) checkAt(id string, seq uint64, stored time.Time) (cancelled, covered, stale bool) {
	var (
		pending    = -1
		connected  bool
		reconnects uint64
		dropped    = -1
	)
	if c.nc != nil && c.sub != nil {
		if n, _, err := c.sub.Pending(); err == nil {
			pending = n
		}
		connected, reconnects, dropped = c.nc.IsConnected(), c.nc.Stats().Reconnects, c.subDropped()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := c.seen[id]; ok {
		if !c.stale(at, stored) {
			return true, true, false
		}
		stale = true
	}
	if c.valid && (!connected || reconnects != c.reconnects || dropped != c.dropped) {
		c.valid = false
	}
	if !c.valid {
		c.startAnchorLocked()
		return false, false, stale
	}
	if seq <= c.anchor || pending != 0 {
		return false, false, stale // stored before the anchor, or cancels received and not recorded yet
	}
	return false, true, stale
}

func (c *cancelWatch) subDropped() int {
	n, err := c.sub.Dropped()
	if err != nil {
		return -1
	}
	return n
}

// startAnchorLocked reads the anchor in the background unless a read is
// under way or failed less than anchorRetry ago, or the watch is stopped.
// c.mu is held.
func (c *cancelWatch) startAnchorLocked() {
	if c.stopped || c.anchoring || c.nc == nil || (!c.lastTry.IsZero() && c.now().Sub(c.lastTry) < anchorRetry) {
		return
	}
	c.anchoring = true
	c.lastTry = c.now()
	c.bg.Add(1)
	c.spawn(func() {
		defer c.bg.Done()
		ctx, cancel := context.WithTimeout(c.bgCtx, ioTimeout)
		defer cancel()
		_ = c.anchorNow(ctx)
	})
}

// anchorNow reads the anchor: the subscription is registered (a flush),
// then the requests stream's last sequence is read. It is valid when the
// subscription missed nothing meanwhile.
func (c *cancelWatch) anchorNow(ctx context.Context) error {
	c.mu.Lock()
	c.anchoring = true
	reconnects, dropped, evictions := c.nc.Stats().Reconnects, c.subDropped(), c.evictions
	c.mu.Unlock()
	last, err := c.flushAndRead(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.anchoring = false
	if err != nil {
		return err
	}
	if dropped < 0 || !c.nc.IsConnected() || c.nc.Stats().Reconnects != reconnects || c.subDropped() != dropped || c.evictions != evictions {
		return errAnchorMissed
	}
	c.anchor, c.valid, c.reconnects, c.dropped = last, true, reconnects, dropped
	c.lastTry = time.Time{}
	return nil
}

func (c *cancelWatch) flushAndRead(ctx context.Context) (uint64, error) {
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return 0, err
	}
	return c.read(ctx)
}

// lastSeqReader reads stream's last sequence (its info, from the leader).
func lastSeqReader(js jetstream.JetStream, stream string) func(context.Context) (uint64, error) {
	return func(ctx context.Context) (uint64, error) {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return 0, err
		}
		return s.CachedInfo().State.LastSeq, nil
	}
}
