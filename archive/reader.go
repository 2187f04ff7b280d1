package archive

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Reader reads E2A_ARCHIVE by the E2A_AUDIT sequences and store times its
// batches hold: a binary search over the batches' headers (log2(batches)
// direct gets), then one batch decompressed. It needs direct gets on
// E2A_ARCHIVE only (a read-only user). A Reader keeps the last batches it
// decompressed (WithCacheBatches) and is safe for concurrent use.
type Reader struct {
	nc *nats.Conn
	js jetstream.JetStream
	o  options

	mu    sync.Mutex
	cache map[uint64]*Batch
	order []uint64
}

// Batch is one stored batch: its sequence in E2A_ARCHIVE, what its headers
// say, and its records once decoded.
type Batch struct {
	Seq         uint64
	First, Last uint64    // E2A_AUDIT sequences
	From, Until time.Time // their store times
	Count       int
	Epoch       time.Time // the E2A_AUDIT its sequences are of (its creation time)
	Records     []Record
}

// Span is what the archive holds of the E2A_AUDIT of its last batch's
// epoch (Epoch, that stream's creation time; the batches of an earlier
// E2A_AUDIT, deleted and applied again, are left out: their sequences are
// another stream's): its first and last batches' E2A_ARCHIVE sequences
// and the E2A_AUDIT sequences and time they start and end with. Its ends
// are batches whose headers read: corrupt batches after the last sound one
// are left out (the archiver writes past them). Exists is false without
// E2A_ARCHIVE; Empty when it holds no batch, or none that reads.
type Span struct {
	Exists, Empty         bool
	FirstBatch, LastBatch uint64
	First, Last           uint64
	FirstTime             time.Time
	Epoch                 time.Time
}

// NewReader returns a Reader on nc. It returns ErrInvalidOption for a nil
// connection or a bad option.
func NewReader(nc *nats.Conn, opts ...Option) (*Reader, error) {
	o, err := buildOptions(nc, opts)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &Reader{nc: nc, js: js, o: o, cache: map[uint64]*Batch{}}, nil
}

// Span reads what the archive holds now.
func (r *Reader) Span(ctx context.Context) (Span, error) {
	st, err := r.js.Stream(ctx, streams.ArchiveStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return Span{}, nil
	}
	if err != nil {
		return Span{}, err
	}
	info := st.CachedInfo()
	sp := Span{Exists: true, Empty: info.State.Msgs == 0}
	if sp.Empty {
		return sp, nil
	}
	// The newest batch whose headers read: a corrupt last batch (which
	// the archiver writes past) does not say where the archive ends.
	last, err := r.prevSound(ctx, info.State.LastSeq, info.State.FirstSeq)
	if errors.Is(err, errNoSound) {
		sp.Empty = true
		return sp, nil
	}
	if err != nil {
		return Span{}, err
	}
	sp.FirstBatch, sp.LastBatch, sp.Epoch = info.State.FirstSeq, last.Seq, last.Epoch
	// The epoch's first batch: epochs only grow along the archive.
	if sp.FirstBatch, err = r.search(ctx, sp, func(b *Batch) bool { return !b.Epoch.Before(last.Epoch) }); err != nil {
		return Span{}, err
	}
	first, err := r.soundHeader(ctx, sp.FirstBatch, sp.LastBatch+1)
	if err != nil {
		return Span{}, err
	}
	sp.First, sp.Last, sp.FirstTime = first.First, last.Last, first.From
	return sp, nil
}

// header returns the batch stored at seq or, when that one is gone (aged
// out), the next one, without decoding its records.
func (r *Reader) header(ctx context.Context, seq uint64) (*Batch, error) {
	if b := r.cached(seq); b != nil {
		return b, nil
	}
	m, err := r.get(ctx, seq)
	if err != nil {
		return nil, err
	}
	return parseHeader(m)
}

