package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Paging limits.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
	// DefaultScanBudget bounds the index keys one list call examines when
	// post-filters (status, or a second id filter) reject entries; the
	// answer then carries a cursor to go on from.
	DefaultScanBudget = 5000
	// timeSlack absorbs the indexing delay between a request's acceptance
	// and its index write when cutting on time.
	timeSlack = time.Minute
	maxWindow = 8192
)

// Query selects index entries, newest first. Empty fields do not filter.
type Query struct {
	RequestID string
	TaskID    string
	SessionID string
	ContextID string
	User      string
	Status    string
	Since     time.Time
	Until     time.Time
	// Before is the cursor of a previous page: only entries older than it.
	Before uint64
	Limit  int
}

// Page is one page of entries, newest first.
type Page struct {
	Entries []Entry `json:"entries"`
	// Next is the cursor of the following (older) page; 0 when the index
	// holds nothing older that could match (a full page of a list for one
	// user always has one: whether anything is older may be another's).
	Next uint64 `json:"next,omitempty"`
	// Scanned is how many index keys of the user the list is for were
	// examined (every key when it is for no one user): another
	// principal's keys, passed over, are not counted, so that a search by
	// another's id answers as one by an id nobody uses.
	Scanned int `json:"scanned"`
	// Partial reports that the scan budget ran out before the page was
	// full. The budget counts every key walked, another principal's too
	// (no page walks more than it), so a list for one user may end
	// Partial, with a cursor, over keys it neither shows nor counts: that
	// tells only that the bucket walked (shared by every id, or user,
	// hashing to it: one in 4,096) holds more keys than the budget in the
	// range, the same for any id of the bucket, used or not, never whose.
	Partial bool `json:"partial,omitempty"`
}

// ErrBadQuery reports an invalid list query.
var ErrBadQuery = errors.New("console: bad query")

// lister answers list queries from the index bucket: the request records
// are read newest first by stream sequence with batched direct gets, never
// with a consumer.
type lister struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	budget int
	// agedOut reports whether a request of which no frame is stored was
	// answered all the same (egress.Service.AnswerAgedOut); nil without
	// egress: such a request shows as pending.
	agedOut func(ctx context.Context, id, pool string, seq uint64) bool
}

func (q *Query) validate() error {
	if q.Status != "" && !slices.Contains(Statuses, q.Status) {
		return fmt.Errorf("%w: status %s (want one of %s)", ErrBadQuery, jsonrpc.QuoteForMessage(q.Status), strings.Join(Statuses, ", "))
	}
	if q.Limit <= 0 {
		q.Limit = DefaultPageSize
	}
	q.Limit = min(q.Limit, MaxPageSize)
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return fmt.Errorf("%w: until before since", ErrBadQuery)
	}
	return nil
}

// match applies every filter to a joined entry.
func (q *Query) match(e *Entry) bool {
	switch {
	case q.TaskID != "" && e.TaskID != q.TaskID,
		q.SessionID != "" && e.SessionID != q.SessionID,
		q.ContextID != "" && e.ContextID != q.ContextID,
		q.User != "" && e.Principal != q.User,
		q.Status != "" && e.Status != q.Status,
		!q.Since.IsZero() && e.Time.Before(q.Since),
		!q.Until.IsZero() && e.Time.After(q.Until):
		return false
	}
	return true
}

// keyFilter returns the subject key the scan walks and, for a pointer
// family, the id its pointers must hold: the bucket of the most selective
// id of the query (task, session, context), else the records of the
// user's bucket, else every record.
func (q *Query) keyFilter() (key, pointerValue string) {
	switch {
	case q.TaskID != "":
		return pointerKey(fieldTask, q.TaskID), q.TaskID
	case q.SessionID != "":
		return pointerKey(fieldSession, q.SessionID), q.SessionID
	case q.ContextID != "":
		return pointerKey(fieldContext, q.ContextID), q.ContextID
	case q.User != "":
		return recordKey(q.User), ""
	}
	return prefixRequest + "*", ""
}

