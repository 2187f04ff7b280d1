package egress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/render"
)

// StoredRequest is a request as the pipeline holds it: its envelope and
// its stored frames, in order (what a protocol rebuilds a task from).
// FramesExpired tells that E2A_RESPONSES no longer holds its first frames
// (Frames then begins past sequence 0) or any of them (Frames is empty;
// the request was answered: its pool's consumer acknowledged it), which
// aged out of the hot retention before its envelope did.
type StoredRequest struct {
	Envelope      *e2a.Envelope
	Frames        []*e2a.Response
	FramesExpired bool
}

// LoadRequests reads the envelope and the stored frames of each request
// (in order, e.g. a task's from the E2A_TASKS index ingress keeps), for
// the views of a task a protocol answers (A2A and AgentVault tasks/get).
// Requests with neither are skipped; ErrNotFound when none is left. A
// request whose envelope the pipeline no longer holds gets one with only
// its id. Frames age out of E2A_RESPONSES long before envelopes leave
// E2A_REQUESTS: a request whose first frames aged out has those that
// remain, one whose frames all aged out none, both marked FramesExpired
// (not ErrFramesExpired: a task's view is made of what remains).
func (s *Service) LoadRequests(ctx context.Context, ids []string) ([]StoredRequest, error) {
	var out []StoredRequest
	for _, id := range ids {
		rq, ok, err := s.loadRequest(ctx, id, false)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, rq)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: none of %d requests", ErrNotFound, len(ids))
	}
	return out, nil
}

// LoadRequestHead is LoadRequests of the request id reading only what the
// ownership rule reads of it: its envelope and, when the pipeline no
// longer holds that or it names no user, its first stored frame (whose
// user_id then tells). ErrNotFound when neither is stored. A check before
// the request's frames are served (A2A's tasks/resubscribe) reads them
// once so.
func (s *Service) LoadRequestHead(ctx context.Context, id string) (StoredRequest, error) {
	rq, ok, err := s.loadRequest(ctx, id, true)
	if err == nil && !ok {
		err = fmt.Errorf("%w: request %s", ErrNotFound, id)
	}
	return rq, err
}

// loadRequest reads the envelope of id and its stored frames (only the
// first when head, and none when head and the envelope names a user);
// false when neither is stored. Frames whose first ones aged out are read
// from the first stored, and a request answered whose frames all aged out
// (agedOut) has none, both marked FramesExpired.
func (s *Service) loadRequest(ctx context.Context, id string, head bool) (StoredRequest, bool, error) {
	msg, err := lookupRequest(ctx, s.mux, s.streamNames().requests, id)
	if err != nil {
		return StoredRequest{}, false, err
	}
	var env *e2a.Envelope
	if msg != nil {
		env, _ = e2a.FromJSON(msg.Data) // one that does not decode: as if gone
	}
	rq := StoredRequest{Envelope: env}
	if !head || env == nil || env.UserID == "" {
		rd, err := Open(ctx, s.nc, id, 0, append(s.replayOptions(nil), WithoutRequestCheck(), WithFirstStored())...)
		if err != nil {
			return StoredRequest{}, false, err
		}
		defer rd.Close()
		for !head || len(rq.Frames) == 0 {
			f, ok, err := rd.NextStored(ctx)
			if err != nil {
				return StoredRequest{}, false, err
			}
			if !ok {
				break
			}
			rq.Frames = append(rq.Frames, f.Response)
		}
		rq.FramesExpired = rd.expired
		if !head && msg != nil && len(rq.Frames) == 0 {
			if rq.FramesExpired, err = s.agedOut(ctx, id, msg); err != nil {
				return StoredRequest{}, false, err
			}
		}
	}
	if env == nil && len(rq.Frames) == 0 {
		return StoredRequest{}, false, nil
	}
	if rq.Envelope == nil {
		rq.Envelope = &e2a.Envelope{RequestID: id}
	}
	return rq, true, nil
}

// CancelFunc asks the worker holding requestID to stop (ingress publishes
// the cancel on the request's control subject).
type CancelFunc func(ctx context.Context, requestID string) error

// CancelRequest cancels the last request of a task: ErrNotCancelable when
// its final frame is already written; otherwise cancel is called and the
// final frame awaited (up to the cancel wait). It reports whether the
// request ended canceled.
func (s *Service) CancelRequest(ctx context.Context, requestID string, cancel CancelFunc) (bool, error) {
	return s.cancelRequest(ctx, requestID, cancel, false)
}

