package egress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/render"
)

// History is where the E2A read API ([Service.Register]) finds a request
// the hot streams no longer hold (E2A_REQUESTS and E2A_RESPONSES keep 24 h
// by default): the audit history, E2A_AUDIT and the archive E2A_ARCHIVE,
// read by package internal/audit's Auditor, which implements it (this
// package cannot import that one, which imports it). Give it with
// [WithHistory].
//
// The Service asks it only where it would answer 404 otherwise (the hot
// streams hold neither the request's envelope nor any frame of it; for a
// principal that does not see every request, no envelope of its own: an
// id another principal took again once the first request left the hot
// streams is read by the first request's owner from the History, whose
// copy is that request, never followed into the hot streams, whose
// frames are the newcomer's), and only for
// an id whose time can be read ([RequestIDTime]: the UUIDv7s the pipeline
// makes), so that a lookup is a search from that time, never a scan of the
// history; any other unknown id is answered 404 without asking, but for
// the owner of one whose frames are still hot when a [HistoryNear] is
// given (searched from its first hot frame's time). At most
// [DefaultHistoryLookups] lookups run at once per Service, each bounded by
// [DefaultHistoryTimeout] ([WithHistoryLimits]).
type History interface {
	// Request returns request id as the history holds it: its envelope
	// and its frames, in order. A request the history does not hold (or
	// holds no envelope of) is an error wrapping [ErrNotFound]; one
	// wrapping archive.ErrCorrupt (a damaged batch) is answered 500, not
	// retryable ([ErrHistoryCorrupt]); any other error is answered 503,
	// retryable ([ErrHistoryUnavailable]). It must
	// return when ctx ends.
	Request(ctx context.Context, id string) (HistoricRequest, error)
}

// HistoryNear is a [History] that can also find a request whose id
// carries no time (a client's own request_id), given a time to search
// from. The Service asks it for such an id only where its owner would get
// 404 otherwise: its envelope aged out of E2A_REQUESTS while some of its
// frames are still in E2A_RESPONSES (the hot streams drop the envelope
// first, stored first). near is when the first of those frames was
// stored: the envelope was stored before it by the request's wait in its
// pool's queue, so a HistoryNear looks for it in the window it searches
// around a UUIDv7 id's time, and finds none when the wait was longer
// (package internal/audit's Auditor: its clock margin, a minute by
// default). Without a hot frame nothing is asked: a chosen id is never a
// scan of the history.
type HistoryNear interface {
	History
	// RequestNear is Request for an id without a time, searched around
	// near.
	RequestNear(ctx context.Context, id string, near time.Time) (HistoricRequest, error)
}

// HistoricRequest is a request as a [History] holds it. Its memory is the
// request's stored bytes; the Service holds one per lookup in progress
// ([WithHistoryLimits] bounds them).
type HistoricRequest struct {
	// Envelope is the envelope as stored (the payload of its message).
	Envelope []byte
	// Frames are its frames in stream order, one frame each (a stored
	// burst split into its frames, e2a.SplitBurst), up to the message
	// holding the final frame: each is answered exactly as the hot
	// streams would answer it. The Service checks them as its readers
	// check stored frames: sequences from 0 without gap, else an error
	// wrapping [ErrInvalidFrame] after the frames before it.
	Frames []HistoricFrame
	// Subject is the subject the envelope was stored under
	// (e2a.req.<pool>.<id>) and Stored when it was stored, as E2A_REQUESTS
	// held them; "" and zero when the History does not tell them
	// ([Service.HistoricRequestMsg] needs both).
	Subject string
	Stored  time.Time
}

// HistoricFrame is one frame of a [HistoricRequest].
type HistoricFrame struct {
	// Raw is the frame exactly as stored (render.Frame.Raw).
	Raw []byte
	// StreamSeq is the sequence in E2A_RESPONSES of the message that held
	// it (the frames of a burst share it; 0 when unknown): render.Frame's
	// StreamSeq, as a reader of the hot streams gives it.
	StreamSeq uint64
}

// frames returns h's frames as a reader gives them to a pass-through
// renderer (heads read, Response nil until Decoded), up to the final one:
// sequences 0, 1, … A frame of a sequence already taken (a duplicate the
// stream stored twice) is skipped, as the reader skips it. At the first
// frame that does not decode or leaves a gap, it returns the frames before
// it and an error wrapping ErrInvalidFrame (the reader's "stored sequence
// … where … was expected").
func (h HistoricRequest) frames(id string) ([]render.Frame, error) {
	out := make([]render.Frame, 0, len(h.Frames))
	for _, hf := range h.Frames {
		f, err := render.HeadFrame(hf.Raw, hf.StreamSeq)
		if err != nil {
			return out, fmt.Errorf("request %q sequence %d (history): %w", id, len(out), err)
		}
		want := int64(len(out))
		if err := historicPlace(id, hf.Raw, f.Sequence()); err != nil {
			return out, err
		}
		if f.Sequence() < want {
			continue // a duplicate: the reader skips it too
		}
		if f.Sequence() != want {
			return out, fmt.Errorf("%w: request %q: stored sequence %d where %d was expected (history)", ErrInvalidFrame, id, f.Sequence(), want)
		}
		out = append(out, *f)
		if f.IsFinal() {
			break
		}
	}
	return out, nil
}

