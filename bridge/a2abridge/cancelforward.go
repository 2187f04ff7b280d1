package a2abridge

import (
	"context"
	"errors"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
)

// Forwarding a request's end to the agent.
//
// A request that ends for good while its upstream task runs (cancelled, or
// past its deadline: no worker will take it over) has the task cancelled
// (CancelTask), so that the agent does not work on for nobody. A request
// handed back (a shutdown) or fenced is not: the worker that takes it over
// resumes the task.
//
// The agent names its task in its stream's first event, or, for an agent
// that does not stream, in its answer to SendMessage (returnImmediately:
// answered at its first event), which may come late (a model loading, a
// queue). A cancel before it came has no task to cancel, and closing the
// stream or dropping the call would leave the agent's task, made a moment
// later, running (a2a-go's and @a2a-js/sdk's executions are detached from
// the stream or the call). So the stream is read, and the answer waited
// for, on a context the request's end does not close (detached: stream,
// send), and on such an end it is read on, for at most cancelWait, until
// an event names the task, which is then cancelled; a stream or a call
// that ends, or a wait that passes, without a task is logged. The events
// read so are not written (the request has ended).

// cancelWait bounds the wait for the task's name after the request ended
// (agent.CancelRequestTimeout, which bounds a cancel's forwarding
// elsewhere); the CancelTask that follows has a bound of its own.
const cancelWait = agent.CancelRequestTimeout

// forwarded reports whether ctx, done, ended its request for good: a
// cancel or the request's deadline.
func forwarded(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, agent.ErrCancelled) || errors.Is(cause, agent.ErrDeadlineExceeded)
}

// streamed is one item of the agent's stream.
type streamed struct {
	ev  a2a.Event
	err error
}

// stream is the agent's stream of req (SendStreamingMessage), read on a
// context the end of ctx does not close (detached).
func (t *turn) stream(ctx context.Context, req *a2a.SendMessageRequest) func(func(a2a.Event, error) bool) {
	return t.detached(ctx, func(sctx context.Context, emit func(a2a.Event, error) bool) {
		for ev, err := range t.u.client.SendStreamingMessage(sctx, req) {
			if !emit(ev, err) {
				return
			}
		}
	})
}

// send is the agent's answer to req (SendMessage), asked for on a context
// the end of ctx does not close (detached): the answer, or the call's
// error, as the one item; ctx.Err() when ctx ended first.
func (t *turn) send(ctx context.Context, req *a2a.SendMessageRequest) (a2a.Event, error) {
	for ev, err := range t.detached(ctx, func(sctx context.Context, emit func(a2a.Event, error) bool) {
		res, err := t.u.client.SendMessage(sctx, req)
		if err != nil {
			emit(nil, err)
			return
		}
		emit(res, nil)
	}) {
		return ev, err
	}
	return nil, errors.New("a2abridge: no answer") // detached yields an item at least
}

// detached runs call, which emits the agent's events (a stream's, or a
// SendMessage's one answer) until emit returns false, on a context the
// end of ctx does not close (its values kept: the credentials; the
// bridge's own timeouts still bound its calls). It yields the events
// while ctx lasts; once ctx is done it yields ctx.Err(), after, when ctx
// ended the request for good before the agent named its task, reading
// the events on until one does and cancelling that task (cancelUnnamed).
// call's context is closed when the iteration ends.
func (t *turn) detached(ctx context.Context, call func(context.Context, func(a2a.Event, error) bool)) func(func(a2a.Event, error) bool) {
	return func(yield func(a2a.Event, error) bool) {
		sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		items := make(chan streamed)
		go func() {
			defer close(items)
			call(sctx, func(ev a2a.Event, err error) bool {
				select {
				case items <- streamed{ev, err}:
					return true
				case <-sctx.Done():
					return false
				}
			})
		}()
		defer func() {
			stop()
			for range items { // the caller ends once sctx is done
			}
		}()
		for ctx.Err() == nil {
			select {
			case it, ok := <-items:
				if !ok || !yield(it.ev, it.err) {
					return
				}
			case <-ctx.Done():
			}
		}
		if t.taskID == "" && !t.done && forwarded(ctx) {
			t.cancelUnnamed(ctx, items)
		}
		yield(nil, ctx.Err())
	}
}

// cancelUnnamed reads items, the rest of the events (a stream's, or the
// answer of SendMessage) of a request that ended for good before the
// agent named its task, until an event names it (for at most
// cancelWait), and cancels that task. A direct answer or a task already
// ended has nothing to cancel; events that end (an error) or a wait that
// passes without a task are logged.
func (t *turn) cancelUnnamed(ctx context.Context, items <-chan streamed) {
	timer := time.NewTimer(cancelWait)
	defer timer.Stop()
	for {
		select {
		case it, ok := <-items:
			if !ok || it.err != nil {
				msg := "the stream ended"
				if ok {
					msg = t.u.Scrub(it.err.Error())
				}
				t.u.cfg.log.Warn("a2a bridge: cancel not forwarded: the agent's answer ended before it named its task",
					"request_id", t.env.RequestID, "err", msg)
				return
			}
			id, ended, named := taskNamed(it.ev)
			if !named {
				continue
			}
			if id != "" && !ended {
				t.cancelTask(ctx, id)
			}
			return
		case <-timer.C:
			t.u.cfg.log.Warn("a2a bridge: cancel not forwarded: the agent named no task in time",
				"request_id", t.env.RequestID, "waited", cancelWait)
			return
		}
	}
}

// taskNamed reads the task an event of the stream names: named is false
// for an event that says nothing of it; a direct answer (a Message) names
// none ("").
func taskNamed(ev a2a.Event) (id a2a.TaskID, ended, named bool) {
	switch e := ev.(type) {
	case *a2a.Message:
		return "", true, true
	case *a2a.Task:
		return e.ID, terminal(e.Status.State), e.ID != ""
	case *a2a.TaskStatusUpdateEvent:
		return e.TaskID, terminal(e.Status.State), e.TaskID != ""
	case *a2a.TaskArtifactUpdateEvent:
		return e.TaskID, false, e.TaskID != ""
	}
	return "", false, false
}

// cancelTask cancels the agent's task id (CancelTask, bounded by
// agent.CancelRequestTimeout, on ctx's values: the credentials), logging
// a refusal (scrubbed).
func (t *turn) cancelTask(ctx context.Context, id a2a.TaskID) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), agent.CancelRequestTimeout)
	defer cancel()
	if _, err := t.u.client.CancelTask(cctx, &a2a.CancelTaskRequest{ID: id}); err != nil {
		t.u.cfg.log.Warn("a2a bridge: cancel not forwarded", "task", id, "request_id", t.env.RequestID,
			"err", t.u.Scrub(err.Error()))
	}
}