// cancelRequest is CancelRequest; listed tells that a task's or session's
// record lists requestID as its newest turn (askCancel), then awaits its
// end (awaitCanceled).
func (s *Service) cancelRequest(ctx context.Context, requestID string, cancel CancelFunc, listed bool) (bool, error) {
	if err := s.askCancel(ctx, requestID, cancel, listed); err != nil {
		return false, err
	}
	return s.awaitCanceled(ctx, requestID)
}

// askCancel calls cancel for requestID unless its final frame is written
// (ErrNotCancelable). listed tells that a task's or session's record lists
// requestID as its newest turn. Ingress records a turn before it publishes
// it, so such a turn with no frame and not stored yet is one whose publish
// is under way: it is cancelled as a queued turn is (the front door's
// cancel waits for the request to be stored), not answered ErrNotFound.
// One still not stored once cancel returns was never published (its
// publish failed): ErrNotCancelable, so that the task's earlier turns are
// cancelled still.
func (s *Service) askCancel(ctx context.Context, requestID string, cancel CancelFunc, listed bool) error {
	last, err := s.endFrame(ctx, requestID)
	if err != nil {
		return err
	}
	if last == nil {
		ok, err := requestExists(ctx, s.mux, s.streamNames().requests, requestID)
		if err != nil {
			return err
		}
		if !ok && !listed {
			return fmt.Errorf("%w: %q", ErrNotFound, requestID)
		}
		if !ok {
			if err := cancel(ctx, requestID); err != nil {
				return err
			}
			if ok, err = requestExists(ctx, s.mux, s.streamNames().requests, requestID); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("%w: %q", errUnpublished, requestID)
			}
			return nil
		}
	}
	if last != nil && last.final {
		return fmt.Errorf("%w: %q", ErrNotCancelable, requestID)
	}
	return cancel(ctx, requestID)
}

// errUnpublished is askCancel's ErrNotCancelable for a listed turn that
// was never published, as against one whose final frame is written.
var errUnpublished = fmt.Errorf("%w: the turn was never published", ErrNotCancelable)

// awaitCanceled awaits the final frame of requestID (up to the cancel
// wait) and reports whether it ends the request canceled; false without
// error when none came in time, ErrNotCancelable when it ended otherwise.
func (s *Service) awaitCanceled(ctx context.Context, requestID string) (bool, error) {
	wctx, stop := context.WithTimeout(ctx, s.cfg.cancelWait)
	defer stop()
	var final *e2a.Response
	err := Replay(wctx, s.nc, requestID, 0, func(f render.Frame) error {
		if f.IsFinal() {
			r, err := f.Decoded()
			if err != nil {
				return err
			}
			final = r
		}
		return nil
	}, append(s.replayOptions(nil), WithoutRequestCheck(), WithoutDecode())...)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return false, err
	}
	if final == nil {
		return false, nil
	}
	if !endedCanceled(final) {
		return false, fmt.Errorf("%w: %q ended %s", ErrNotCancelable, requestID, final.Status)
	}
	return true, nil
}

// endedCanceled reports whether the final frame r ends its request
// canceled: an e2a.error cancelled, or an ACP prompt result whose stop
// reason is cancelled (the frames A2A's outcome maps to the canceled
// state, package a2amap's FinalOutcome).
func endedCanceled(r *e2a.Response) bool {
	switch r.ResponseKind {
	case e2a.KindError:
		b, _ := r.Error()
		return b.Code == e2a.ErrCodeCancelled
	case e2a.KindACPPromptRes:
		body, _ := r.BodyMap()
		for _, k := range []string{"stopReason", "stop_reason"} {
			if sr, ok := body[k].(string); ok {
				return sr == e2a.StopCancelled
			}
		}
	}
	return false
}

// Finished reports whether the final frame of requestID is written (false
// while it runs, and for a request whose frames have aged out of the
// responses stream). An A2A task whose last request has finished is in a
// terminal state: ingress refuses further messages to it.
func (s *Service) Finished(ctx context.Context, requestID string) (bool, error) {
	last, err := s.endFrame(ctx, requestID)
	if err != nil {
		return false, err
	}
	return last != nil && last.final, nil
}