// historicPlace checks a historic frame as checkPlace and frameHead check
// a stored one: a frame without a sequence (null, {}: read as 0) or of a
// negative one is invalid_frame, not frame 0 or a duplicate to skip.
func historicPlace(id string, raw []byte, seq int64) error {
	if seq == 0 {
		var head render.Head
		if head.Decode(raw) == nil && head.Sequence == render.NoSequence {
			return fmt.Errorf("%w: request %q: a frame without a sequence (history)", ErrInvalidFrame, id)
		}
	}
	return checkPlace(id, 0, seq)
}

// Defaults of the history lookups (WithHistoryLimits).
const (
	// DefaultHistoryLookups is how many History lookups one Service runs
	// at once; more wait for a turn, within their timeout.
	DefaultHistoryLookups = 8
	// DefaultHistoryTimeout bounds one lookup, its wait for a turn
	// included: past it the read is answered 503, retryable. A lookup by
	// id time takes milliseconds to a second on a history of a million
	// requests (docs/capacity.md, Long history).
	DefaultHistoryTimeout = 30 * time.Second
	// DefaultHistoryLookupsPerPrincipal is how many of them one principal
	// may have at once (WithHistoryLookupsPerPrincipal): a lookup of an id
	// the history does not hold reads as much as one it finds (a second or
	// more on a busy history), so one client asking for many unknown ids
	// waits for its own turns and leaves the others theirs.
	DefaultHistoryLookupsPerPrincipal = 2
)

// WithHistory makes the E2A read API (GET /v1/requests/{id} and
// /v1/requests/{id}/stream) answer from h what the hot streams no longer
// hold ([History]), exactly as it answers a finished request from the hot
// streams, to the principal the historic envelope's user_id allows
// (tenant.Read; [WithAuthorizer]), everyone else 404. nil is refused.
func WithHistory(h History) Option {
	return option.NotNil(ErrInvalidOption, "history", h, func(c *config) { c.history = h })
}

// WithHistoryLimits sets how many History lookups run at once (default
// [DefaultHistoryLookups]) and the bound of each, its wait for a turn
// included (default [DefaultHistoryTimeout]). A lookup beyond the limit
// waits for a turn with its request's context; one that does not get an
// answer in time is answered 503, retryable ([ErrHistoryUnavailable]).
// lookups < 1 and timeout ≤ 0 are refused.
func WithHistoryLimits(lookups int, timeout time.Duration) Option {
	return option.Check(ErrInvalidOption, lookups >= 1 && timeout > 0,
		func(c *config) { c.historyLookups, c.historyTimeout = lookups, timeout },
		"history limits: %d lookups, timeout %v", lookups, timeout)
}

// WithHistoryLookupsPerPrincipal sets how many History lookups one
// authenticated principal may have at once (default
// [DefaultHistoryLookupsPerPrincipal]); its others wait for one of its
// turns, within the history timeout ([WithHistoryLimits]), then 503. A
// principal that sees every request (the audit and admin roles), and every
// caller with authentication off, are bounded by the Service's limit
// alone. n < 1 is refused.
func WithHistoryLookupsPerPrincipal(n int) Option {
	return option.Check(ErrInvalidOption, n >= 1,
		func(c *config) { c.historyPerPrincipal = n },
		"history lookups per principal: %d", n)
}

// principalTurns are the History turns of the principals with lookups in
// progress or waiting: per principal a channel of its turns, dropped when
// none of its lookups holds or waits for it.
type principalTurns struct {
	mu    sync.Mutex
	per   int
	users map[string]*userTurns
}

type userTurns struct {
	turns chan struct{}
	refs  int
}

