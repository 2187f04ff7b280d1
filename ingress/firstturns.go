package ingress

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// firstTurns keeps, per replica, the first-turn records (firstTurnRecord)
// among the newest requests of E2A_REQUESTS that a listing reads, so that a
// listing reads only the requests stored since the one before it: a
// stored request never changes, so its record does not either (its task's
// second turn writes a record in E2A_TASKS, which the listing reads first
// and which wins). Before it, every ListTasks read and decoded the newest
// 10,000 envelopes (BenchmarkListTasks: 118-132 ms and 46 MB a call).
// It holds at most one entry per task-creating request in the window.
type firstTurns struct {
	mu sync.Mutex
	// from and last are the sequences of E2A_REQUESTS read, from first to
	// last (last 0: none yet).
	from, last uint64
	// recs are the first-turn records read, by ascending sequence.
	recs []firstTurnEntry
	// maxAge is E2A_REQUESTS' max age (0: unknown): an entry older is
	// gone from the stream and is dropped, unless keepAged.
	maxAge time.Duration
	// keepAged keeps the entries older than maxAge while the window holds
	// them (the store reads the history: TaskStore.history), for the
	// listing to find out whether their tasks are still found
	// (TaskStore.agedFirstTurn), and to forget them once not (forget).
	keepAged bool
}

// firstTurnEntry is one cached first-turn record and where it was read.
type firstTurnEntry struct {
	seq uint64
	at  time.Time
	rec TaskRecord
}

// newest returns the first-turn records of the requests with sequences
// in (last − window, last], oldest first, reading from E2A_REQUESTS only the
// sequences after the ones read before (all of them again when the window
// reaches below the ones read: never with the one window a listing uses).
// A last below the one read before (a lagging replica answered) reads
// nothing. The read is made without the lock (concurrent listings do not
// wait on each other's I/O); what it read joins the cache when it follows
// on what the cache holds then. The entries returned are the caller's.
func (c *firstTurns) newest(ctx context.Context, s *TaskStore, last uint64, window int) ([]firstTurnEntry, error) {
	lo := uint64(1)
	if last > uint64(window) {
		lo = last - uint64(window) + 1
	}
	c.mu.Lock()
	if c.last == 0 || lo < c.from {
		c.recs, c.from, c.last = nil, lo, lo-1
	}
	from := c.last + 1
	c.mu.Unlock()
	var read []firstTurnEntry
	if last >= from {
		for m, err := range streams.DirectGetSeq(ctx, s.nc, streams.RequestsStream, subjects.AllRequests, from, listPage) {
			if err != nil {
				return nil, err
			}
			if m.Seq > last {
				break
			}
			if rec, ok := firstTurnRecord(m); ok {
				read = append(read, firstTurnEntry{seq: m.Seq, at: m.Time, rec: *rec})
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if from <= c.last+1 && last > c.last {
		// What another listing read meanwhile is not added twice.
		for _, e := range read {
			if e.seq > c.last {
				c.recs = append(c.recs, e)
			}
		}
		c.last = last
	}
	now := s.now()
	c.recs = slices.DeleteFunc(c.recs, func(e firstTurnEntry) bool {
		return e.seq < lo || (!c.keepAged && c.aged(e, now))
	})
	c.from = max(c.from, lo)
	out := slices.Clone(c.recs)
	if from > c.last+1 {
		// The cache started over below this read meanwhile: this listing
		// answers with what it read.
		out = append(out, read...)
	}
	return out, nil
}

// aged reports whether the request of e has aged out of E2A_REQUESTS by
// now (its max age known and passed). maxAge is set once, before any
// listing.
func (c *firstTurns) aged(e firstTurnEntry, now time.Time) bool {
	return c.maxAge > 0 && now.Sub(e.at) > c.maxAge
}

// lastRead is the last sequence of E2A_REQUESTS read (0: none).
func (c *firstTurns) lastRead() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// forget drops the entry of sequence seq: its task is found no more.
func (c *firstTurns) forget(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = slices.DeleteFunc(c.recs, func(e firstTurnEntry) bool { return e.seq == seq })
}
