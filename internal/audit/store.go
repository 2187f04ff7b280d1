package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/option"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// DefaultPageSize is how many messages one direct get reads.
const DefaultPageSize = 256

// DefaultCallTimeout bounds each request to the servers. A reply can be
// lost with a server that dies; the request is then sent again (up to
// callAttempts times) instead of stalling the read.
const DefaultCallTimeout = 5 * time.Second

const callAttempts = 3

// Auditor reads the E2A streams for audit. It is safe for concurrent use.
type Auditor struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	page       int
	partitions int
	timeout    time.Duration
	margin     time.Duration
	arch       *archive.Reader
	// scanWindow bounds the finished requests an audit scan remembers (0:
	// defaultMaxTracked); scanPeak, when set (tests), is told at the end of
	// each audit scan the most it held at once (auditScan.peak).
	scanWindow int
	scanPeak   func(open, finished, early int)
	// tailLive, when set (tests), is told by Tail's live subscription of
	// each live message whether it was queued, and the bytes the queue held
	// with it.
	tailLive func(held int64, queued bool)
}

// Option configures an Auditor.
type Option func(*Auditor) error

// WithPageSize sets how many messages one direct get reads
// (1..streams.MaxDirectGetBatch, default DefaultPageSize).
func WithPageSize(n int) Option {
	return option.Check(ErrInvalidOption, n >= 1 && n <= streams.MaxDirectGetBatch,
		func(a *Auditor) { a.page = n },
		"page size %d not in 1..%d", n, streams.MaxDirectGetBatch)
}

// WithAuditPartitions sets the number of partitions of E2A_AUDIT. By
// default it is read from the stream's subject transforms.
func WithAuditPartitions(n int) Option {
	return option.Check(ErrInvalidOption, n >= 1 && n <= 1024,
		func(a *Auditor) { a.partitions = n },
		"%d partitions not in 1..1024", n)
}

// WithCallTimeout bounds each request to the servers (default
// DefaultCallTimeout).
func WithCallTimeout(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d > 0, func(a *Auditor) { a.timeout = d }, "call timeout %v", d)
}

// WithClockMargin sets how far the clock that made a request id or stamped
// an envelope may run ahead of the stream leader's that stored it
// (default DefaultClockMargin, 1 h at most): a search of E2A_AUDIT for a
// request starts that much before the time its UUIDv7 id (or for its
// frames, its envelope) says. A shorter margin reads less of the history.
func WithClockMargin(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d > 0 && d <= time.Hour,
		func(a *Auditor) { a.margin = d },
		"clock margin %v not in (0, 1h]", d)
}

// New returns an Auditor reading through nc. It needs direct gets on the
// E2A streams, stream info, and (for Tail) a subscription to e2a.live.>:
// the "audit" user of deploy/nats/accounts.conf.
func New(nc *nats.Conn, opts ...Option) (*Auditor, error) {
	if nc == nil {
		return nil, errors.New("audit: nil connection")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	arch, err := archive.NewReader(nc)
	if err != nil {
		return nil, err
	}
	a := &Auditor{nc: nc, js: js, page: DefaultPageSize, timeout: DefaultCallTimeout, margin: DefaultClockMargin, arch: arch}
	if err := option.Apply(ErrInvalidOption, a, opts); err != nil {
		return nil, err
	}
	return a, nil
}

// streamState is what the auditor needs to know of a stream.
type streamState struct {
	name       string
	exists     bool
	first      uint64
	last       uint64
	firstTime  time.Time
	maxAge     time.Duration // its MaxAge (0: none)
	partitions int           // E2A_AUDIT only
	// E2A_AUDIT only: its own first message (first is the archive's when
	// the archive starts earlier, archived.go) and the archive's span.
	held     uint64
	heldTime time.Time
	created  time.Time // the epoch of its archived batches
	arch     archive.Span
}

var partitionRe = regexp.MustCompile(`partition\((\d+),`)

// retryable reports an error after which a request may be sent again: no
// answer in time, or no responder (a stream between two leaders).
func retryable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, streams.ErrDirectGet)
}