// acquire waits for one of user's turns until ctx ends; release gives it
// back.
func (t *principalTurns) acquire(ctx context.Context, user string) (release func(), err error) {
	t.mu.Lock()
	u := t.users[user]
	if u == nil {
		u = &userTurns{turns: make(chan struct{}, t.per)}
		t.users[user] = u
	}
	u.refs++
	t.mu.Unlock()
	drop := func() {
		t.mu.Lock()
		if u.refs--; u.refs == 0 {
			delete(t.users, user)
		}
		t.mu.Unlock()
	}
	select {
	case u.turns <- struct{}{}:
		return func() { <-u.turns; drop() }, nil
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
}

// RequestIDTime returns the time a UUIDv7 request id carries (its first 48
// bits, milliseconds since the Unix epoch): the request ids the pipeline
// makes (normalizer, agent, ACP, stdio) are UUIDv7s. false for any other
// id (a client's own request_id), which gives no time to search from.
func RequestIDTime(id string) (time.Time, bool) {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		return time.Time{}, false
	}
	sec, nsec := u.Time().UnixTime()
	return time.Unix(sec, nsec), true
}

// historyFor reports whether the History may be asked for id by its time.
func (s *Service) historyFor(id string) bool {
	if s.cfg.history == nil {
		return false
	}
	_, ok := RequestIDTime(id)
	return ok
}

// historyMay reports whether the History may be asked for id at all: by
// its time or by its first hot frame's.
func (s *Service) historyMay(id string) bool {
	return s.historyFor(id) || s.historyNear(id)
}

// historyNear reports whether the History may be asked for id by the time
// of its first hot frame (HistoryNear): an id without a time.
func (s *Service) historyNear(id string) bool {
	if _, ok := s.cfg.history.(HistoryNear); !ok {
		return false
	}
	_, ok := RequestIDTime(id)
	return !ok
}

// firstFrameTime is when the first frame of request id E2A_RESPONSES holds
// was stored (one direct get); false when it holds none.
func (s *Service) firstFrameTime(ctx context.Context, id string) (time.Time, bool, error) {
	subj, err := responseSubject(id)
	if err != nil {
		return time.Time{}, false, nil
	}
	var at time.Time
	_, err = s.mux.GetBatch(ctx, s.streamNames().responses, subj, 1, 1, 0, func(_ uint64, h nats.Header, _ []byte) error {
		at, _ = time.Parse(time.RFC3339Nano, h.Get(jetstream.TimeStampHeaer))
		return nil
	})
	return at, err == nil && !at.IsZero(), err
}

// fromHistory looks id up in the History: ErrNotFound when there is none
// (or id has no time: nothing is asked), the request, or an error wrapping
// ErrHistoryUnavailable (the lookup failed, or got no turn or no answer
// within the history timeout), or ctx's error when the client went away.
// user is the principal asking, bounded to its own turns
// (WithHistoryLookupsPerPrincipal; "": a principal that sees every request,
// or authentication off). The lookup runs on its own goroutine, which
// holds its turns until the History returns: one that ignores its context
// cannot hang the read, and the lookups in progress stay bounded.
func (s *Service) fromHistory(ctx context.Context, id, user string) (*HistoricRequest, error) {
	var near time.Time // an id without a time: its first hot frame's (historyNear)
	switch {
	case s.historyFor(id):
	case s.historyNear(id):
		t, ok, err := s.firstFrameTime(ctx, id)
		if err != nil {
			return nil, s.historyFailed(ctx, id, err)
		}
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
		}
		near = t
	default:
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	hctx, cancel := context.WithTimeout(ctx, s.cfg.historyTimeout)
	defer cancel()
	releaseUser := func() {}
	if user != "" {
		var err error
		if releaseUser, err = s.userTurns.acquire(hctx, user); err != nil {
			return nil, s.historyFailed(ctx, id, fmt.Errorf("no turn among the principal's %d lookups within %v", s.cfg.historyPerPrincipal, s.cfg.historyTimeout))
		}
	}
	select {
	case s.historyTurns <- struct{}{}:
	case <-hctx.Done():
		releaseUser()
		return nil, s.historyFailed(ctx, id, fmt.Errorf("no turn among %d lookups within %v", cap(s.historyTurns), s.cfg.historyTimeout))
	}
	type result struct {
		h   HistoricRequest
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer releaseUser()
		defer func() { <-s.historyTurns }()
		defer func() {
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("the history panicked: %v", p)}
			}
		}()
		var (
			h   HistoricRequest
			err error
		)
		if near.IsZero() {
			h, err = s.cfg.history.Request(hctx, id)
		} else {
			h, err = s.cfg.history.(HistoryNear).RequestNear(hctx, id, near)
		}
		done <- result{h, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-hctx.Done():
		select {
		case r = <-done: // answered as the time ran out
		default:
			return nil, s.historyFailed(ctx, id, fmt.Errorf("no answer within %v", s.cfg.historyTimeout))
		}
	}
	switch {
	case r.err == nil:
		return &r.h, nil
	case errors.Is(r.err, ErrNotFound):
		return nil, fmt.Errorf("%w: %q (history)", ErrNotFound, id)
	case errors.Is(r.err, archive.ErrCorrupt):
		// Permanent: retrying reads the same batch. A lookup of an
		// unknown id whose window crosses the batch gets it too (the id
		// may be in it): never a silent 404.
		s.log.Error("egress: history lookup hit a corrupt archive batch", "request_id", id, "err", r.err)
		return nil, ErrHistoryCorrupt
	}
	return nil, s.historyFailed(ctx, id, r.err)
}

