package push

import (
	"context"
	"errors"
	"fmt"
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

// deadTally is a principal's dead letters as a replica counts them.
type deadTally struct {
	mu      sync.Mutex
	letters []deadSize // oldest first
	bytes   int64
	read    time.Time // zero: to read
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
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.read) > deadTallyTTL || (len(t.letters) > 0 && t.letters[0].seq < info.State.FirstSeq) {
		if err := t.readFrom(ctx, stream, deadFilter(principal)); err != nil {
			return err
		}
	}
	if t.bytes+size > share && len(t.letters) > 0 {
		n := 0
		for n < len(t.letters) && t.bytes+size > share {
			t.bytes -= t.letters[n].size
			n++
		}
		cut := t.letters[n-1].seq + 1
		if err := stream.Purge(ctx, jetstream.WithPurgeSubject(deadFilter(principal)), jetstream.WithPurgeSequence(cut)); err != nil {
			t.read = time.Time{}
			return err
		}
		t.letters = t.letters[n:]
		s.metrics.deadPurged.Add(float64(n))
		s.log.Warn("push: a principal's dead letters are over its share of "+streams.PushDeadStream+"; its oldest removed",
			"principal", principal, "removed", n, "share_bytes", share, "stream_max_bytes", max)
	}
	ack, err := s.js.Publish(ctx, subj, b, jetstream.WithMsgID(id))
	if err != nil {
		return err
	}
	if !ack.Duplicate {
		t.letters = append(t.letters, deadSize{ack.Sequence, size})
		t.bytes += size
	}
	return nil
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
		if err := t.readLetters(ctx, stream, filter); err != nil {
			return err
		}
	}
	t.read = time.Now()
	return nil
}

func (t *deadTally) readLetters(ctx context.Context, stream jetstream.Stream, filter string) error {
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