// Continuable reports whether a task whose newest request is requestID
// takes a new message: the request has no final frame (it runs, or its
// frames have aged out of the responses stream), or its final frame
// interrupts the turn (input-required, auth-required:
// e2a.Response.Interrupt). A turn that finished otherwise (completed,
// failed, canceled) leaves the task terminal: ingress refuses further
// messages to it.
func (s *Service) Continuable(ctx context.Context, requestID string) (bool, error) {
	ended, err := s.EndedTaskAt(ctx, requestID)
	if err != nil {
		return false, err
	}
	return ended.IsZero(), nil
}

// EndedTaskAt is when the final frame of requestID that ended its task was
// stored (the zero time when the task stays open: no final frame, or one
// that interrupts the turn; see Continuable), by the responses stream's
// clock.
func (s *Service) EndedTaskAt(ctx context.Context, requestID string) (time.Time, error) {
	last, err := s.endFrame(ctx, requestID)
	if err != nil {
		if errors.Is(err, ErrInvalidFrame) {
			return time.Unix(0, 1), err
		}
		return time.Time{}, err
	}
	if last == nil || !last.final {
		return time.Time{}, nil
	}
	r, err := e2a.ResponseFromJSON(last.raw)
	if err != nil {
		return time.Unix(0, 1), fmt.Errorf("%w: request %q: %v", ErrInvalidFrame, requestID, err)
	}
	if _, _, interrupted := r.Interrupt(); interrupted {
		return time.Time{}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, last.stamp)
	if err != nil || at.IsZero() {
		at = time.Unix(0, 1) // ended, its time not known
	}
	return at, nil
}

// endFrame is the final frame of requestID when one is stored, else its
// last stored frame (nil: none): lastFrame, then endOf.
func (s *Service) endFrame(ctx context.Context, requestID string) (*lastInfo, error) {
	last, err := s.lastFrame(ctx, requestID)
	if err != nil {
		return nil, err
	}
	return s.endOf(ctx, requestID, last)
}

// CancelTurns cancels the turns of a task (requestIDs, oldest first) that
// have not ended, newest first, then awaits the newest's final frame (up
// to the cancel wait); it reports whether the newest ended canceled. Turns
// of a task run one after another (the agent runtime starts one when the
// one before has its final frame), so the newest may be waiting for
// earlier ones still running: cancelled first, it never runs, and its
// final frame is stored once the turns before it have ended (the agent
// runtime holds a cancelled queued turn until then), so the task is never
// shown canceled while an earlier turn runs on, and the newest's end is
// the task's. The newest turn may not be stored yet (its publish under
// way, askCancel): it is cancelled as a queued turn; so may a turn
// before it, whose store is awaited (UnendedTurnsAwaited, up to the
// cancel wait) before the turns to cancel are read. ErrNotCancelable when
// no turn is left running, ErrNotFound for a task without requests.
func (s *Service) CancelTurns(ctx context.Context, requestIDs []string, cancel CancelFunc) (bool, error) {
	if len(requestIDs) == 0 {
		return false, ErrNotFound
	}
	earlier, err := s.UnendedTurnsAwaited(ctx, requestIDs[:len(requestIDs)-1], s.cfg.cancelWait)
	if err != nil {
		return false, err
	}
	newest := requestIDs[len(requestIDs)-1]
	err = s.askCancel(ctx, newest, cancel, true)
	if err != nil && (len(earlier) == 0 || !errors.Is(err, errUnpublished)) {
		// Only a newest never published leaves the turns before it to
		// cancel: one whose final frame is written has ended, and so have
		// those before it, though read running a moment ago (turns end in
		// order; a cancelled queued turn's final frame waits for them).
		return false, err
	}
	asked := err == nil
	for _, id := range earlier {
		if err := s.askCancel(ctx, id, cancel, false); err != nil && !errors.Is(err, ErrNotCancelable) {
			return false, err
		}
	}
	if !asked {
		// The newest was never published: the task's end is that of the
		// nearest turn before it still running, awaited as the newest's
		// would be (its end comes after those before it): ErrNotCancelable
		// when it ended otherwise than canceled (completed, or interrupted:
		// the task takes a cancel turn then).
		return s.awaitCanceled(ctx, earlier[0])
	}
	return s.awaitCanceled(ctx, newest)
}

// maxUnstoredTurns bounds the run of turns not stored (no frame, no
// request) UnendedTurns walks past: one never published (its publish
// failed and so did its removal from the record, or ingress died between
// the two) may sit between turns still running, but a longer run is
// history aged out of E2A_REQUESTS, before which nothing is left to do.
const maxUnstoredTurns = 8

