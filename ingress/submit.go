package ingress

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// submit is host.Submitter's Submit for principal p (caller and
// rpcCaller): the stream slot, the context claim (claimsContext; that of
// a context made up for a duplicate taken back: dropMadeUpContext), the
// subscription to the frames, the front door's Before, then the turn's record and the publish
// (publishTurn, publish), the publish metric observed. On error nothing is
// published and nothing is held; the error matches the host's sentinels
// (hostError) as well as the front door's, or is Before's as it is; a
// refused publish undoes Before (undoBefore). fresh
// holds the ids the pipeline made for the call: a request id among them
// is published without the lookup a client's id needs (publishAfter).
func (s *Server) submit(ctx context.Context, p Principal, fresh *freshIDs, sub host.Submission) (_ *host.Submitted, err error) {
	defer func(ctx context.Context) {
		if egress.ShuttingDown(ctx, err) {
			// Cut by the server's shutdown, not by its client: retryable
			// (the publish may have been stored; the same request_id is
			// then answered from it), never taken for a client gone.
			err = fmt.Errorf("%w: request %q may have been accepted; send it again with the same request_id or read it with GET /v1/requests/%s",
				egress.ErrShuttingDown, sub.Envelope.RequestID, egress.PathSegment(sub.Envelope.RequestID))
		}
	}(ctx)
	var release func()
	if sub.Slot {
		r, f := s.streamSlot(p)
		if f != nil {
			return nil, host.ErrTooManyStreams
		}
		release = r
	}
	end := func() {}
	if sub.Prepare {
		ctx, end = egress.ExpectStream(ctx)
	}
	done := func() {
		end()
		if release != nil {
			release()
		}
	}
	env := sub.Envelope
	// owner: whose context the turn joins (an admin's turn in another
	// principal's context), written in the envelope for the agents
	// (publishAfter); a turn of a task or session is its record's.
	owner := ""
	// madeUp: the revision of the claim this call made of a context id the
	// pipeline made up for it (an A2A message starting a task without a
	// contextId), 0 for none: taken back when the submission is a
	// duplicate (dropMadeUpContext).
	var madeUp uint64
	if claimsContext(sub) {
		o, made, err := s.claimContext(ctx, p, env.ContextID)
		if err != nil {
			done()
			return nil, hostError(err)
		}
		owner = o
		if fresh.origin(env.ContextID) == idFresh {
			madeUp = made
		}
	}
	var undo func(context.Context) error
	if sub.Before != nil {
		var err error
		if undo, err = sub.Before(ctx); err != nil {
			done()
			return nil, err
		}
	}
	var acc Accepted
	origin := fresh.origin(env.RequestID)
	if sub.Turn != nil {
		// A turn sent through a pool's door (the call named a pool) must
		// be its task's pool's: a door naming none sends it there.
		acc, err = s.publishTurn(ctx, p, sub.Pool, env, *sub.Turn, origin, owner, fresh.namedPool() != "")
	} else {
		acc, err = s.publishTimed(ctx, p, sub.Pool, env, nil, origin, owner)
	}
	if err != nil {
		done()
		s.undoBefore(ctx, env.RequestID, undo)
		if !errors.Is(err, context.Canceled) && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrTooLarge) &&
			!errors.Is(err, ErrUnknownPool) && !errors.Is(err, ErrInvalidPool) && !errors.Is(err, ErrTaskTerminal) && !errors.Is(err, ErrTaskNotFound) &&
			!errors.Is(err, ErrTooManyTurns) { // counted: e2a_ingress_turns_refused_total
			s.opts.log.Warn("publish failed", "request_id", env.RequestID, "err", err)
		}
		return nil, hostError(err)
	}
	if acc.Duplicate {
		s.dropMadeUpContext(ctx, env.ContextID, madeUp)
		s.storedContext(ctx, env)
	}
	return host.NewSubmitted(host.Accepted{RequestID: acc.RequestID, Pool: acc.Pool, Duplicate: acc.Duplicate, Warning: acc.Warning}, ctx, done), nil
}

