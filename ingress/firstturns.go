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
	// gone from the stream and is dropped.
	maxAge time.Duration
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
// nothing. The entries returned are the caller's.
func (c *firstTurns) newest(ctx context.Context, s *TaskStore, last uint64, window int) ([]firstTurnEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lo := uint64(1)
	if last > uint64(window) {
		lo = last - uint64(window) + 1
	}
	if c.last == 0 || lo < c.from {
		c.recs, c.from, c.last = nil, lo, lo-1
	}
	if last > c.last {
		var read []firstTurnEntry
		for m, err := range streams.DirectGetSeq(ctx, s.nc, streams.RequestsStream, subjects.AllRequests, c.last+1, listPage) {
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
		c.recs, c.last = append(c.recs, read...), last
	}
	c.recs = slices.DeleteFunc(c.recs, func(e firstTurnEntry) bool {
		return e.seq < lo || (c.maxAge > 0 && s.now().Sub(e.at) > c.maxAge)
	})
	c.from = max(c.from, lo)
	return slices.Clone(c.recs), nil
}