// Get returns the entry of one request, or nil when E2A_REQUESTS does not
// hold it. The index is not read (it keeps no subject per request): the
// record is made from the stored envelope, one direct get on
// e2a.req.*.<id>, as egress finds a request; its Cursor is 0.
func (l *lister) Get(ctx context.Context, requestID string) (*Entry, error) {
	e, err := l.getOf(ctx, requestID, "")
	if e != nil {
		l.taskLatest(ctx, e)
	}
	return e, err
}

// interrupted reports whether status ends a turn waiting for the client
// (input-required, auth-required).
func interrupted(status string) bool {
	return status == StatusInputRequired || status == StatusAuthRequired
}

// withTaskLatest sets TaskLatest on the interrupted turns of tasks among
// entries (taskLatest), 16 at a time.
func (l *lister) withTaskLatest(ctx context.Context, entries []Entry) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, writeWorkers)
	for i := range entries {
		if !interrupted(entries[i].Status) || entries[i].TaskID == "" {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			l.taskLatest(ctx, &entries[i])
		})
	}
	wg.Wait()
}

// taskLatest sets e.TaskLatest when e is an interrupted turn of a task
// whose newest turn is another request: the first entry of the task's
// list, its pointers walked newest first as a search by task walks them (a
// page of one), with its progress. Only the turns of e's principal count
// (ingress refuses another principal's request naming the task; one that
// reached the stream anyway is not this task's turn, nor shown). It costs
// only interrupted turns, when a page or a detail shows them: one list of
// the task (its span, a window of pointers, the record, the progress); a
// failed read leaves it unset (best effort, as the index is).
func (l *lister) taskLatest(ctx context.Context, e *Entry) {
	if !interrupted(e.Status) || e.TaskID == "" {
		return
	}
	pg, err := l.list(ctx, Query{TaskID: e.TaskID, User: e.Principal, Limit: 1})
	if err != nil || len(pg.Entries) == 0 || pg.Entries[0].RequestID == e.RequestID {
		return
	}
	n := pg.Entries[0]
	e.TaskLatest = &TaskTurn{RequestID: n.RequestID, Status: n.Status}
}

// getOf is Get of a request of user's (any user's when ""): another
// user's request is nil, its frames never read, so that it costs what an
// unknown id costs (one direct get) and its timing does not tell it exists.
func (l *lister) getOf(ctx context.Context, requestID, user string) (*Entry, error) {
	subj, err := subjects.RequestAnyPool(requestID)
	if err != nil {
		return nil, nil
	}
	m, ok, err := l.last(ctx, streams.RequestsStream, subj, "read request")
	if !ok {
		return nil, err
	}
	r, ok := recordOf(m.Subject, m.Data, m.Time, m.Seq)
	if !ok || (user != "" && r.Principal != user) {
		return nil, nil
	}
	p, err := l.progressOf(ctx, r)
	if err != nil {
		return nil, err
	}
	e := joinEntry(r, p, 0)
	return &e, nil
}

// last reads the last message stored under subj in stream, one direct get
// answered by any replica. ok is false when there is none and when the read
// failed: err then says so, what naming the read ("console: <what>: …").
func (l *lister) last(ctx context.Context, stream, subj, what string) (m streams.RawMsg, ok bool, err error) {
	m, err = streams.LastBySubject(ctx, l.nc, stream, subj)
	if errors.Is(err, streams.ErrNoMessages) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("console: %s: %w", what, err)
	}
	return m, true, nil
}

// progressOf is the progress of the request of r: progress, or, when no
// frame of it is stored and it was answered all the same (agedOut: its
// frames aged out or were evicted), StatusExpired.
func (l *lister) progressOf(ctx context.Context, r record) (*progress, error) {
	p, err := l.progress(ctx, r.RequestID)
	if p != nil || err != nil || l.agedOut == nil || r.Seq == 0 {
		return p, err
	}
	if l.agedOut(ctx, r.RequestID, r.Pool, r.Seq) {
		return &progress{Status: StatusExpired}, nil
	}
	return nil, nil
}

