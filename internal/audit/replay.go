package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

var jsonUnmarshal = json.Unmarshal

// Source tells Replay which streams to read.
type Source string

// Sources of Replay.
const (
	// SourceAuto reads E2A_REQUESTS and E2A_RESPONSES, and E2A_AUDIT for
	// what they no longer hold (older than their max age, or frames that
	// aged out first).
	SourceAuto Source = "auto"
	// SourceHot reads E2A_REQUESTS and E2A_RESPONSES only.
	SourceHot Source = "hot"
	// SourceAudit reads E2A_AUDIT only.
	SourceAudit Source = "audit"
)

// StateNotFound is the state of a requested id found nowhere.
const StateNotFound = "not_found"

// ErrQuery reports an invalid Query.
var ErrQuery = errors.New("audit: invalid query")

// Query selects the requests Replay reads: RequestIDs, or every request
// matching all the filters that are set (TaskID, ContextID, SessionID,
// Pool) stored between Since and Until.
type Query struct {
	// RequestIDs are read one by one, in order. Since, when set, bounds
	// the scan of E2A_AUDIT; the other filters must be empty.
	RequestIDs []string
	// Filters on the envelope: task_id, context_id, session_id.
	TaskID    string
	ContextID string
	SessionID string
	// Pool is the agent pool (the <agent> token of the request subject).
	Pool string
	// Since and Until bound the store time of the requests (zero: no
	// bound).
	Since, Until time.Time
	// Source is SourceAuto (the default), SourceHot or SourceAudit.
	Source Source
	// Limit stops after that many requests (0: no limit).
	Limit int
	// NoFrames leaves frame records out (summaries still count and check
	// every frame).
	NoFrames bool
}