// UnendedTurns returns the turns of a task or session (ids, oldest first)
// that have not ended, newest first: walking back from the newest, up to
// one with its final frame or one answered whose frames aged out, or past a run of maxUnstoredTurns turns not
// stored (aged out). A turn not stored is skipped, not taken as the end:
// one never published leaves the turn before it running (the agent runtime
// starts a turn once the nearest earlier turn that is stored has ended).
// Turns run one after another, so none before those has anything left to
// do.
func (s *Service) UnendedTurns(ctx context.Context, ids []string) ([]string, error) {
	out, _, err := s.unendedTurns(ctx, ids)
	return out, err
}

// unendedTurns is UnendedTurns, and the turns not stored it walked past
// before a stored one (listed): recorded after a turn that is stored, so
// not history aged out, but publishing still (ingress records a turn
// before it publishes it) or never published.
func (s *Service) unendedTurns(ctx context.Context, ids []string) (out, listed []string, err error) {
	var pending []string // turns not stored since the last stored one
	for i := len(ids) - 1; i >= 0 && len(pending) < maxUnstoredTurns; i-- {
		last, err := s.endFrame(ctx, ids[i])
		if err != nil {
			return nil, nil, err
		}
		if last != nil && last.final {
			return out, append(listed, pending...), nil
		}
		if last == nil {
			msg, err := lookupRequest(ctx, s.mux, s.streamNames().requests, ids[i])
			if err != nil {
				return nil, nil, err
			}
			if msg == nil {
				pending = append(pending, ids[i])
				continue
			}
			if gone, err := s.agedOut(ctx, ids[i], msg); err == nil && gone {
				return out, append(listed, pending...), nil // answered, its frames aged out: it has ended
			}
		}
		listed, pending = append(listed, pending...), pending[:0]
		out = append(out, ids[i])
	}
	return out, listed, nil
}

// UnendedTurnsAwaited is UnendedTurns once the turns listed after a
// stored turn but not stored themselves (their publish under way) are
// stored, awaited up to within (a turn whose publish failed costs that
// wait): a cancel that skipped such a turn left it to run on, the turns
// queued behind it waiting for its end.
func (s *Service) UnendedTurnsAwaited(ctx context.Context, ids []string, within time.Duration) ([]string, error) {
	out, listed, err := s.unendedTurns(ctx, ids)
	if err != nil || len(listed) == 0 {
		return out, err
	}
	if _, err := s.AwaitRequests(ctx, listed, within); err != nil {
		return nil, err
	}
	return s.UnendedTurns(ctx, ids)
}

// Serve answers a request the front door just accepted with the renderer
// newRenderer builds, in the output format named format (one of
// [Formats], the metrics' label): its frames from the resume point of r
// (Last-Event-ID or ?from=; a bad one ends the answer at once) then live,
// up to the final frame. The renderers of protocol packages are served
// through it. The end of a completed stream is left buffered: net/http
// sends it with the end of the response, in one write, when the handler
// returns; a handler that writes more or waits after Serve flushes first.
func (s *Service) Serve(w http.ResponseWriter, r *http.Request, requestID, format string, newRenderer render.NewRenderer) {
	s.serve(w, r, requestID, format, newRenderer, WithoutRequestCheck())
}

// ServeExisting is [Service.Serve] for a request that may not exist (a
// task's, named by the client): an unknown request is answered
// ErrNotFound by the renderer instead of being waited for.
func (s *Service) ServeExisting(w http.ResponseWriter, r *http.Request, requestID, format string, newRenderer render.NewRenderer) {
	s.serve(w, r, requestID, format, newRenderer)
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request, requestID, format string, newRenderer render.NewRenderer, opts ...ReplayOption) {
	o := render.NewOutput(w, s.cfg.writeTimeout)
	rend := newRenderer(o)
	from, err := ResumePoint(r)
	if err != nil {
		s.finish(o, rend, format, err)
		return
	}
	o.SetEndsResponse()
	s.Stream(r.Context(), o, rend, format, requestID, from, opts...)
}

// ServeFrom is [Service.Serve] for a transport without HTTP requests (ACP
// over stdio): the frames of requestID from sequence from then live, up to
// the final frame, rendered into w by the renderer newRenderer builds.
func (s *Service) ServeFrom(ctx context.Context, w http.ResponseWriter, requestID, format string, from int64, newRenderer render.NewRenderer) {
	o := render.NewOutput(w, s.cfg.writeTimeout)
	s.Stream(ctx, o, newRenderer(o), format, requestID, from, WithoutRequestCheck())
}