// getAttempts is how many times a direct get is sent when it times out or
// finds no responder (E2A_ARCHIVE between two leaders).
const getAttempts = 3

// get reads the batch stored at seq, or the next one.
func (r *Reader) get(ctx context.Context, seq uint64) (streams.RawMsg, error) {
	var err error
	for range getAttempts {
		var msgs []streams.RawMsg
		gctx, cancel := context.WithTimeout(ctx, streams.DefaultDirectGetTimeout)
		msgs, _, err = streams.DirectGetBatch(gctx, r.nc, streams.ArchiveStream, subjects.ArchiveBatches, seq, 1)
		cancel()
		if err == nil && len(msgs) == 0 {
			err = streams.ErrNoMessages
		}
		if err == nil {
			return msgs[0], nil
		}
		retry := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
			errors.Is(err, nats.ErrNoResponders) || errors.Is(err, streams.ErrDirectGet)
		if !retry || ctx.Err() != nil {
			break
		}
	}
	return streams.RawMsg{}, err
}

// batchError is ErrCorrupt for the batch stored at seq, so that Span,
// Records and the archiver can read around it.
type batchError struct {
	seq uint64
	err error
}

func (e *batchError) Error() string { return e.err.Error() }
func (e *batchError) Unwrap() error { return e.err }

// corruptAt returns the sequence of the corrupt batch err names.
func corruptAt(err error) (uint64, bool) {
	var be *batchError
	if errors.As(err, &be) {
		return be.seq, true
	}
	return 0, false
}

// errNoSound: no batch of a range has headers that read.
var errNoSound = errors.New("archive: no sound batch in the range")

// soundHeader returns the first batch stored from seq on, before end,
// whose headers read (corrupt ones are passed over); errNoSound when none
// is, streams.ErrNoMessages when no batch is answered from seq on.
func (r *Reader) soundHeader(ctx context.Context, seq, end uint64) (*Batch, error) {
	for seq < end {
		b, err := r.header(ctx, seq)
		if c, ok := corruptAt(err); ok {
			seq = c + 1
			continue
		}
		if err != nil {
			return nil, err
		}
		if b.Seq >= end {
			break
		}
		return b, nil
	}
	return nil, errNoSound
}

// prevSound returns the newest batch stored at seq or before, not before
// floor, whose headers read; errNoSound when none is. Batches are never
// deleted from E2A_ARCHIVE (only aged out at its head), so the walk back
// is as long as the run of corrupt batches.
func (r *Reader) prevSound(ctx context.Context, seq, floor uint64) (*Batch, error) {
	for s := seq; s >= floor && s > 0; s-- {
		b, err := r.header(ctx, s)
		if _, ok := corruptAt(err); ok {
			continue
		}
		if err != nil && !errors.Is(err, streams.ErrNoMessages) {
			return nil, err
		}
		if err == nil && b.Seq <= seq {
			return b, nil
		}
	}
	return nil, errNoSound
}

// parseHeader reads a stored batch's headers.
func parseHeader(m streams.RawMsg) (*Batch, error) {
	b := &Batch{Seq: m.Seq}
	var errs []error
	u := func(name string) uint64 {
		v, err := strconv.ParseUint(m.Header.Get(name), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("header %s: %v", name, err))
		}
		return v
	}
	t := func(name string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, m.Header.Get(name))
		if err != nil {
			errs = append(errs, fmt.Errorf("header %s: %v", name, err))
		}
		return v
	}
	b.First, b.Last = u(subjects.HeaderArchiveFirst), u(subjects.HeaderArchiveLast)
	b.From, b.Until = t(subjects.HeaderArchiveFrom), t(subjects.HeaderArchiveUntil)
	b.Count = int(min(u(subjects.HeaderArchiveCount), MaxBatchRecords+1))
	b.Epoch = t(subjects.HeaderArchiveEpoch)
	if len(errs) == 0 && (b.First > b.Last || b.Count < 1 || b.Count > MaxBatchRecords) {
		errs = append(errs, fmt.Errorf("range %d..%d of %d messages", b.First, b.Last, b.Count))
	}
	if len(errs) > 0 {
		return nil, &batchError{m.Seq, fmt.Errorf("%w: batch %d: %w", ErrCorrupt, m.Seq, errors.Join(errs...))}
	}
	return b, nil
}

