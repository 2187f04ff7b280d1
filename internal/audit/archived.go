package audit

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// The archive (package archive) holds E2A_AUDIT's messages in compressed
// batches, by their E2A_AUDIT sequences, for longer than E2A_AUDIT keeps
// them. The auditor reads it as the part of E2A_AUDIT's sequence that
// E2A_AUDIT no longer holds: the audit's state starts at the archive's
// first message, a read from a sequence before E2A_AUDIT's first reads
// the archive's records up to it and then E2A_AUDIT, and a time before
// E2A_AUDIT's first message is found in the batches' headers. Everything
// above (the search from an id's time, the partition scans, the checks)
// is the same for both.

// withArchive extends the audit's state st with the archive: st.first
// becomes the archive's first message when the archive starts earlier.
func (a *Auditor) withArchive(ctx context.Context, st streamState) (streamState, error) {
	sp, err := a.span(ctx)
	if err != nil {
		return st, err
	}
	st.held, st.heldTime = st.first, st.firstTime
	if !sp.Exists || sp.Empty || !sp.Epoch.Equal(st.created) {
		return st, nil // nothing archived, or the batches of an earlier E2A_AUDIT
	}
	// Kept even when it starts no earlier: E2A_AUDIT may drop its head
	// while the replay reads (auditSeq).
	st.arch = sp
	if sp.First < st.first {
		st.first, st.firstTime = sp.First, sp.FirstTime
	}
	return st, nil
}

// span reads the archive's span, with the call timeout and retries.
func (a *Auditor) span(ctx context.Context) (archive.Span, error) {
	var sp archive.Span
	err := a.call(ctx, func(c context.Context) error {
		var e error
		sp, e = a.arch.Span(c)
		return e
	})
	return sp, err
}

// archived reports whether st reads the archive before E2A_AUDIT.
func (st streamState) archived() bool { return st.arch.Exists && !st.arch.Empty }

// archiveSeqAtTime is seqAtTime for a time before E2A_AUDIT's first
// message: the first archived message stored at or after t, or
// E2A_AUDIT's first when the archive holds none.
func (a *Auditor) archiveSeqAtTime(ctx context.Context, st streamState, t time.Time) (uint64, error) {
	var seq uint64
	err := a.call(ctx, func(c context.Context) error {
		var e error
		seq, e = a.arch.SeqAtTime(c, st.arch, t)
		return e
	})
	return min(seq, st.held), err
}

// auditSeq iterates over the audit's messages under subject from sequence
// from on: the archived ones before E2A_AUDIT's first, then E2A_AUDIT's
// (read with read). Sequences only a corrupt batch of the archive holds
// are yielded as an *archive.UnreadableError (naming the batch), and the
// messages after them follow if the caller goes on (see unreadable).
func (a *Auditor) auditSeq(ctx context.Context, st streamState, subject string, from uint64,
	read func(ctx context.Context, stream, subject string, from uint64) iter.Seq2[streams.RawMsg, error]) iter.Seq2[streams.RawMsg, error] {
	return func(yield func(streams.RawMsg, error) bool) {
		dropped := st.archived() && from < st.held
		if st.archived() && !dropped {
			// E2A_AUDIT held from when the replay began; it may have
			// dropped its head past it since (it is kept at its limit).
			var err error
			if dropped, err = a.headDropped(ctx, st, from); err != nil {
				yield(streams.RawMsg{}, err)
				return
			}
		}
		if dropped {
			// The archive's span read now: E2A_AUDIT may have dropped
			// more of its head since the replay began, and what it
			// dropped the archive holds. Read the archive to its end,
			// then E2A_AUDIT after it.
			sp := st.arch
			fresh, err := a.span(ctx)
			if err != nil {
				yield(streams.RawMsg{}, err)
				return
			}
			if fresh.Exists && !fresh.Empty && fresh.Epoch.Equal(sp.Epoch) {
				sp = fresh
			}
			for r, err := range a.arch.Records(ctx, sp, from) {
				if err != nil {
					if !yield(streams.RawMsg{}, err) || !unreadable(err) {
						return
					}
					continue
				}
				if !subjects.Matches(subject, r.Subject) {
					continue
				}
				if !yield(streams.RawMsg{Subject: r.Subject, Seq: r.Seq, Time: r.Time, Header: r.Header, Data: r.Data}, nil) {
					return
				}
			}
			from = max(from, sp.Last+1)
		}
		for m, err := range read(ctx, st.name, subject, from) {
			if !yield(m, err) || err != nil {
				return
			}
		}
	}
}

// headDropped reports whether E2A_AUDIT no longer holds sequence from: its
// head was dropped past it since the replay began.
func (a *Auditor) headDropped(ctx context.Context, st streamState, from uint64) (bool, error) {
	cur, err := a.state(ctx, st.name)
	if err != nil {
		return false, err
	}
	return cur.exists && from < cur.first, nil
}

// unreadable reports whether err is the archive's report of messages only
// a corrupt batch holds: a search for one message reads on past them, and
// reports them (the error) only when it finds the message nowhere else;
// a read of one request's frames ends with it, and Replay then goes on
// with the other requests (replayCtx.keepLost).
func unreadable(err error) bool {
	var u *archive.UnreadableError
	return errors.As(err, &u)
}