// cut reports err, nats.ErrConnectionClosed, as a lost connection's that
// reconnects: nats.go ends a flush under way so when its connection is
// lost, though it is not closed.
func (a *Auditor) cut(err error) bool {
	return errors.Is(err, nats.ErrConnectionClosed) && !a.nc.IsClosed()
}

// call runs f with a context bounded by the call timeout, again after a
// retryable error (or one a lost connection cut, cut), while ctx lasts.
func (a *Auditor) call(ctx context.Context, f func(context.Context) error) error {
	var err error
	for i := 0; i < callAttempts; i++ {
		cctx, cancel := context.WithTimeout(ctx, a.timeout)
		err = f(cctx)
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) && !a.cut(err) {
			break
		}
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// batch is streams.DirectGetBatch with the call timeout and retries.
func (a *Auditor) batch(ctx context.Context, stream, subject string, from uint64, n int) (msgs []streams.RawMsg, more bool, err error) {
	err = a.call(ctx, func(c context.Context) error {
		var e error
		msgs, more, e = streams.DirectGetBatch(c, a.nc, stream, subject, from, n)
		return e
	})
	return msgs, more, err
}

// seq iterates over the messages stored under subject in stream from
// sequence from on, a page at a time (streams.DirectGetSeq with the call
// timeout and retries on every page).
func (a *Auditor) seq(ctx context.Context, stream, subject string, from uint64) iter.Seq2[streams.RawMsg, error] {
	return streams.PageSeq(from, func(seq uint64) ([]streams.RawMsg, bool, error) {
		return a.batch(ctx, stream, subject, seq, a.page)
	})
}

// state reads the stream's info. A stream that does not exist is not an
// error.
func (a *Auditor) state(ctx context.Context, name string) (streamState, error) {
	st := streamState{name: name}
	var s jetstream.Stream
	err := a.call(ctx, func(c context.Context) error {
		var e error
		s, e = a.js.Stream(c, name)
		return e
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("audit: stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	st.exists = true
	st.first, st.last, st.firstTime, st.created = info.State.FirstSeq, info.State.LastSeq, info.State.FirstTime, info.Created
	st.maxAge = info.Config.MaxAge
	if info.State.Msgs == 0 {
		st.first = info.State.LastSeq + 1
	}
	for _, src := range info.Config.Sources {
		if src == nil {
			continue
		}
		for _, tr := range src.SubjectTransforms {
			if m := partitionRe.FindStringSubmatch(tr.Destination); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
					st.partitions = n
				}
			}
		}
	}
	return st, nil
}

// seqAtTime returns the first sequence of st holding a message stored at or
// after t (st.first when t is zero or before everything), with a binary
// search of single-message direct gets: log2(messages) round trips.
// Store times only grow with the sequence (a stream leader stamps them as
// it appends), give or take clock differences between successive leaders.
func (a *Auditor) seqAtTime(ctx context.Context, st streamState, filter string, t time.Time) (uint64, error) {
	if t.IsZero() || !st.firstTime.IsZero() && !st.firstTime.Before(t) || st.first > st.last {
		return st.first, nil
	}
	if st.archived() && (st.heldTime.IsZero() || t.Before(st.heldTime)) {
		return a.archiveSeqAtTime(ctx, st, t)
	}
	if seq, ok := a.seqFromTime(ctx, st, filter, t); ok {
		return seq, nil
	}
	lo, hi := st.first, st.last+1
	if st.archived() {
		lo = max(lo, st.held) // t is not before E2A_AUDIT's first message
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		msgs, _, err := a.batch(ctx, st.name, filter, mid, 1)
		if errors.Is(err, streams.ErrNoMessages) || err == nil && len(msgs) == 0 {
			hi = mid
			continue
		}
		if err != nil {
			return 0, err
		}
		if msgs[0].Time.Before(t) {
			lo = msgs[0].Seq + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// hotMsg converts a message read from E2A_REQUESTS or E2A_RESPONSES.
func hotMsg(stream string, m streams.RawMsg) *storedMsg {
	return &storedMsg{stream: stream, seq: m.Seq, time: m.Time, subject: m.Subject, header: m.Header, data: m.Data}
}

// auditMsg converts a message read from E2A_AUDIT: its original subject
// and origin come from the Nats-Stream-Source header
// ("<stream> <seq> <filter> <transform> <original subject> [<ident>]").
func auditMsg(stream string, m streams.RawMsg) *storedMsg {
	sm := &storedMsg{stream: stream, seq: m.Seq, time: m.Time, subject: m.Subject, header: m.Header, data: m.Data}
	if f := strings.Fields(m.Header.Get(subjects.HeaderStreamSource)); len(f) >= 5 {
		sm.origin = f[0] + " " + f[1]
		sm.subject = f[4]
	}
	return sm
}

// originAtOrAfter reports whether sm is the copy of a message of stream
// stored at sequence seq or later.
func (sm *storedMsg) originAtOrAfter(stream string, seq uint64) bool {
	n := sm.originSeq(stream)
	return n > 0 && n >= seq
}

// originSeq is the sequence in stream of the message sm is a copy of (0
// when sm is not one).
func (sm *storedMsg) originSeq(stream string) uint64 {
	name, s, ok := strings.Cut(sm.origin, " ")
	if !ok || name != stream {
		return 0
	}
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// hotRequest returns the envelope message of id in E2A_REQUESTS, or nil.
func (a *Auditor) hotRequest(ctx context.Context, st streamState, id, pool string) (*storedMsg, error) {
	if !st.exists {
		return nil, nil
	}
	var (
		msgs []streams.RawMsg
		err  error
	)
	if pool != "" {
		subj, serr := subjects.Request(pool, id)
		if serr != nil {
			return nil, serr
		}
		var m streams.RawMsg
		err = a.call(ctx, func(c context.Context) error {
			var e error
			m, e = streams.LastBySubject(c, a.nc, st.name, subj)
			return e
		})
		msgs = []streams.RawMsg{m}
	} else {
		filter, ferr := subjects.RequestAnyPool(id)
		if ferr != nil {
			return nil, ferr
		}
		msgs, _, err = a.batch(ctx, st.name, filter, st.first, 1)
	}
	if errors.Is(err, streams.ErrNoMessages) || err == nil && len(msgs) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return hotMsg(st.name, msgs[0]), nil
}

// hotFrames returns every response message (a frame or a burst) of id
// stored in E2A_RESPONSES.
func (a *Auditor) hotFrames(ctx context.Context, st streamState, id string) ([]*storedMsg, error) {
	head, rest, err := a.hotFramesHead(ctx, st, id)
	if err != nil {
		return nil, err
	}
	return collectRest(head, rest)
}

// hotFramesHead returns the first page of the response messages of id
// stored in E2A_RESPONSES and, when more follow, an iterator over the
// others (nil otherwise), read a page at a time as it is ranged over: a
// request's frames are reported as they are read, not held all at once.
func (a *Auditor) hotFramesHead(ctx context.Context, st streamState, id string) ([]*storedMsg, iter.Seq2[*storedMsg, error], error) {
	if !st.exists {
		return nil, nil, nil
	}
	subj, err := subjects.Response(id)
	if err != nil {
		return nil, nil, err
	}
	msgs, more, err := a.batch(ctx, st.name, subj, st.first, a.page)
	if errors.Is(err, streams.ErrNoMessages) || err == nil && len(msgs) == 0 {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	head := make([]*storedMsg, len(msgs))
	for i, m := range msgs {
		head[i] = hotMsg(st.name, m)
	}
	if !more {
		return head, nil, nil
	}
	return head, func(yield func(*storedMsg, error) bool) {
		for m, err := range a.seq(ctx, st.name, subj, msgs[len(msgs)-1].Seq+1) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(hotMsg(st.name, m), nil) {
				return
			}
		}
	}, nil
}

// collectRest is head followed by what rest yields (nil: nothing).
func collectRest(head []*storedMsg, rest iter.Seq2[*storedMsg, error]) ([]*storedMsg, error) {
	if rest == nil {
		return head, nil
	}
	for m, err := range rest {
		if err != nil {
			return nil, err
		}
		head = append(head, m)
	}
	return head, nil
}

// auditPartitions returns the partition count of E2A_AUDIT.
func (a *Auditor) auditPartitions(st streamState) int {
	switch {
	case a.partitions > 0:
		return a.partitions
	case st.partitions > 0:
		return st.partitions
	}
	return streams.DefaultConfig().AuditPartitions
}

// auditRequest scans id's partition of E2A_AUDIT from sequence from for
// its envelope.
func (a *Auditor) auditRequest(ctx context.Context, st streamState, id string, from uint64) (*storedMsg, error) {
	return a.auditRequestUntil(ctx, st, id, from, time.Time{})
}

// auditRequestUntil is auditRequest stopping at the first message stored
// after until (none when zero). It reads on past archived messages only a
// corrupt batch holds: not found, it returns the first such report (the
// envelope may be in that batch), never a silent miss.
func (a *Auditor) auditRequestUntil(ctx context.Context, st streamState, id string, from uint64, until time.Time) (*storedMsg, error) {
	p, err := subjects.AuditPartition(id, a.auditPartitions(st))
	if err != nil {
		return nil, err
	}
	var lost error
	for m, err := range a.auditSeq(ctx, st, subjects.AuditRequest(p), from, a.seqFrom) {
		if unreadable(err) {
			lost = cmp.Or(lost, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if !until.IsZero() && m.Time.After(until) {
			return nil, lost
		}
		sm := auditMsg(st.name, m)
		if s, err := subjects.Parse(sm.subject); err == nil && s.Kind == subjects.KindRequest && s.RequestID == id {
			return sm, nil
		}
	}
	return nil, lost
}

// auditFrames scans id's partition of E2A_AUDIT from sequence from for its
// response messages (frames or bursts), up to the one holding its final
// frame (or the end of the stream).
func (a *Auditor) auditFrames(ctx context.Context, st streamState, id string, from uint64) ([]*storedMsg, error) {
	return a.auditFramesUntil(ctx, st, id, from, time.Time{})
}

// auditFramesUntil is auditFrames stopping at the first message stored
// after until (none when zero). It stops at the final frame: the partition
// holds every request's frames, and reading on to find a frame stored
// after the final one would make every lookup read to the stream's end
// (the hot replay and the scans of Replay's filters report such a frame).
// Archived messages only a corrupt batch holds end it with their report
// once a frame of id was read (its frames may go on in them); before, it
// reads on, and reports them when the frames it finds do not start at
// frame 0 (or it finds none).
func (a *Auditor) auditFramesUntil(ctx context.Context, st streamState, id string, from uint64, until time.Time) ([]*storedMsg, error) {
	p, err := subjects.AuditPartition(id, a.auditPartitions(st))
	if err != nil {
		return nil, err
	}
	var out []*storedMsg
	var lost error
	for m, err := range a.auditSeq(ctx, st, subjects.AuditResponse(p), from, a.seqFrom) {
		if unreadable(err) && len(out) == 0 {
			lost = cmp.Or(lost, err)
			continue
		}
		if err != nil {
			return out, err
		}
		if !until.IsZero() && m.Time.After(until) {
			break
		}
		sm := auditMsg(st.name, m)
		s, err := subjects.Parse(sm.subject)
		if err != nil || s.Kind != subjects.KindResponse || s.RequestID != id {
			continue
		}
		out = append(out, sm)
		if isFinal(sm) {
			break
		}
	}
	if lost != nil && !fromFrame0(out) {
		return out, lost
	}
	return out, nil
}

// isFinal reports whether a frame of a stored response message says
// is_final (the last one, in a sound burst).
func isFinal(m *storedMsg) bool {
	frames, _ := m.frames()
	for _, f := range frames {
		var h frameHead
		if jsonUnmarshal(f, &h) == nil && h.IsFinal {
			return true
		}
	}
	return false
}