// Load returns the batch stored at seq (or the next one, when that one is
// gone) with its records.
func (r *Reader) Load(ctx context.Context, seq uint64) (*Batch, error) {
	if b := r.cached(seq); b != nil && b.Records != nil {
		return b, nil
	}
	m, err := r.get(ctx, seq)
	if err != nil {
		return nil, err
	}
	b, err := parseHeader(m)
	if err != nil {
		return nil, err
	}
	if b.Records, err = Decode(m.Data); err != nil {
		return nil, &batchError{b.Seq, fmt.Errorf("batch %d: %w", b.Seq, err)}
	}
	if err := b.checkRecords(); err != nil {
		return nil, &batchError{b.Seq, err}
	}
	r.keep(b)
	return b, nil
}

// checkRecords returns ErrCorrupt, naming the batch, when b's records are
// not what its headers say: Count of them, E2A_AUDIT sequences growing from
// First to Last. Records and SeqAtTime trust that order (a record outside
// it would be skipped without a word, and the audit read through them miss
// it), and the binary searches trust the headers.
func (b *Batch) checkRecords() error {
	if len(b.Records) != b.Count {
		return fmt.Errorf("%w: batch %d holds %d messages, its header says %d", ErrCorrupt, b.Seq, len(b.Records), b.Count)
	}
	prev := uint64(0)
	for i, rec := range b.Records {
		if i > 0 && rec.Seq <= prev || rec.Seq < b.First || rec.Seq > b.Last {
			return fmt.Errorf("%w: batch %d: message %d has sequence %d, not in order within its header's %d..%d",
				ErrCorrupt, b.Seq, i, rec.Seq, b.First, b.Last)
		}
		prev = rec.Seq
	}
	if first, last := b.Records[0].Seq, b.Records[len(b.Records)-1].Seq; first != b.First || last != b.Last {
		return fmt.Errorf("%w: batch %d holds sequences %d..%d, its header says %d..%d", ErrCorrupt, b.Seq, first, last, b.First, b.Last)
	}
	return nil
}

func (r *Reader) cached(seq uint64) *Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cache[seq]
}

func (r *Reader) keep(b *Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cache[b.Seq]; ok {
		return
	}
	if len(r.order) >= r.o.cacheBatches {
		delete(r.cache, r.order[0])
		r.order = r.order[1:]
	}
	r.cache[b.Seq] = b
	r.order = append(r.order, b.Seq)
}

// search returns the first batch of sp for which after says true (after
// must be false, then true, along the batches), or 0 when none.
func (r *Reader) search(ctx context.Context, sp Span, after func(*Batch) bool) (uint64, error) {
	lo, hi := sp.FirstBatch, sp.LastBatch+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		// A corrupt batch is passed over: the search goes by the sound
		// ones around it, and may end on it (its reader reads around it).
		b, err := r.soundHeader(ctx, mid, hi)
		if errors.Is(err, streams.ErrNoMessages) || errors.Is(err, errNoSound) {
			hi = mid
			continue
		}
		if err != nil {
			return 0, err
		}
		if after(b) {
			hi = mid
		} else {
			lo = b.Seq + 1
		}
	}
	if lo > sp.LastBatch {
		return 0, nil
	}
	return lo, nil
}

