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
type cancelWatch struct {
	mu    sync.Mutex
	seen  map[string]struct{} // ids of the cancels received
	order []string            // seen's ids, oldest first
	limit int                 // at most this many ids kept

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
}

// cancelSetLimit bounds the ids a worker remembers; cancels are rare, and
// past it the oldest half is forgotten and the anchor read again.
const cancelSetLimit = 1 << 16

// errAnchorMissed: the subscription may have missed a cancel while the
// anchor was read.
var errAnchorMissed = errors.New("agent: cancels may have been missed while the anchor was read")

// anchorRetry is the least time between two failed reads of the anchor.
const anchorRetry = time.Second

func newCancelWatch(limit int) *cancelWatch {
	return &cancelWatch{seen: map[string]struct{}{}, limit: limit, now: time.Now, spawn: func(f func()) { go f() }}
}

// record remembers a received cancel of id.
func (c *cancelWatch) record(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[id]; ok {
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
	c.seen[id] = struct{}{}
	c.order = append(c.order, id)
}

// check reports whether a cancel of the request id, stored at stream
// sequence seq, was received (cancelled) and whether the answer is known
// without reading the stored cancel (covered). A request not covered
// starts a new read of the anchor when the anchor is invalid.
//
// The connection's and the subscription's state are read before c.mu is
// taken: their locks are those of every publish on the connection, and
// every pick-up takes c.mu (held across them, pick-ups queued behind
// publishes: 70 % of the process's mutex wait in a soak). The subscription's
// pending count is read first: the client counts a message as pending
// until its callback (record) has returned, so a count of 0 proves every
// cancel received by then is in seen, which is read after it.
func (c *cancelWatch) check(id string, seq uint64) (cancelled, covered bool) {
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
	if _, ok := c.seen[id]; ok {
		return true, true
	}
	if c.valid && (!connected || reconnects != c.reconnects || dropped != c.dropped) {
		c.valid = false
	}
	if !c.valid {
		c.startAnchorLocked()
		return false, false
	}
	if seq <= c.anchor || pending != 0 {
		return false, false // stored before the anchor, or cancels received and not recorded yet
	}
	return false, true
}

func (c *cancelWatch) subDropped() int {
	n, err := c.sub.Dropped()
	if err != nil {
		return -1
	}
	return n
}

// startAnchorLocked reads the anchor in the background unless a read is
// under way or failed less than anchorRetry ago. c.mu is held.
func (c *cancelWatch) startAnchorLocked() {
	if c.anchoring || c.nc == nil || (!c.lastTry.IsZero() && c.now().Sub(c.lastTry) < anchorRetry) {
		return
	}
	c.anchoring = true
	c.lastTry = c.now()
	c.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
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