// historyFailed is the error of a failed lookup: ctx's when the client
// went away, else err wrapped with ErrHistoryUnavailable (logged).
func (s *Service) historyFailed(ctx context.Context, id string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.log.Warn("egress: history lookup failed", "request_id", id, "err", err)
	// The cause is logged, not answered (it names streams and servers),
	// nor the id: another's request and an unknown id answer alike.
	return ErrHistoryUnavailable
}

// driveHistoric drives rend with the frames of h from sequence from on,
// as Stream drives it with a reader over a finished request: a resume
// point past the final frame answers 204 (as serveE2AStream does), and the
// frames are written at once. It returns the frames written, the sequence
// the hot streams go on from when h holds no final frame (the request may
// still run: Service.followHot; -1 otherwise), and the error to end with.
func (s *Service) driveHistoric(o *render.Output, rend render.Renderer, format, id string, from int64, h *HistoricRequest, start time.Time) (int, int64, error) {
	frames, ferr := h.frames(id)
	final := ferr == nil && len(frames) > 0 && frames[len(frames)-1].IsFinal()
	if historicPast(frames, ferr, from) {
		o.WriteHeader(http.StatusNoContent)
		return 0, -1, nil
	}
	if err := primeFrames(rend, frames, from); err != nil {
		return 0, -1, err
	}
	if err := rend.Start(); err != nil {
		return 0, -1, err
	}
	written := s.m.frames.WithLabelValues(format)
	n := 0
	for i := range frames {
		f := &frames[i]
		if f.Sequence() < from {
			continue
		}
		if err := rend.Frame(f); err != nil {
			return n, -1, err
		}
		written.Inc()
		o.HoldHead(false)
		if n == 0 {
			s.m.ttff.WithLabelValues(format).Observe(time.Since(start).Seconds())
		}
		n++
	}
	if ferr != nil {
		return n, -1, ferr
	}
	if !final {
		return n, max(from, int64(len(frames))), nil
	}
	return n, -1, nil
}

// historicPast reports whether from, a stream's resume point, lies past
// the final frame of a request read from the History (frames and ferr, its
// HistoricRequest.frames): nothing to send, ever (204).
func historicPast(frames []render.Frame, ferr error, from int64) bool {
	n := len(frames)
	return from > 0 && ferr == nil && n > 0 && frames[n-1].IsFinal() && from > frames[n-1].Sequence()
}

// noFinalFrame is the end of a request whose history holds no final frame.
func noFinalFrame(id string) error {
	return fmt.Errorf("%w: request %q: the history holds no final frame, and no frame will come", ErrWaitTimeout, id)
}

// serveHistoricJSON answers the aggregated JSON of h, a request the
// history holds, as serveE2AJSON answers one from the hot streams: 200
// with its frames from the resume point when it has its final frame, 202
// otherwise (pending without frames, running with), the state of its last
// frame for a resume point past it; with ?wait=true, a request without a
// final frame is answered at once as the wait would end (504: none will
// come).
func (s *Service) serveHistoricJSON(r *http.Request, o *render.Output, id string, from int64, wait bool, h *HistoricRequest) {
	frames, ferr := h.frames(id)
	var last *lastInfo
	if len(frames) > 0 {
		f := &frames[len(frames)-1]
		last = &lastInfo{streamSeq: f.StreamSeq, seq: f.Sequence(), final: f.IsFinal(), raw: f.Raw}
	}
	if wait && (ferr != nil || last == nil || !last.final) {
		err := ferr
		if err == nil {
			err = noFinalFrame(id)
		}
		s.finish(o, NewE2AJSON(o, id, h.Envelope, false, from), FormatE2AJSON, err)
		return
	}
	rend, past := s.startE2AJSON(r, o, id, h.Envelope, from, last)
	if rend == nil {
		return
	}
	if !past {
		written := s.m.frames.WithLabelValues(FormatE2AJSON)
		for i := range frames {
			f := &frames[i]
			if f.Sequence() < from {
				continue
			}
			if err := rend.Frame(f); err != nil {
				s.finish(o, rend, FormatE2AJSON, err)
				return
			}
			written.Inc()
		}
	}
	s.finish(o, rend, FormatE2AJSON, ferr)
}