// progress reads a request's progress from its frames in E2A_RESPONSES: the
// last frame (the last of its last message, which may hold a burst of
// frames) gives the frame count and, when final, the outcome (succeeded,
// failed, or the state of an interrupted turn), its error
// code and the end time; the first message's stored time is when the agent
// started answering. nil when the request has no frame yet (pending) or
// its frames are no longer kept. Two direct gets by subject, answered by
// any replica: the index itself is not written per frame.
func (l *lister) progress(ctx context.Context, requestID string) (*progress, error) {
	subj, err := subjects.Response(requestID)
	if err != nil {
		return nil, nil
	}
	last, ok, err := l.last(ctx, streams.ResponsesStream, subj, "read frames")
	if !ok {
		return nil, err
	}
	// The last message may hold a burst of frames: its last one counts.
	data, n, err := e2a.LastInBurst(last.Header.Get(subjects.HeaderFrames), last.Data)
	var f frameFields
	if err != nil || json.Unmarshal(data, &f) != nil || f.Sequence < int64(n-1) {
		// An undecodable frame (or burst): the request has frames, what
		// they say is for the stream view.
		return &progress{Status: StatusRunning}, nil
	}
	p := &progress{Status: StatusRunning, Frames: f.Sequence + 1}
	if f.IsFinal {
		p.Status, p.Finished = StatusSucceeded, last.Time.UTC()
		if f.Status == e2a.StatusFailed {
			p.Status, p.ErrorCode = StatusFailed, f.Body.Code
		} else if f.Kind == e2a.KindA2AStreamEvent || f.Kind == e2a.KindA2ATask {
			// A frame that may interrupt the turn (e2a.Response.Interrupt).
			if r, err := e2a.ResponseFromJSON(data); err == nil {
				if st, _, ok := r.Interrupt(); ok {
					p.Status = st
				}
			}
		}
	}
	if f.Sequence == int64(n-1) {
		// The last message holds frame 0 too: it is also the first.
		p.FirstFrame = last.Time.UTC()
		return p, nil
	}
	first, _, err := streams.DirectGetBatch(ctx, l.nc, streams.ResponsesStream, subj, 1, 1)
	if err == nil && len(first) == 1 {
		p.FirstFrame = first[0].Time.UTC()
	}
	return p, nil
}

// List returns a page of entries matching q, newest first, an
// interrupted turn of a task that went on naming the task's newest turn
// (Entry.TaskLatest).
func (l *lister) List(ctx context.Context, q Query) (Page, error) {
	page, err := l.list(ctx, q)
	if err == nil {
		l.withTaskLatest(ctx, page.Entries)
	}
	return page, err
}

// list is List without TaskLatest.
func (l *lister) list(ctx context.Context, q Query) (Page, error) {
	if err := q.validate(); err != nil {
		return Page{}, err
	}
	page := Page{Entries: []Entry{}}
	if q.RequestID != "" {
		e, err := l.getOf(ctx, q.RequestID, q.User)
		if err != nil {
			return page, err
		}
		page.Scanned = 1
		if e != nil && q.match(e) && (q.Before == 0 || e.Cursor < q.Before) {
			page.Entries = append(page.Entries, *e)
		}
		return page, nil
	}
	key, want := q.keyFilter()
	filter := kvSubject(key)
	first, last, found, err := l.span(ctx, filter)
	if err != nil || !found {
		return page, err
	}
	hi := last + 1 // exclusive bound
	if q.Before != 0 {
		hi = min(hi, q.Before)
	}
	if !q.Until.IsZero() {
		b, err := l.seqAfter(ctx, filter, first, hi, q.Until.Add(timeSlack))
		if err != nil {
			return page, err
		}
		hi = b
	}
	w := walk{lister: l, q: &q, filter: filter, want: want, first: first, page: page}
	return w.run(ctx, hi)
}

// walk is one list's walk of the index below a bound, newest first. The
// scan budget counts every key it examines (examined); the page's Scanned
// only the keys of the user the list is for (every key when it is for no
// one user): another principal's keys, passed over, count in nothing the
// page says but its budget (the residual: see Page.Partial).
type walk struct {
	*lister
	q            *Query
	filter, want string
	first        uint64 // the first message on filter: the walk's floor
	examined     int
	page         Page
}

// run walks down from hi (exclusive) in windows of growing size.
func (w *walk) run(ctx context.Context, hi uint64) (Page, error) {
	window := uint64(max(4*w.q.Limit, 64))
	for hi > w.first {
		if w.examined >= w.budget {
			w.page.Partial, w.page.Next = true, hi
			return w.page, nil
		}
		lo := max(w.first, hi-min(window, hi-w.first))
		msgs, err := w.readRange(ctx, w.filter, lo, hi)
		if err != nil {
			return w.page, err
		}
		slices.Reverse(msgs)
		if w.window(ctx, msgs) {
			return w.page, nil
		}
		hi = lo
		window = min(2*window, maxWindow)
	}
	return w.page, nil
}