// SeqAtTime returns the E2A_AUDIT sequence of the first archived message
// stored at or after t, sp.Last+1 when none is.
func (r *Reader) SeqAtTime(ctx context.Context, sp Span, t time.Time) (uint64, error) {
	if !sp.Exists || sp.Empty {
		return 0, nil
	}
	bs, err := r.search(ctx, sp, func(b *Batch) bool { return !b.Until.Before(t) })
	if err != nil || bs == 0 {
		return sp.Last + 1, err
	}
	b, err := r.Load(ctx, bs)
	if c, ok := corruptAt(err); ok {
		// Where the corrupt batch starts: a read from there reports it.
		prev, err := r.prevSound(ctx, c-1, sp.FirstBatch)
		if errors.Is(err, errNoSound) {
			return sp.First, nil
		}
		if err != nil {
			return 0, err
		}
		return prev.Last + 1, nil
	}
	if err != nil {
		return 0, err
	}
	for _, rec := range b.Records {
		if !rec.Time.Before(t) {
			return rec.Seq, nil
		}
	}
	return b.Last + 1, nil
}

// Records returns the archived messages from E2A_AUDIT sequence from on,
// in sequence order, each once (should two batches hold a message, it is
// returned from the first), up to sp.Last. A batch of sp that no direct
// get answers ends it with ErrBehind. A corrupt batch is read around: the
// sequences that only it may hold (up to the next sound batch's first) are
// yielded as an *UnreadableError naming it, and the records after it
// follow if the caller goes on; when the batches after it hold them all
// (the archiver wrote past a corrupt last batch), nothing is reported.
func (r *Reader) Records(ctx context.Context, sp Span, from uint64) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		if !sp.Exists || sp.Empty || from > sp.Last {
			return
		}
		bs, err := r.search(ctx, sp, func(b *Batch) bool { return b.Last >= from })
		if err != nil {
			yield(Record{}, err)
			return
		}
		next := from
		for bs != 0 && bs <= sp.LastBatch {
			b, err := r.Load(ctx, bs)
			if c, ok := corruptAt(err); ok {
				nb, u, err := r.around(ctx, sp, c, next, err)
				if err != nil {
					yield(Record{}, err)
					return
				}
				if u != nil {
					if !yield(Record{}, u) {
						return
					}
					next = u.Last + 1
				}
				if nb == nil {
					return
				}
				bs = nb.Seq
				continue
			}
			if errors.Is(err, streams.ErrNoMessages) {
				// The span names batch bs (the leader's word) and the
				// replica that answered holds none from it on: not the
				// archive's end, which would skip its records.
				err = fmt.Errorf("%w: batch %d (the span ends at batch %d)", ErrBehind, bs, sp.LastBatch)
			}
			if err != nil {
				yield(Record{}, err)
				return
			}
			for _, rec := range b.Records {
				if rec.Seq < next || rec.Seq > sp.Last {
					continue
				}
				if !yield(rec, nil) {
					return
				}
				next = rec.Seq + 1
			}
			bs = b.Seq + 1
		}
	}
}

// around reads around the corrupt batch c of sp, for a read at sequence
// next: the next batch whose headers read (nil when none of sp does) and,
// when the sequences from next to that batch's first (or to sp.Last) are
// not empty, an UnreadableError naming c with cause as its error.
func (r *Reader) around(ctx context.Context, sp Span, c, next uint64, cause error) (*Batch, *UnreadableError, error) {
	end := sp.Last
	nb, err := r.soundHeader(ctx, c+1, sp.LastBatch+1)
	switch {
	case errors.Is(err, streams.ErrNoMessages):
		return nil, nil, fmt.Errorf("%w: batch after %d (the span ends at batch %d)", ErrBehind, c, sp.LastBatch)
	case errors.Is(err, errNoSound):
		nb = nil
	case err != nil:
		return nil, nil, err
	default:
		end = min(end, nb.First-1)
	}
	if nb != nil && nb.First <= next || end < next {
		return nb, nil, nil
	}
	return nb, &UnreadableError{Batch: c, First: next, Last: end, Err: cause}, nil
}
