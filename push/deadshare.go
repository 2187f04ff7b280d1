package push

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
)

// One principal's share of E2A_PUSH_DEAD.
//
// E2A_PUSH_DEAD is one stream for every principal, with a byte limit and
// DiscardOld: left alone, a principal whose webhooks refuse everything
// would fill it and the stream would drop every other principal's dead
// letters, oldest first. JetStream has no byte limit per subject prefix,
// so the stage keeps each principal within its share (WithDeadShare, 1/8
// of the stream's MaxBytes by default) itself: once the stream holds more
// than half its MaxBytes, a dead letter that would take its principal
// over its share first removes that principal's oldest dead letters
// (a purge of e2a.push.dead.<principal>.> up to a sequence), a warning
// and e2a_push_dead_purged_total saying how many. Below half, nothing is
// counted (one stream info a dead letter). A principal's bytes are read
// with an ordered, headers-only consumer (Nats-Msg-Size), then kept by
// the replica for deadTallyTTL; the figures are approximate (the stored
// overhead is estimated, other replicas' letters and redeliveries are
// seen at the next read), which the half of the stream left free covers.
// So the stream drops another principal's letter only when more than
// 1/share principals hold their whole share at once.
//
// A replica's dead letters of one principal are stored concurrently (one
// lane a config): the tally's lock covers its figures, never a round
// trip. A dead letter takes the room it needs out of the tally (its
// oldest letters, and its own size as pending) before it purges and
// publishes; one read of the sizes at a time, the others waiting for it
// with their context. Letters published together cannot make room for
// each other (a letter is purged once stored): each, once stored, purges
// what the share is over by then, so the share holds again when the last
// is stored.

// deadTallyTTL is how long a replica trusts its count of a principal's
// dead letters before reading them again.
const deadTallyTTL = 30 * time.Second

// deadOverhead estimates what JetStream stores for a message besides its
// data, subject and message id.
const deadOverhead = 64

// deadSize is one dead letter's stream sequence and estimated stored size.
type deadSize struct {
	seq  uint64
	size int64
}

// deadTally is a principal's dead letters as a replica counts them. Its
// lock is held for the figures only, never across a round trip: a read,
// a purge or a publish of one dead letter of the principal does not hold
// up the others (nor a stop of the stage: each waits with its context).
type deadTally struct {
	mu      sync.Mutex
	letters []deadSize // stored, oldest first
	bytes   int64      // of letters
	pending int64      // of the letters being published
	// cut: the letters before it are purged (or being purged); a read
	// under way as they are does not count them again.
	cut  uint64
	read time.Time // zero: to read
	// reading is closed when the read under way ends (nil: none), its
	// error in readErr.
	reading chan struct{}
	readErr error
}

// deadShares are the tallies of the principals whose dead letters the
// replica counts (while the stream is over half full).
type deadShares struct {
	mu sync.Mutex
	by map[string]*deadTally
}

func (d *deadShares) get(principal string) *deadTally {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.by == nil {
		d.by = map[string]*deadTally{}
	}
	t := d.by[principal]
	if t == nil {
		t = &deadTally{}
		d.by[principal] = t
	}
	return t
}

// reset forgets every tally (the stream is under half full again).
func (d *deadShares) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.by) > 0 {
		d.by = nil
	}
}

// deadFilter is the subject of principal's dead letters.
func deadFilter(principal string) string { return "e2a.push.dead." + tok(principal) + ".>" }

// storeDead publishes a dead letter of principal (data b under subj, with
// message id id), keeping the principal within its share of the stream.
func (s *stage) storeDead(principal, subj, id string, b []byte) error {
	ctx := s.ctx
	stream, err := s.js.Stream(ctx, streams.PushDeadStream) // one stream info
	if err != nil {
		return err
	}
	info := stream.CachedInfo()
	size := int64(len(b) + len(subj) + len(id) + deadOverhead)
	max := info.Config.MaxBytes
	if max <= 0 || int64(info.State.Bytes)+size <= max/2 {
		s.shares.reset()
		_, err := s.js.Publish(ctx, subj, b, jetstream.WithMsgID(id))
		return err
	}
	share := int64(float64(max) * s.o.deadShare)
	t := s.shares.get(principal)
	filter := deadFilter(principal)
	if err := t.fresh(ctx, stream, filter, info.State.FirstSeq); err != nil {
		return err
	}
	n, cut := t.take(size, share)
	if n > 0 {
		if err := s.purgeDead(ctx, stream, t, principal, n, cut, share, max); err != nil {
			t.settle(size, nil, err)
			return err
		}
	}
	ack, err := s.js.Publish(ctx, subj, b, jetstream.WithMsgID(id))
	t.settle(size, ack, err)
	if err != nil {
		return err
	}
	// Letters published together with this one could not make room for
	// each other (a letter is purged only once stored): the last of them
	// to be stored does.
	if n, cut := t.take(0, share); n > 0 {
		t.settle(0, nil, s.purgeDead(ctx, stream, t, principal, n, cut, share, max))
	}
	return nil
}

// purgeDead removes principal's oldest n dead letters (those before
// sequence cut), which take took out of its tally t; when the purge
// fails, the tally is read again.
func (s *stage) purgeDead(ctx context.Context, stream jetstream.Stream, t *deadTally, principal string, n int, cut uint64, share, max int64) error {
	if s.beforePurge != nil {
		s.beforePurge(ctx, principal)
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(deadFilter(principal)), jetstream.WithPurgeSequence(cut)); err != nil {
		t.mu.Lock()
		t.cut, t.read = 0, time.Time{}
		t.mu.Unlock()
		return err
	}
	s.metrics.deadPurged.Add(float64(n))
	s.log.Warn("push: a principal's dead letters are over its share of "+streams.PushDeadStream+"; its oldest removed",
		"principal", principal, "removed", n, "share_bytes", share, "stream_max_bytes", max)
	return nil
}