// Validate reports, wrapping [ErrQuery], a query that asks for nothing
// valid (as Replay does before reading anything); it fills in the default
// Source.
func (q *Query) Validate() error {
	switch q.Source {
	case "":
		q.Source = SourceAuto
	case SourceAuto, SourceHot, SourceAudit:
	default:
		return fmt.Errorf("%w: source %q is not auto, hot or audit", ErrQuery, q.Source)
	}
	if q.Limit < 0 {
		return fmt.Errorf("%w: negative limit", ErrQuery)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return fmt.Errorf("%w: until %s before since %s", ErrQuery, q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	if q.Pool != "" {
		if err := subjects.ValidatePool(q.Pool); err != nil {
			return fmt.Errorf("%w: %v", ErrQuery, err)
		}
	}
	filtered := q.TaskID != "" || q.ContextID != "" || q.SessionID != ""
	if len(q.RequestIDs) > 0 {
		if filtered {
			return fmt.Errorf("%w: give request ids or task/context/session filters, not both", ErrQuery)
		}
		for _, id := range q.RequestIDs {
			if id == "" {
				// No request has one (subjects.ValidateRequestID).
				return fmt.Errorf("%w: an empty request id", ErrQuery)
			}
			if err := subjects.ValidateID(id); err != nil {
				return fmt.Errorf("%w: %v", ErrQuery, err)
			}
		}
		return nil
	}
	if !filtered && q.Pool == "" && q.Since.IsZero() && q.Until.IsZero() {
		return fmt.Errorf("%w: give request ids, a task, context or session id, a pool, or a time range", ErrQuery)
	}
	return nil
}

func (q *Query) match(pool string, env *e2a.Envelope) bool {
	if q.Pool != "" && pool != q.Pool {
		return false
	}
	if q.TaskID == "" && q.ContextID == "" && q.SessionID == "" {
		return true
	}
	if env == nil {
		return false
	}
	return (q.TaskID == "" || env.TaskID == q.TaskID) &&
		(q.ContextID == "" || env.ContextID == q.ContextID) &&
		(q.SessionID == "" || env.SessionID == q.SessionID)
}

// Stats counts what Replay found.
type Stats struct {
	// Requests is the number of requests reported (found or not).
	Requests int `json:"requests"`
	// Frames is the number of frames read.
	Frames int `json:"frames"`
	// Complete, Incomplete, NoFrames and NotFound count requests by state.
	Complete   int `json:"complete"`
	Incomplete int `json:"incomplete"`
	NoFrames   int `json:"no_frames"`
	NotFound   int `json:"not_found"`
	// Violations is the number of requests with at least one violation.
	Violations int `json:"violations"`
}

func (s *Stats) add(sum *Summary) {
	s.Requests++
	s.Frames += sum.Frames
	switch sum.State {
	case StateComplete:
		s.Complete++
	case StateIncomplete:
		s.Incomplete++
	case StateNoFrames:
		s.NoFrames++
	case StateNotFound:
		s.NotFound++
	}
	if !sum.OK() {
		s.Violations++
	}
}

// found is one request's messages.
type found struct {
	id   string
	pool string
	req  *storedMsg
	// frames are its stored response messages, each holding one frame or
	// a burst of them; rest, when set, yields the ones after them, read as
	// the request is reported (hotFramesOf).
	frames []*storedMsg
	rest   iter.Seq2[*storedMsg, error]
	// n is its place among the requests a scan of E2A_AUDIT met.
	n int
}

// replayCtx holds the stream states of one Replay.
type replayCtx struct {
	q         Query
	requests  streamState
	responses streamState
	audit     streamState
	emit      func(Record) error
	stats     Stats
	// bounded (Request, the read API's lookups) keeps findByID within
	// windows of the id's time: no scan from the query's start when the
	// windows miss, no frames looked for without an envelope, and a
	// request's frames read no further than span after its copy.
	bounded bool
	span    time.Duration
	// near is the time a bounded search of an id without one goes by
	// (RequestNear); zero for any other search.
	near time.Time
	// lost is the first report of archived messages only a corrupt batch
	// holds that a read went on past (keepLost).
	lost error
}

// keepLost keeps err when it is the archive's report of messages only a
// corrupt batch holds (unreadable), and reports whether it was: the
// replay goes on without them, reporting every request the archive still
// reads, the ones after the batch too, and returns the first such report
// at the end. One corrupt batch of months of history stopped a scan
// crossing it with nothing reported (a scan reports once it has read its
// range), and a list of ids at the first id it held.
func (rc *replayCtx) keepLost(err error) bool {
	if !unreadable(err) {
		return false
	}
	rc.lost = cmp.Or(rc.lost, err)
	return true
}

// framesUntil is when a bounded search stops reading the frames of the
// request whose copy is req (zero: no bound).
func (rc *replayCtx) framesUntil(req *storedMsg) time.Time {
	if !rc.bounded || req == nil {
		return time.Time{}
	}
	return req.time.Add(rc.span + copyLag)
}

// Replay finds the requests q selects and calls emit, for each in turn,
// with its envelope (KindRequest, when found), its frames in stream order
// (KindFrame) and a KindSummary record holding the invariant checks:
// RequestIDs in their order; a scan the hot stream's requests in the
// order stored, then E2A_AUDIT's in the order they finished (scanAudit,
// which may add a further summary for a frame stored after a request's
// final one). A request's frames are emitted as they are checked, and
// those of a request whose envelope and frame 0 the hot streams hold (or
// read with SourceHot) as they are read, a page at a time: a read that
// fails in the middle of a request returns its error after the records
// emitted. It
// returns what it counted; violations are reported in the summaries, not
// as an error. It returns ErrQuery for an invalid query, the error of emit,
// and read errors; archived messages only a corrupt batch holds (an
// *archive.UnreadableError, naming the batch) it reads past, and returns
// their report once every other request is reported, wrapped with
// ErrHistoryCorrupt (as any other report of a corrupt batch).
func (a *Auditor) Replay(ctx context.Context, q Query, emit func(Record) error) (_ Stats, err error) {
	defer func() { err = corrupt(err) }()
	if err := q.Validate(); err != nil {
		return Stats{}, err
	}
	rc := &replayCtx{q: q, emit: emit}
	if rc.requests, err = a.state(ctx, streams.RequestsStream); err != nil {
		return Stats{}, err
	}
	if rc.responses, err = a.state(ctx, streams.ResponsesStream); err != nil {
		return Stats{}, err
	}
	if q.Source != SourceHot {
		if rc.audit, err = a.state(ctx, streams.AuditStream); err != nil {
			return Stats{}, err
		}
		if rc.audit.exists {
			if rc.audit, err = a.withArchive(ctx, rc.audit); err != nil {
				return Stats{}, err
			}
		}
	}
	if q.Source == SourceAudit && !rc.audit.exists {
		return Stats{}, fmt.Errorf("audit: stream %s does not exist", streams.AuditStream)
	}
	if len(q.RequestIDs) > 0 {
		for i, id := range q.RequestIDs {
			if q.Limit > 0 && i >= q.Limit {
				break
			}
			f, err := a.findByID(ctx, rc, id)
			if rc.keepLost(err) {
				continue // the id may be in the corrupt batch: named by the error returned
			}
			if err != nil {
				return rc.stats, err
			}
			if err := rc.report(f); err != nil {
				return rc.stats, err
			}
		}
		return rc.stats, rc.lost
	}
	if err := a.scan(ctx, rc); err != nil {
		return rc.stats, err
	}
	return rc.stats, rc.lost
}

// useHot and useAudit tell which streams the query reads.
func (rc *replayCtx) useHot() bool   { return rc.q.Source != SourceAudit }
func (rc *replayCtx) useAudit() bool { return rc.q.Source != SourceHot && rc.audit.exists }

// needAudit reports whether the hot streams miss part of a request.
func needAudit(f *found) bool {
	return f.req == nil || !fromFrame0(f.frames)
}

// fromFrame0 reports whether frames start with frame 0.
func fromFrame0(frames []*storedMsg) bool {
	if len(frames) == 0 {
		return false
	}
	var h frameHead
	return jsonUnmarshal(frames[0].firstFrame(), &h) == nil && h.Sequence != nil && *h.Sequence == 0
}

// requestTime is the earliest plausible time of a request: its store time,
// or the envelope's timestamp when earlier, less margin for clocks.
func requestTime(m *storedMsg, margin time.Duration) time.Time {
	t := m.time
	if env, err := e2a.FromJSON(m.data); err == nil && env.Timestamp != "" {
		if ts, err := e2a.ParseTime(env.Timestamp); err == nil && ts.Before(t) {
			t = ts
		}
	}
	return t.Add(-margin)
}

func (a *Auditor) findByID(ctx context.Context, rc *replayCtx, id string) (*found, error) {
	f := &found{id: id}
	var err error
	if rc.useHot() {
		if f.req, err = a.hotRequest(ctx, rc.requests, id, rc.q.Pool); err != nil {
			return nil, err
		}
		if err := a.hotFramesOf(ctx, rc, f); err != nil {
			return nil, err
		}
	}
	if rc.useAudit() && needAudit(f) {
		from, err := a.seqAtTime(ctx, rc.audit, subjects.AllAudit, rc.q.Since)
		if err != nil {
			return nil, err
		}
		if f.req == nil {
			if f.req, err = a.auditRequestHinted(ctx, rc, id, from); err != nil {
				return nil, err
			}
			if f.req == nil && rc.bounded {
				return f, nil
			}
			if f.req != nil && rc.q.Pool != "" && auditPool(f.req) != rc.q.Pool {
				// Another pool's request: not one --pool asks for, as the
				// hot lookup (by the pool's subject) finds none.
				return &found{id: id}, nil
			}
		}
		frames, err := a.auditFramesOf(ctx, rc, id, f.req, from)
		if err != nil {
			return nil, err
		}
		frames = ownFrames(f.req, frames)
		if len(frames) > len(f.frames) {
			f.frames = frames
		}
	}
	if f.req == nil && rc.q.Pool != "" {
		// Frames name no pool: without an envelope of the pool asked for
		// they may be another pool's request (the hot lookup, by the
		// pool's subject, finds none of it), not one --pool asks for.
		return &found{id: id}, nil
	}
	if f.req != nil {
		f.pool = auditPool(f.req)
	}
	return f, nil
}

// ownFrames is frames less the messages whose frames name another
// user_id than req's envelope (all of them when req is nil): an id taken
// again by another principal once the first request left the hot streams
// (ingress refuses that only while they hold it) has both requests' frames
// in E2A_AUDIT, and those read after req's copy may be the newcomer's
// (its frames from 0 again, under the first request's envelope).
func ownFrames(req *storedMsg, frames []*storedMsg) []*storedMsg {
	if req == nil {
		return frames
	}
	owner := userID(req.data)
	return slices.DeleteFunc(frames, func(m *storedMsg) bool {
		u := userID(m.firstFrame())
		return u != "" && u != owner
	})
}

// auditPool is the pool of the request m, by its subject ("" when it
// does not parse).
func auditPool(m *storedMsg) string {
	s, err := subjects.Parse(m.subject)
	if err != nil {
		return ""
	}
	return s.Agent
}

// auditFramesOf reads id's frames from E2A_AUDIT, from sequence from on
// when its request was not found. Frames are copied after their request
// was stored, give or take the order of the two sources' copies: they are
// read from nearClock before the request's copy first, and kept when they
// start at frame 0; else from the clock margin before the request's time
// (requestTime), as before.
func (a *Auditor) auditFramesOf(ctx context.Context, rc *replayCtx, id string, req *storedMsg, from uint64) ([]*storedMsg, error) {
	if req == nil {
		return a.auditFrames(ctx, rc.audit, id, from)
	}
	until := rc.framesUntil(req)
	if d := min(nearClock, a.margin); d < a.margin {
		near, err := a.seqAtTime(ctx, rc.audit, subjects.AllAudit, req.time.Add(-d))
		if err != nil {
			return nil, err
		}
		if near > from {
			frames, err := a.auditFramesUntil(ctx, rc.audit, id, near, until)
			if err != nil || len(frames) > 0 && !needAudit(&found{req: req, frames: frames}) {
				return frames, err
			}
		}
	}
	at, err := a.seqAtTime(ctx, rc.audit, subjects.AllAudit, requestTime(req, a.margin))
	if err != nil {
		return nil, err
	}
	frames, err := a.auditFramesUntil(ctx, rc.audit, id, max(from, at), until)
	if err != nil || at <= from || len(frames) > 0 && !needAudit(&found{req: req, frames: frames}) {
		return frames, err
	}
	// The two sources' copies are not ordered: when one trailed the other
	// by more than the margin, the frames' copies precede the window. Read
	// them from from (the scan's start): slower, never "no frames" for a
	// request whose frames are stored.
	return a.auditFramesUntil(ctx, rc.audit, id, from, until)
}

// auditRequestHinted is auditRequest from the time in id (hintSince),
// and from from when the hint finds nothing (an id whose clock ran ahead
// of the stream's): a UUIDv7 request older than the hot retention is found
// after log2(messages) direct gets and a scan of its partition over the
// margin, whatever the audit holds.
func (a *Auditor) auditRequestHinted(ctx context.Context, rc *replayCtx, id string, from uint64) (*storedMsg, error) {
	t, ok := egress.RequestIDTime(id)
	if !ok && rc.bounded && !rc.near.IsZero() {
		t, ok = rc.near, true
	}
	switch {
	case !ok && rc.bounded:
		return nil, nil
	case !ok:
		return a.auditRequest(ctx, rc.audit, id, from)
	case rc.bounded:
		return a.auditRequestWindows(ctx, rc, id, t, from)
	}
	// Clocks in step (NTP) first: a window of nearClock each side of the
	// id's time; then the margin's.
	for _, d := range []time.Duration{min(nearClock, a.margin), a.margin} {
		since, ok := hintSince(id, rc.q.Since, d)
		if !ok {
			break
		}
		hinted, err := a.seqAtTime(ctx, rc.audit, subjects.AllAudit, since)
		if err != nil {
			return nil, err
		}
		if hinted <= from {
			break
		}
		m, err := a.auditRequestUntil(ctx, rc.audit, id, hinted, t.Add(d+copyLag))
		if m != nil || err != nil {
			return m, err
		}
	}
	return a.auditRequest(ctx, rc.audit, id, from)
}

// auditRequestWindows is auditRequestHinted for a bounded search (from is
// where the query's Since, the id's time t less the clock margin, puts
// the search): the window of nearClock around t, then the rest of the
// margin's window, before the first and after it, each message read once,
// and no further: a miss reads the margin's window (plus the sourcing lag)
// of one partition, whatever the history holds.
func (a *Auditor) auditRequestWindows(ctx context.Context, rc *replayCtx, id string, t time.Time, from uint64) (*storedMsg, error) {
	near := min(nearClock, a.margin)
	at, err := a.seqAtTime(ctx, rc.audit, subjects.AllAudit, t.Add(-near))
	if err != nil {
		return nil, err
	}
	nearEnd := t.Add(near + copyLag)
	m, err := a.auditRequestUntil(ctx, rc.audit, id, max(at, from), nearEnd)
	if m != nil || err != nil || near == a.margin {
		return m, err
	}
	if at > from {
		if m, err = a.auditRequestUntil(ctx, rc.audit, id, from, t.Add(-near)); m != nil || err != nil {
			return m, err
		}
	}
	after, err := a.seqAtTime(ctx, rc.audit, subjects.AllAudit, nearEnd)
	if err != nil {
		return nil, err
	}
	return a.auditRequestUntil(ctx, rc.audit, id, after, t.Add(a.margin+copyLag))
}

// report emits the records of one request.
func (rc *replayCtx) report(f *found) error {
	_, err := rc.reportChecked(f)
	return err
}

// reportChecked is report, returning the checker of the request's frames
// (which holds every violation its summary reports).
func (rc *replayCtx) reportChecked(f *found) (*checker, error) {
	c := newChecker(f.id)
	var envErr error
	if f.req != nil {
		_, envErr = e2a.FromJSON(f.req.data)
		if err := rc.emit(requestRecord(f.req, f.id, f.pool)); err != nil {
			return nil, err
		}
	}
	// Each frame is emitted as it is checked, those f.rest reads as they
	// are read: a request's records are not held until its last frame.
	msgs := 0
	add := func(m *storedMsg) error {
		msgs++
		for _, fr := range c.add(m) {
			if rc.q.NoFrames {
				continue
			}
			if err := rc.emit(frameRecord(m, f.id, f.pool, fr)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, m := range f.frames {
		if err := add(m); err != nil {
			return nil, err
		}
	}
	if f.rest != nil {
		for m, err := range f.rest {
			if err == nil {
				err = add(m)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if f.req == nil && msgs > 0 {
		// Frames are stored after their envelope, which E2A_AUDIT and the
		// archive keep as long as them: a request whose frames are found
		// and envelope is not cannot be audited, a violation (it was
		// reported complete and sound). With SourceHot alone the envelope
		// may have aged out of E2A_REQUESTS a moment before its frames:
		// the violation names the streams read.
		c.violation("%d frames stored without their envelope: no request %q in %s", c.frames, f.id, rc.envelopeStreams())
	}
	if envErr != nil {
		c.violation("envelope at %s %d: %v", f.req.stream, f.req.seq, envErr)
	}
	sum := c.summary(f.req != nil)
	if f.req == nil && msgs == 0 {
		sum.State = StateNotFound
	}
	rc.stats.add(sum)
	return c, rc.emit(Record{Kind: KindSummary, RequestID: f.id, Pool: f.pool, Summary: sum})
}

// reportLate emits the frames of m, a message of the reported request id
// stored after its final frame, and a further summary of it that reports
// them. Stats count the frames, and the request among those with
// violations when its first summary had none.
func (rc *replayCtx) reportLate(id string, fin *finishedReq, m *storedMsg) error {
	sound, before := len(fin.check.violations) == 0, fin.check.frames
	for _, fr := range fin.check.add(m) {
		if rc.q.NoFrames {
			continue
		}
		if err := rc.emit(frameRecord(m, id, fin.pool, fr)); err != nil {
			return err
		}
	}
	sum := fin.check.summary(fin.requestFound)
	rc.stats.Frames += sum.Frames - before
	if sound && !sum.OK() {
		rc.stats.Violations++
	}
	return rc.emit(Record{Kind: KindSummary, RequestID: id, Pool: fin.pool, Summary: sum})
}

// envelopeStreams names the streams a request's envelope was looked for in.
func (rc *replayCtx) envelopeStreams() string {
	var in []string
	if rc.useHot() {
		in = append(in, streams.RequestsStream)
	}
	if rc.useAudit() {
		in = append(in, streams.AuditStream)
		if rc.audit.archived() {
			in = append(in, streams.ArchiveStream)
		}
	}
	return strings.Join(in, ", ")
}

// scan reads the requests in the query's time range that match its
// filters: from the hot stream, then from E2A_AUDIT.
func (a *Auditor) scan(ctx context.Context, rc *replayCtx) error {
	q := rc.q
	done := map[string]bool{}
	if rc.useHot() && rc.requests.exists {
		if err := a.scanHot(ctx, rc, done); err != nil {
			return err
		}
	}
	if !rc.useAudit() || rc.limited(done) {
		return nil
	}
	// E2A_AUDIT: with SourceAuto only for the part of the range the hot
	// stream no longer holds: the copies of requests stored before its
	// first one. The boundary is the original's sequence, not the copy's
	// time: a copy is stored after its original, so a request that just
	// left the hot stream can have its copy stored after the hot stream's
	// first request (found by neither scan, before).
	var hotFirst uint64
	if q.Source == SourceAuto && rc.requests.exists && rc.requests.first <= rc.requests.last {
		if !q.Since.IsZero() && !q.Since.Before(rc.requests.firstTime) {
			return nil
		}
		hotFirst = rc.requests.first
	}
	return a.scanAudit(ctx, rc, q.Until, hotFirst, done)
}

// limited reports whether the query's limit is reached with the requests
// done.
func (rc *replayCtx) limited(done map[string]bool) bool {
	return rc.q.Limit > 0 && len(done) >= rc.q.Limit
}

// scanHot reads the hot request stream from the query's Since to its
// Until, and reports each request that matches (adding it to done) until
// the limit.
func (a *Auditor) scanHot(ctx context.Context, rc *replayCtx, done map[string]bool) error {
	q := rc.q
	filter := subjects.AllRequests
	if q.Pool != "" {
		var err error
		if filter, err = subjects.RequestFilter(q.Pool); err != nil {
			return err
		}
	}
	from, err := a.seqAtTime(ctx, rc.requests, subjects.AllRequests, q.Since)
	if err != nil {
		return err
	}
	for m, err := range a.seq(ctx, rc.requests.name, filter, from) {
		if err != nil {
			return err
		}
		if !q.Until.IsZero() && m.Time.After(q.Until) {
			return nil
		}
		sm := hotMsg(rc.requests.name, m)
		s, err := subjects.Parse(sm.subject)
		if err != nil || s.Kind != subjects.KindRequest || done[s.RequestID] {
			continue
		}
		env, _ := e2a.FromJSON(sm.data)
		if !q.match(s.Agent, env) {
			continue
		}
		done[s.RequestID] = true
		f := &found{id: s.RequestID, pool: s.Agent, req: sm}
		if err := a.framesOf(ctx, rc, f); err != nil {
			return err
		}
		if err := rc.report(f); err != nil {
			return err
		}
		if rc.limited(done) {
			return nil
		}
	}
	return nil
}

// framesOf reads f's frames from the hot stream, and from E2A_AUDIT (from
// the request's time) when the hot stream misses some and the query reads
// the audit.
func (a *Auditor) framesOf(ctx context.Context, rc *replayCtx, f *found) error {
	if err := a.hotFramesOf(ctx, rc, f); err != nil {
		return err
	}
	if !rc.useAudit() || !needAudit(f) {
		return nil
	}
	at, err := a.seqAtTime(ctx, rc.audit, subjects.AllAudit, requestTime(f.req, a.margin))
	if err != nil {
		return err
	}
	frames, err := a.auditFrames(ctx, rc.audit, f.id, at)
	if err != nil && !rc.keepLost(err) {
		return err
	}
	if len(frames) > len(f.frames) {
		f.frames = frames
	}
	return nil
}

// hotFramesOf reads f's frames from the hot stream: the first page, the
// others left to f.rest (read as f is reported) when the hot stream holds
// every frame of f that the query reads (no E2A_AUDIT to compare them
// with), and f is not kept (a bounded search, Request, returns it whole).
// A replay of a request of 100,000 frames held every one, and its record,
// before it printed the first (TestReplayStreamsALongRequest).
func (a *Auditor) hotFramesOf(ctx context.Context, rc *replayCtx, f *found) error {
	var err error
	if f.frames, f.rest, err = a.hotFramesHead(ctx, rc.responses, f.id); err != nil || f.rest == nil {
		return err
	}
	if rc.bounded || rc.useAudit() && needAudit(f) {
		f.frames, err = collectRest(f.frames, f.rest)
		f.rest = nil
	}
	return err
}

// pastAuditRange reports whether the request copy sm is past what the
// audit scan reads: stored after end, or the copy of a request the hot
// stream holds (hotFirst, its first sequence; 0: none).
func pastAuditRange(sm *storedMsg, end time.Time, hotFirst uint64) bool {
	return (!end.IsZero() && sm.time.After(end)) || (hotFirst > 0 && sm.originAtOrAfter(streams.RequestsStream, hotFirst))
}