// storedContext gives env, the retry of a stored request (a duplicate:
// nothing was published), the stored request's context, in which the front
// door answers it: the retry is answered as the first call was, in its
// task's context, not in the one the adapter made up for the retry (a new
// A2A task's) or the retry named. A lookup that fails leaves env as it is.
func (s *Server) storedContext(ctx context.Context, env *e2a.Envelope) {
	rq, err := s.egress.LoadRequestHead(ctx, env.RequestID)
	if err != nil || rq.Envelope == nil || rq.Envelope.ContextID == "" {
		return
	}
	env.ContextID = rq.Envelope.ContextID
}

// dropMadeUpContext takes back the claim (made at revision rev; none
// when 0) of contextID, a context id the pipeline made up for a submission
// that turned out a duplicate: the retry of a stored request is answered
// in that request's context (storedContext), and no task is ever in the
// one made up for the retry, whose id nobody was given (but when that
// lookup fails: the answer names it then, unclaimed, and a message naming
// it claims it again as a new context). The claim is made
// before the publish finds the duplicate (and must be: the publish is
// what decides, atomically, between two first sends of one id that
// run at once), so it is taken back after, with up to undoTimeout even
// when ctx ended; a failure is logged, the claim then left to expire.
func (s *Server) dropMadeUpContext(ctx context.Context, contextID string, rev uint64) {
	if rev == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	if err := s.opts.tasks.dropContext(ctx, contextID, rev); err != nil {
		s.opts.log.Warn("a duplicate request: taking back the claim of the context made up for it", "context_id", contextID, "err", err)
	}
}

// claimsContext reports whether sub's context id is claimed (or checked as
// the caller's: claimContext) before anything is published: when the front
// door asks (ClaimContext: a new A2A task), for a turn that gives its task
// its context (host.Turn.NewContext: the first turn of a task E2A starts,
// whose context_id its record then holds), and for any context id other
// than the one of the task the submission is a turn of, whatever its front
// door says: an E2A request's context_id (POST /v1/requests, a pool's
// path), which no front door claims, was taken in another principal's
// context. A later turn in its task's own context is not: its task's
// record, the caller's, is checked instead, whoever holds the claim by
// then (turnOwner). Nothing, no read, for a request naming no context.
func claimsContext(sub host.Submission) bool {
	if sub.Envelope.ContextID == "" {
		return false
	}
	return sub.ClaimContext || sub.Turn == nil || sub.Turn.Created || sub.Turn.NewContext || sub.Turn.Task.ContextID != sub.Envelope.ContextID
}

// undoBefore calls undo (when not nil), what takes back the Before of a
// submission then refused, with up to undoTimeout even when ctx ended (the
// client gone, the publish timed out); its error is logged.
func (s *Server) undoBefore(ctx context.Context, requestID string, undo func(context.Context) error) {
	if undo == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	if err := undo(ctx); err != nil {
		s.opts.log.Warn("a refused request: undoing what its front door stored before the publish failed", "request_id", requestID, "err", err)
	}
}

// undoTimeout bounds undoBefore.
const undoTimeout = 5 * time.Second

var (
	_ host.Submitter = caller{}
	_ host.Submitter = rpcCaller{}
)

// Submit is the server's submit for the caller, the request named in the
// HTTP answer's log line.
func (c caller) Submit(ctx context.Context, sub host.Submission) (*host.Submitted, error) {
	if c.rec != nil && sub.Envelope != nil {
		c.rec.requestID = sub.Envelope.RequestID
	}
	return c.s.submit(ctx, c.p, c.fresh, sub)
}

// Submit is the server's submit for the caller of a JSON-RPC call, the
// request named in the HTTP answer's log line.
func (c rpcCaller) Submit(ctx context.Context, sub host.Submission) (*host.Submitted, error) {
	if c.rec != nil && sub.Envelope != nil {
		c.rec.requestID = sub.Envelope.RequestID
	}
	return c.s.submit(ctx, c.p, c.fresh, sub)
}
