package a2abridge

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

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
// frame is written twice or lost. That holds for the agent's status
// messages too (a working status-update's, written as the agent's status-update):
// those it sent while the stream was cut are in the snapshot's history
// (an A2A server moves a status message there when the next status comes)
// or are its status message, and the turn writes those it did not
// (gapMessages, against turn.said), before the snapshot's artifacts (a
// snapshot does not say where among their parts a message came). A stream
// cut before the task was named keeps the Handler's retry (nothing was
// written).

// Re-subscriptions of one turn after its stream was cut without progress
// in between (a re-subscription that took the answer further than it
// ever went makes the count start again: a long answer behind a proxy's
// idle timeout is cut again and again, each time further on; one that
// only wrote frames again, an agent replaying its events, does not:
// reach), and the waits before them: full jitter up
// to resubscribeBase·2^attempt, at most resubscribeCap, or the agent's
// Retry-After when longer (at most the cap), as the Handler's retries
// wait.
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
// subscribes to the task again (followTask), at most resubscribes times
// in a row without progress (one that took the answer further than it
// ever went, reach, starts the count again: the agent's answer is
// finite, each such one goes further in it, and the request's deadline
// bounds them all), waiting between (backoff). err itself otherwise,
// and the last cut's error once the re-subscriptions are spent.
func (t *turn) resubscribing(ctx context.Context, err error) error {
	best := t.reach()
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
		if r := t.reach(); r > best {
			best, attempt = r, -1 // progress: the next cut has the whole budget
		}
	}
	return err
}

// reach is how far the turn's answer went: the agent's messages said (by
// id) and what the frames hold of its artifacts (the text of each kind
// by length, the other parts by count). Frames written again do not
// take it further: a status message the agent sends again (its text,
// and its parts under its id, are counted by its id), an artifact
// written whole again (rewrite) as it was.
func (t *turn) reach() int {
	n := len(t.said)
	for id, w := range t.seen {
		if id == "" || t.said[string(id)] {
			continue // a message's text (no artifact's) or parts
		}
		n += w.others
		for _, s := range w.text {
			n += len(s)
		}
	}
	return n
}

// cutOf reports whether err ended a stream the turn can follow on by
// subscribing: a cut (cutCodes) of a streaming agent's task the turn
// knows and that has not ended for it, while the request lasts.
func (t *turn) cutOf(ctx context.Context, err error) (*bridge.Error, bool) {
	if err == nil || ctx.Err() != nil || t.done || !t.u.streaming || t.taskID == "" {
		return nil, false
	}
	return cutError(err)
}

// cutError reports whether err is a cut (cutCodes, retryable): the way
// to the agent failed, not the agent's answer.
func cutError(err error) (*bridge.Error, bool) {
	var be *bridge.Error
	if !errors.As(err, &be) {
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

// gapMessages writes, from task (a snapshot: GetTask, the first event of
// a subscription or of a stream), the agent's messages the turn did not
// write: those of its history not said, then its status message when the
// status is a working one (a state that neither ends the task nor asks
// for input: those status writes as the turn's end) and it is not said.
// A message without an id is never written from a snapshot (whether it
// was cannot be told). A takeover (saidUnknown) does not know which of
// them the worker before it wrote: its first snapshot writes none and
// records them all as said, as a continuation's base does, but a
// completed status's message (status writes it unless the stored frames
// end with it: storedEnd); the snapshots after (a re-subscription, a
// poll) write only what came since.
func (t *turn) gapMessages(task *a2a.Task) error {
	if t.saidUnknown {
		t.saidUnknown = false
		for _, m := range task.History {
			t.say(m)
		}
		if task.Status.State != a2a.TaskStateCompleted {
			t.say(task.Status.Message)
		}
		return nil
	}
	cur := task.Status.Message
	for _, m := range task.History {
		if m == nil || m.Role != a2a.MessageRoleAgent || m.ID == "" || t.said[m.ID] || cur != nil && m.ID == cur.ID {
			continue // the status message, when the history holds it too, is the status's
		}
		t.say(m)
		if err := t.statusMessage(a2a.TaskStatus{State: a2a.TaskStateWorking, Message: m}); err != nil {
			return err
		}
	}
	st := task.Status.State
	if cur == nil || cur.ID == "" || t.said[cur.ID] || terminal(st) ||
		st == a2a.TaskStateInputRequired || st == a2a.TaskStateAuthRequired {
		return nil
	}
	t.say(cur)
	return t.statusMessage(task.Status)
}

// say records agent message m (nil or without an id: nothing) as said.
func (t *turn) say(m *a2a.Message) {
	if m == nil || m.ID == "" {
		return
	}
	if t.said == nil {
		t.said = map[string]bool{}
	}
	t.said[m.ID] = true
}

// sayAll records the messages of task, its history's and its status's,
// as said.
func (t *turn) sayAll(task *a2a.Task) {
	for _, m := range task.History {
		t.say(m)
	}
	t.say(task.Status.Message)
}