// fresh reads the sizes of the dead letters under filter unless the
// tally is recent and holds none older than the stream's first sequence
// firstSeq; while another caller reads them, it waits for that read (or
// ctx).
func (t *deadTally) fresh(ctx context.Context, stream jetstream.Stream, filter string, firstSeq uint64) error {
	t.mu.Lock()
	for {
		if time.Since(t.read) <= deadTallyTTL && (len(t.letters) == 0 || t.letters[0].seq >= firstSeq) {
			t.mu.Unlock()
			return nil
		}
		ch := t.reading
		if ch == nil {
			break
		}
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		t.mu.Lock()
		if err := t.readErr; err != nil {
			t.mu.Unlock()
			return err
		}
	}
	ch := make(chan struct{})
	// The letters published during the read are added to the empty
	// tally as their publishes end: kept by the merge.
	t.reading, t.letters, t.bytes, t.read = ch, nil, 0, time.Time{}
	t.mu.Unlock()
	var r deadTally
	err := r.readFrom(ctx, stream, filter)
	t.mu.Lock()
	t.reading, t.readErr = nil, err
	if err == nil {
		t.merge(r.letters)
		t.read = time.Now()
	}
	t.mu.Unlock()
	close(ch)
	return err
}

// merge adds letters (oldest first) to the tally, once each, but for
// those before the cut. t.mu is held.
func (t *deadTally) merge(letters []deadSize) {
	if len(letters) == 1 && letters[0].seq >= t.cut && (len(t.letters) == 0 || letters[0].seq > t.letters[len(t.letters)-1].seq) {
		t.letters = append(t.letters, letters[0]) // the newest: most publishes
		t.bytes += letters[0].size
		return
	}
	all := append(slices.Clip(t.letters), letters...)
	slices.SortFunc(all, func(a, b deadSize) int { return cmp.Compare(a.seq, b.seq) })
	all = slices.CompactFunc(all, func(a, b deadSize) bool { return a.seq == b.seq })
	i, _ := slices.BinarySearchFunc(all, t.cut, func(d deadSize, seq uint64) int { return cmp.Compare(d.seq, seq) })
	t.letters, t.bytes = all[i:], 0
	for _, d := range t.letters {
		t.bytes += d.size
	}
}

// take makes room in the share for a dead letter of size bytes: it
// removes the oldest letters the room needs from the tally (n, to purge
// up to sequence cut) and counts the letter as pending.
func (t *deadTally) take(size, share int64) (n int, cut uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for n < len(t.letters) && t.bytes+t.pending+size > share {
		t.bytes -= t.letters[n].size
		n++
	}
	if n > 0 {
		cut = t.letters[n-1].seq + 1
		t.letters = slices.Delete(t.letters, 0, n)
		t.cut = max(t.cut, cut)
	}
	t.pending += size
	return n, cut
}

// settle ends take's pending letter of size bytes: stored (ack), or not
// (err).
func (t *deadTally) settle(size int64, ack *jetstream.PubAck, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending -= size
	if err == nil && ack != nil && !ack.Duplicate {
		t.merge([]deadSize{{ack.Sequence, size}})
	}
}

// readFrom reads the sizes of the dead letters under filter.
func (t *deadTally) readFrom(ctx context.Context, stream jetstream.Stream, filter string) error {
	t.letters, t.bytes, t.read = nil, 0, time.Time{}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return err
	}
	var left uint64
	for _, n := range info.State.Subjects {
		left += n
	}
	if left > 0 {
		if err := t.readLetters(ctx, stream, filter, left); err != nil {
			return err
		}
	}
	t.read = time.Now()
	return nil
}

// readLetters reads the sizes of the letters under filter into t; left is
// how many the stream's info counted. A read that ends on the
// wait with none delivered though some were counted is an error, not a
// tally of none: on a cluster a new consumer's first pull can go
// unanswered (seen in CI: no reply within 10 s), and an empty tally kept
// for deadTallyTTL would let the principal past its share. The store is
// asked again (and its next info counts none if they were removed).
func (t *deadTally) readLetters(ctx context.Context, stream jetstream.Stream, filter string, left uint64) error {
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, HeadersOnly: true})
	if err != nil {
		return err
	}
	msgs, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return err
	}
	defer msgs.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := msgs.Next(jetstream.NextMaxWait(2 * time.Second))
		if errors.Is(err, nats.ErrTimeout) && len(t.letters) == 0 {
			return fmt.Errorf("%s: read the sizes of %s: %d counted, none delivered: %w", streams.PushDeadStream, filter, left, err)
		}
		if errors.Is(err, nats.ErrTimeout) {
			return nil // removed meanwhile (redelivered, aged): what was read
		}
		if err != nil {
			return fmt.Errorf("%s: read the sizes of %s: %w", streams.PushDeadStream, filter, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(m.Headers().Get(nats.MsgSize))
		size := int64(n + len(m.Subject()) + len(m.Headers().Get(nats.MsgIdHdr)) + deadOverhead)
		t.letters = append(t.letters, deadSize{meta.Sequence.Stream, size})
		t.bytes += size
		if meta.NumPending == 0 {
			return nil
		}
	}
}
