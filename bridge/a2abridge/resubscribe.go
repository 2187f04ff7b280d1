package a2abridge

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// Following a cut stream.
//
// The bridge's Handler runs a call again only while it wrote no frame
// (bridge.Handler.Serve): a frame the client may have seen cannot be taken
// back. A stream of a streaming agent cut after that (the connection
// dropped or reset, a gRPC stream ended Unavailable, an idle timeout) is
// not the end of the agent's task, which runs on: once the turn knows the
// task, it subscribes to it again, in process (followTask, as a takeover
// does), and the task as it stands, the subscription's first event, is
// written by difference against what the turn wrote (turn.seen, kept in
// memory as each frame is written: no stored frame is read again), so no
// frame is written twice or lost. A stream cut before the task was named
// keeps the Handler's retry (nothing was written).

// Re-subscriptions of one turn after its stream was cut, and the waits
// before them: full jitter up to resubscribeBase·2^attempt, at most
// resubscribeCap, or the agent's Retry-After when longer (at most the
// cap), as the Handler's retries wait.
const (
	resubscribes    = 3
	resubscribeBase = 100 * time.Millisecond
	resubscribeCap  = 2 * time.Second
)

// cutCodes are the errors of a stream cut short by the way to the agent,
// not answered by it: the connection (unreachable, reset, closed before
// the end), a timeout, an overloaded agent or gateway, and the agent's
// internal error (which a2a-go also reads a gRPC stream dropped with
// Unavailable as). A refusal (rejected, auth), an answer that is not A2A,
// upstream_cannot_resume, the request's own end and a writer's refusal
// are not cuts.
var cutCodes = []string{bridge.CodeUnreachable, bridge.CodeTimeout, bridge.CodeRateLimited, bridge.CodeUnavailable}

// resubscribing follows the turn's task on after err, the end of its
// stream (or of a subscription), while that was a cut (cutOf): it
// subscribes to the task again (followTask), at most resubscribes times,
// waiting between (backoff). err itself otherwise, and the last cut's
// error once the re-subscriptions are spent.
func (t *turn) resubscribing(ctx context.Context, err error) error {
	for attempt := 0; attempt < resubscribes; attempt++ {
		be, cut := t.cutOf(ctx, err)
		if !cut {
			return err
		}
		wait := resubscribeWait(attempt, be.RetryAfter)
		t.u.cfg.log.Info("a2a bridge: the agent's stream was cut; subscribing to its task", "request_id", t.env.RequestID,
			"task", t.taskID, "code", be.Code, "attempt", attempt+1, "wait", wait, "err", t.u.Scrub(be.Message))
		if serr := sleepctx.Sleep(ctx, wait); serr != nil {
			return serr
		}
		err = t.followTask(ctx)
	}
	return err
}

// cutOf reports whether err ended a stream the turn can follow on by
// subscribing: a cut (cutCodes) of a streaming agent's task the turn
// knows and that has not ended for it, while the request lasts.
func (t *turn) cutOf(ctx context.Context, err error) (*bridge.Error, bool) {
	var be *bridge.Error
	if err == nil || ctx.Err() != nil || t.done || !t.u.streaming || t.taskID == "" || !errors.As(err, &be) {
		return nil, false
	}
	return be, be.Retryable && slices.Contains(cutCodes, be.Code)
}

// resubscribeWait is the wait before re-subscription attempt+1.
func resubscribeWait(attempt int, after time.Duration) time.Duration {
	ceil := min(resubscribeBase<<attempt, resubscribeCap)
	d := time.Duration(rand.Int64N(int64(ceil) + 1))
	return min(max(d, after), resubscribeCap)
}