// window resolves and filters msgs (newest first) in chunks, so that a
// page that fills early does not fetch what it will not show; true when
// the page is done (full, past since, or out of budget).
func (w *walk) window(ctx context.Context, msgs []streams.RawMsg) bool {
	for i := 0; i < len(msgs); {
		if w.examined >= w.budget {
			// The budget ran out inside the window: go on below the last
			// message examined (run checked it before the window: i > 0).
			w.page.Partial, w.page.Next = true, msgs[i-1].Seq
			return true
		}
		n := min(len(msgs)-i, max(w.q.Limit-len(w.page.Entries), 8))
		for j, r := range w.resolve(ctx, msgs[i:i+n], w.want, w.q.User) {
			w.examined++
			if r.own {
				w.page.Scanned++
			}
			e := r.entry
			if e == nil {
				// Another principal's entry (with ?user=, or the caller's
				// own requests forced: resolve gives nil) is passed over
				// as an entry of another id is, before the since cut, and
				// is not counted: it ends nothing early, so neither the
				// page nor its scanned count tells it exists, nor when it
				// was made.
				continue
			}
			if !w.q.Since.IsZero() && e.Time.Before(w.q.Since.Add(-timeSlack)) {
				return true // older than the range: nothing further can match
			}
			if !w.q.match(e) {
				continue
			}
			w.page.Entries = append(w.page.Entries, *e)
			if len(w.page.Entries) == w.q.Limit {
				w.page.Next = msgs[i+j].Seq
				if w.page.Next <= w.first && w.q.User == "" {
					// Nothing older on the filter. A list for one user
					// keeps the cursor (its next page is empty): the
					// filter's first key may be another principal's, and
					// a cursor set or not by it would tell it exists.
					w.page.Next = 0
				}
				return true
			}
		}
		i += n
	}
	return false
}

// span is the part of the index a list on filter walks: from the first
// message on filter to the index's last; found is false when filter has
// none. A list walks no lower than that first message: a filter with no
// message (a new user, a task nobody used) costs one get, where it walked
// the whole index back, every window a get, the cost growing with
// everyone's history rather than with the page.
func (l *lister) span(ctx context.Context, filter string) (first, last uint64, found bool, err error) {
	s, err := l.js.Stream(ctx, kvStream)
	if err != nil {
		return 0, 0, false, fmt.Errorf("console: index stream: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, false, fmt.Errorf("console: index stream: %w", err)
	}
	first, last = info.State.FirstSeq, info.State.LastSeq
	if last == 0 || last < first {
		return first, last, false, nil
	}
	head, _, err := streams.DirectGetBatch(ctx, l.nc, kvStream, filter, first, 1)
	switch {
	case errors.Is(err, streams.ErrNoMessages):
		return first, last, false, nil
	case err != nil:
		return first, last, false, fmt.Errorf("console: read index: %w", err)
	case len(head) > 0:
		first = max(first, head[0].Seq)
	}
	return first, last, true, nil
}

// readRange returns the messages matching filter with lo <= seq < hi.
func (l *lister) readRange(ctx context.Context, filter string, lo, hi uint64) ([]streams.RawMsg, error) {
	var out []streams.RawMsg
	for from := lo; from < hi; {
		batch := int(min(hi-from, streams.MaxDirectGetBatch))
		msgs, more, err := streams.DirectGetBatch(ctx, l.nc, kvStream, filter, from, batch)
		if errors.Is(err, streams.ErrNoMessages) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("console: read index: %w", err)
		}
		for _, m := range msgs {
			if m.Seq >= hi {
				return out, nil
			}
			if m.Header.Get(subjects.HeaderKVOperation) != "" {
				continue // delete or purge marker
			}
			out = append(out, m)
		}
		if !more || len(msgs) == 0 {
			break
		}
		from = msgs[len(msgs)-1].Seq + 1
	}
	return out, nil
}

