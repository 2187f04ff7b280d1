package a2aupstream

import (
	"context"
	"fmt"
	"iter"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
)

// handler is the server's a2asrv.RequestHandler: a2a-go's own, behind a
// layer that records every call, checks the credentials the options ask
// for, refuses streaming when the server does not stream, and hands the
// next message naming a task waiting in auth-required to its execution.
type handler struct {
	a2asrv.RequestHandler // a2a-go's default handler
	s                     *Server
}

var _ a2asrv.RequestHandler = (*handler)(nil)

// before records the call and checks its credentials.
func (h *handler) before(ctx context.Context, c Call) error {
	c.Header = http.Header{}
	if cc, ok := a2asrv.CallContextFrom(ctx); ok {
		for k, v := range cc.ServiceParams().List() {
			c.Header[http.CanonicalHeaderKey(k)] = v
		}
	}
	c.Refused = !h.s.authorized(c.Header)
	h.s.recordCall(c)
	if c.Refused {
		return fmt.Errorf("missing or wrong credentials: %w", a2a.ErrUnauthenticated)
	}
	return nil
}

// checked records call c and checks its credentials (before), then
// hands req to next, a2a-go's handler of the method.
func checked[Q, R any](ctx context.Context, h *handler, c Call, req Q, next func(context.Context, Q) (R, error)) (R, error) {
	if err := h.before(ctx, c); err != nil {
		var zero R
		return zero, err
	}
	return next(ctx, req)
}

func messageCall(method string, req *a2a.SendMessageRequest) Call {
	c := Call{Method: method}
	if req != nil && req.Message != nil {
		c.Message, c.TaskID, c.ContextID, c.Text = req.Message, req.Message.TaskID, req.Message.ContextID, firstText(req.Message)
	}
	return c
}

func (h *handler) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	if err := h.before(ctx, messageCall("SendMessage", req)); err != nil {
		return nil, err
	}
	if p := h.s.parked(req); p != nil {
		var last a2a.Event
		for ev, err := range h.resume(ctx, p, req) {
			if err != nil {
				return nil, err
			}
			last = ev
		}
		if last == nil {
			return nil, fmt.Errorf("auth resume produced no event: %w", a2a.ErrInvalidAgentResponse)
		}
		return h.RequestHandler.GetTask(ctx, &a2a.GetTaskRequest{ID: p.task})
	}
	res, err := h.RequestHandler.SendMessage(ctx, req)
	if err != nil {
		h.s.refused(err)
	}
	return res, err
}

func (h *handler) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if err := h.before(ctx, messageCall("SendStreamingMessage", req)); err != nil {
			yield(nil, err)
			return
		}
		if h.s.opts.NoStreaming {
			yield(nil, a2a.ErrUnsupportedOperation)
			return
		}
		events := h.RequestHandler.SendStreamingMessage(ctx, req)
		if p := h.s.parked(req); p != nil {
			events = h.resume(ctx, p, req)
		}
		for ev, err := range events {
			if err != nil {
				h.s.refused(err)
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// resume hands msg to the execution waiting in auth-required and streams
// what it does next, until the task's next final state. It subscribes to
// the task before handing the message over, so no event is missed, and
// drops the subscription's snapshot (the task still in auth-required).
func (h *handler) resume(ctx context.Context, p *parking, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		next, stop := iter.Pull2(h.RequestHandler.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: p.task}))
		defer stop()
		if _, err, ok := next(); !ok || err != nil {
			yield(nil, fmt.Errorf("task %s: %w", p.task, a2a.ErrTaskNotFound))
			return
		}
		select {
		case p.answer <- req.Message:
		case <-p.gone:
			yield(nil, fmt.Errorf("task %s no longer waits for auth: %w", p.task, a2a.ErrTaskNotFound))
			return
		case <-ctx.Done():
			yield(nil, ctx.Err())
			return
		}
		for {
			ev, err, ok := next()
			if !ok || !yield(ev, err) || err != nil || final(ev) {
				return
			}
		}
	}
}

// final reports whether ev ends a turn: a message, or a task or status in
// a terminal or interrupted state.
func final(ev a2a.Event) bool {
	var st a2a.TaskState
	switch v := ev.(type) {
	case *a2a.Message:
		return true
	case *a2a.Task:
		st = v.Status.State
	case *a2a.TaskStatusUpdateEvent:
		st = v.Status.State
	default:
		return false
	}
	return st.Terminal() || st == a2a.TaskStateInputRequired || st == a2a.TaskStateAuthRequired
}

func (h *handler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if err := h.before(ctx, Call{Method: "SubscribeToTask", TaskID: req.ID}); err != nil {
			yield(nil, err)
			return
		}
		if h.s.opts.NoStreaming {
			yield(nil, a2a.ErrUnsupportedOperation)
			return
		}
		for ev, err := range h.RequestHandler.SubscribeToTask(ctx, req) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

func (h *handler) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	return checked(ctx, h, Call{Method: "GetTask", TaskID: req.ID}, req, h.RequestHandler.GetTask)
}

func (h *handler) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	return checked(ctx, h, Call{Method: "ListTasks", ContextID: req.ContextID}, req, h.RequestHandler.ListTasks)
}

func (h *handler) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	return checked(ctx, h, Call{Method: "CancelTask", TaskID: req.ID}, req, func(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
		if h.s.raceCancel() {
			return nil, fmt.Errorf("cancelation failed: %w", eventqueue.ErrQueueClosed)
		}
		return h.RequestHandler.CancelTask(ctx, req)
	})
}

func (h *handler) GetTaskPushConfig(ctx context.Context, req *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return checked(ctx, h, Call{Method: "GetTaskPushConfig", TaskID: req.TaskID}, req, h.RequestHandler.GetTaskPushConfig)
}

func (h *handler) ListTaskPushConfigs(ctx context.Context, req *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	return checked(ctx, h, Call{Method: "ListTaskPushConfigs", TaskID: req.TaskID}, req, h.RequestHandler.ListTaskPushConfigs)
}

func (h *handler) CreateTaskPushConfig(ctx context.Context, req *a2a.PushConfig) (*a2a.PushConfig, error) {
	return checked(ctx, h, Call{Method: "CreateTaskPushConfig", TaskID: req.TaskID}, req, h.RequestHandler.CreateTaskPushConfig)
}

func (h *handler) DeleteTaskPushConfig(ctx context.Context, req *a2a.DeleteTaskPushConfigRequest) error {
	if err := h.before(ctx, Call{Method: "DeleteTaskPushConfig", TaskID: req.TaskID}); err != nil {
		return err
	}
	return h.RequestHandler.DeleteTaskPushConfig(ctx, req)
}

func (h *handler) GetExtendedAgentCard(ctx context.Context, req *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return checked(ctx, h, Call{Method: "GetExtendedAgentCard"}, req, h.RequestHandler.GetExtendedAgentCard)
}
