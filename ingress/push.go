package ingress

import (
	"context"
	"errors"
	"fmt"

	legacy "github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	"github.com/e2a-pipeline/pipeline/push"
)

// WithPushStore serves A2A's push notification config methods (v1.0's
// four on every binding, SendMessage's inline config) from store, and
// the cards declare pushNotifications. Without it they answer
// PushNotificationNotSupported.
func WithPushStore(store *push.Store) Option {
	return func(o *options) error {
		if store == nil {
			return fmt.Errorf("ingress: nil push store")
		}
		o.push = store
		return nil
	}
}

var _ a2av1.PushHost = protocolHost{}

// PushStore is the push config store (nil without WithPushStore).
func (h protocolHost) PushStore() *push.Store { return h.s.opts.push }

var _ a2aproto.PushHost = protocolHost{}

// PushConfigsV03 serves A2A v0.3's push-config methods from the push
// store (nil without WithPushStore).
func (h protocolHost) PushConfigsV03() a2aproto.PushConfigs {
	if h.s.opts.push == nil {
		return nil
	}
	return v03Push{h.s.opts.push}
}

// v03Push is the push store in A2A v0.3's types and JSON-RPC errors.
type v03Push struct{ st *push.Store }

var _ a2aproto.PushConfigs = v03Push{}

func (p v03Push) SetV03(ctx context.Context, principal string, c *legacy.TaskPushConfig) (*legacy.TaskPushConfig, error) {
	out, err := p.st.Create(ctx, principal, push.FromV03(c))
	if err != nil {
		return nil, v03PushError(err, c.Config.ID)
	}
	return out.V03(), nil
}

func (p v03Push) SetInlineV03(ctx context.Context, principal string, c *legacy.TaskPushConfig) (func(context.Context) error, error) {
	_, undo, err := p.st.CreateUndoable(ctx, principal, push.FromV03(c))
	if err != nil {
		return nil, v03PushError(err, c.Config.ID)
	}
	return undo, nil
}

func (p v03Push) GetV03(ctx context.Context, principal, taskID, id string) (*legacy.TaskPushConfig, error) {
	out, err := p.st.Get(ctx, principal, taskID, id)
	if err != nil {
		return nil, v03PushError(err, id)
	}
	return out.V03(), nil
}

// ListV03 lists every config of the task: A2A v0.3's
// tasks/pushNotificationConfig/list has no page parameters (its params
// are the task id and metadata), and one page of push.MaxPageSize holds
// them all, the per-task limit (push.WithMaxPerTask) being at most that.
func (p v03Push) ListV03(ctx context.Context, principal, taskID string) ([]*legacy.TaskPushConfig, error) {
	cs, _, err := p.st.List(ctx, principal, taskID, push.MaxPageSize, "")
	if err != nil {
		return nil, v03PushError(err, "")
	}
	out := make([]*legacy.TaskPushConfig, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.V03())
	}
	return out, nil
}

// DeleteV03 deletes one config of the task idempotently, as the v0.3
// reference servers (a2a-go v0.3, @a2a-js/sdk 0.3) and v1.0's
// DeleteTaskPushNotificationConfig do: a config already gone is no error
// (a client retrying a delete whose answer it lost succeeds).
func (p v03Push) DeleteV03(ctx context.Context, principal, taskID, id string) error {
	if err := p.st.Delete(ctx, principal, taskID, id); err != nil && !errors.Is(err, push.ErrNotFound) {
		return v03PushError(err, id)
	}
	return nil
}

// v03PushError is a push store error about config id as A2A v0.3's
// JSON-RPC error (push.KindOf): a config that does not exist on the
// caller's task is -32001 (the TaskNotFoundError v0.3's get names, as
// v1.0 §3.1.8 does) whose message names the config
// (push.NotFoundMessage), not the task, which exists.
func v03PushError(err error, id string) error {
	switch push.KindOf(err) {
	case push.KindInvalidParams:
		return jsonrpc.InvalidParams(egress.ClientMessage(err))
	case push.KindNotFound:
		return &jsonrpc.Error{Code: jsonrpc.CodeA2ATaskNotFound, Message: push.NotFoundMessage(id)}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "push notification configs unavailable"}
}