// seqAfter returns the first sequence in [lo, hi) of a message matching
// filter stored after t (hi when none): stored times grow with the
// sequence, so a binary search over direct gets finds it.
func (l *lister) seqAfter(ctx context.Context, filter string, lo, hi uint64, t time.Time) (uint64, error) {
	for lo < hi {
		mid := lo + (hi-lo)/2
		msgs, _, err := streams.DirectGetBatch(ctx, l.nc, kvStream, filter, mid, 1)
		if errors.Is(err, streams.ErrNoMessages) || (err == nil && (len(msgs) == 0 || msgs[0].Seq >= hi)) {
			hi = mid
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("console: read index: %w", err)
		}
		if msgs[0].Time.After(t) {
			hi = mid
		} else {
			lo = msgs[0].Seq + 1
		}
	}
	return hi, nil
}

// resolved is an index message as a list sees it: its entry (nil when it
// does not resolve or is not user's) and own, whether the key is one of
// user's (any key when user is ""), which the page's Scanned counts.
type resolved struct {
	entry *Entry
	own   bool
}

// resolve turns index messages into entries (nil for messages that do not
// resolve): a record message holds the record; a pointer (want != "")
// that points at want is resolved by reading its record by sequence, any
// other (another id of the same bucket, or, by the owner it names, another
// user's: its record is not read) is nil. The progress is read from
// the frames of each record of user's (of every one when user is ""):
// another user's record is nil, its frames not read, as the list passes
// it over (reading them cost the caller time that told it existed). A key
// is user's when it is a record of user's or a pointer naming user its
// owner (or, of an earlier build, whose record is user's).
func (l *lister) resolve(ctx context.Context, msgs []streams.RawMsg, want, user string) []resolved {
	out := make([]resolved, len(msgs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, writeWorkers)
	for i, m := range msgs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r, ok, mine := l.record(ctx, m, want, user)
			out[i].own = user == "" || mine || (ok && r.Principal == user)
			if !ok || (user != "" && r.Principal != user) {
				return
			}
			p, _ := l.progressOf(ctx, r)
			e := joinEntry(r, p, m.Seq)
			out[i].entry = &e
		})
	}
	wg.Wait()
	return out
}

// record returns the record an index message holds or points at (want !=
// "": a pointer, kept only when it points at want and, when user is set
// and the pointer names its owner, is user's). A pointer of another user's
// is dropped before its record is read, so that a search by another
// user's id reads what one by an unused id of the same bucket reads; a
// pointer of an earlier build (no owner) is resolved, and the caller
// checks the record's principal. mine reports a pointer naming user
// (set) as its owner, whatever id it holds.
func (l *lister) record(ctx context.Context, m streams.RawMsg, want, user string) (r record, ok, mine bool) {
	if want == "" {
		return r, json.Unmarshal(m.Data, &r) == nil && r.RequestID != "", false
	}
	var p pointer
	if json.Unmarshal(m.Data, &p) != nil {
		return r, false, false
	}
	mine = user != "" && p.Owner != nil && *p.Owner == user
	if p.Value != want || p.Seq == 0 || (user != "" && p.Owner != nil && !mine) {
		return r, false, mine
	}
	data, subj, err := l.getSeq(ctx, p.Seq)
	if err != nil || !strings.HasPrefix(subj, kvSubject(prefixRequest)) {
		return r, false, mine // expired or not a record
	}
	return r, json.Unmarshal(data, &r) == nil && r.RequestID != "", mine
}

// getSeq reads the index message at seq with a direct get by sequence
// alone (no batch, no subject: the server loads that message and counts
// nothing), returning its data and subject.
func (l *lister) getSeq(ctx context.Context, seq uint64) (data []byte, subj string, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, streams.DefaultDirectGetTimeout)
		defer cancel()
	}
	reply, err := l.nc.RequestWithContext(ctx, subjects.DirectGet(kvStream), fmt.Appendf(nil, `{"seq":%d}`, seq))
	if err != nil {
		return nil, "", err
	}
	if st := streams.ReplyStatus(reply); st != "" {
		return nil, "", fmt.Errorf("console: index message %d: %s %s", seq, st, reply.Header.Get("Description"))
	}
	return reply.Data, reply.Header.Get(jetstream.SubjectHeader), nil
}
