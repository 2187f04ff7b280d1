package a2av1

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// PushHost is a Host that keeps push notification configs: the four
// push-config methods and SendMessage's inline taskPushNotificationConfig
// are served from its store (nil: PushNotificationNotSupportedError, and
// the card says pushNotifications: false).
type PushHost interface {
	PushStore() *push.Store
}

// pushStore is the host's push config store, or nil.
func (h *handler) pushStore() *push.Store {
	if ph, ok := h.h.(PushHost); ok {
		return ph.PushStore()
	}
	return nil
}

// pushCall is a push-config call's store and principal
// (a2aproto.PushPrincipal: the user_id of the task's envelopes), after
// checking the request's tenant as every method on a task does (readCall:
// it was ignored here, a config created or deleted through an interface
// of another pool) and that the task is the caller's (another principal's
// is TaskNotFound, as one that does not exist).
func (h *handler) pushCall(ctx context.Context, tenantName string, taskID a2a.TaskID, access tenant.Access) (*push.Store, pushCaller, error) {
	c, err := h.readCall(ctx, tenantName)
	if err != nil {
		return nil, pushCaller{}, err
	}
	st := h.pushStore()
	if st == nil {
		return nil, pushCaller{}, a2a.ErrPushNotificationNotSupported
	}
	if taskID == "" {
		return nil, pushCaller{}, fmt.Errorf("%w: taskId is required", a2a.ErrInvalidParams)
	}
	t, err := c.c.Task(ctx, string(taskID), access)
	if err != nil {
		return nil, pushCaller{}, a2a.ErrTaskNotFound
	}
	var f host.TaskRequests
	if fh, ok := h.h.(interface{ TaskFrames() host.TaskFrames }); ok {
		f = fh.TaskFrames()
	}
	in := c.c.HeaderInput(c.header, c.agent)
	return st, pushCaller{principal: a2aproto.PushPrincipal(ctx, f, in, t), secrets: a2aproto.PushSecretsShown(in, t)}, nil
}

// pushCaller is a push-config call's principal (whose configs it reads)
// and whether it reads their secrets (a2aproto.PushSecretsShown).
type pushCaller struct {
	principal string
	secrets   bool
}

// answer is c as the caller reads it: whole, or with its secrets hidden.
func (p pushCaller) answer(c *a2a.PushConfig) *a2a.PushConfig {
	if !p.secrets {
		return a2aproto.HideSecretsV1(c)
	}
	return c
}

// pushError is the SDK's kind of a push store error (push.KindOf) about
// config id: a config that does not exist on the caller's task is
// TaskNotFoundError (§3.1.8) whose message names the config
// (push.NotFoundMessage), not the task, which exists.
func pushError(err error, id string) error {
	switch push.KindOf(err) {
	case push.KindInvalidParams:
		return fmt.Errorf("%w: %s", a2a.ErrInvalidParams, egress.ClientMessage(err))
	case push.KindNotFound:
		return a2a.NewError(a2a.ErrTaskNotFound, push.NotFoundMessage(id))
	case push.KindCanceled:
		return err
	}
	return fmt.Errorf("%w: push notification configs unavailable", a2a.ErrInternalError)
}

// CreateTaskPushConfig stores a config of the caller's task.
func (h *handler) CreateTaskPushConfig(ctx context.Context, req *a2a.PushConfig) (*a2a.PushConfig, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: config is required", a2a.ErrInvalidParams)
	}
	st, p, err := h.pushCall(ctx, req.Tenant, req.TaskID, tenant.Write)
	if err != nil {
		return nil, err
	}
	c, err := st.Create(ctx, p.principal, push.FromV1(req))
	if err != nil {
		return nil, pushError(err, req.ID)
	}
	return c.V1(), nil
}

// GetTaskPushConfig answers one config of the caller's task (no id:
// InvalidParams).
func (h *handler) GetTaskPushConfig(ctx context.Context, req *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	st, p, err := h.pushCall(ctx, req.Tenant, req.TaskID, tenant.Read)
	if err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, errConfigIDRequired
	}
	c, err := st.Get(ctx, p.principal, string(req.TaskID), req.ID)
	if err != nil {
		return nil, pushError(err, req.ID)
	}
	return p.answer(c.V1()), nil
}

// ListTaskPushConfigs answers a page of the caller's task's configs.
func (h *handler) ListTaskPushConfigs(ctx context.Context, req *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	if c, ok := callFrom(ctx); ok && req.PageSize == 0 && req.PageToken == "" && c.query != nil {
		// HTTP+JSON: GET /tasks/{id}/pushNotificationConfigs?pageSize=&pageToken=
		if v := c.query.Get("pageSize"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("%w: pageSize %q is not a number", a2a.ErrInvalidParams, v)
			}
			req.PageSize = n
		}
		req.PageToken = c.query.Get("pageToken")
	}
	if req.PageSize < 0 {
		return nil, fmt.Errorf("%w: pageSize must not be negative", a2a.ErrInvalidParams)
	}
	st, p, err := h.pushCall(ctx, req.Tenant, req.TaskID, tenant.Read)
	if err != nil {
		return nil, err
	}
	cs, next, err := st.List(ctx, p.principal, string(req.TaskID), req.PageSize, req.PageToken)
	if err != nil {
		return nil, pushError(err, "")
	}
	if c, ok := callFrom(ctx); ok && c.nextPageToken != nil {
		*c.nextPageToken = next
	}
	out := &a2a.ListTaskPushConfigResponse{Configs: make([]*a2a.PushConfig, 0, len(cs)), NextPageToken: next}
	for _, c := range cs {
		out.Configs = append(out.Configs, p.answer(c.V1()))
	}
	return out, nil
}

// errConfigIDRequired answers a get or delete without the config's id,
// a REQUIRED field of their requests (a2a.proto): a delete answered
// success for it would tell the client its config was gone while its
// webhook still gets every update.
var errConfigIDRequired = fmt.Errorf("%w: id (the push notification config's) is required", a2a.ErrInvalidParams)

// DeleteTaskPushConfig deletes one config of the caller's task,
// idempotently (A2A v1.0 §3.1.10): a config already gone is no error;
// another principal's task is TaskNotFound; no id is InvalidParams.
func (h *handler) DeleteTaskPushConfig(ctx context.Context, req *a2a.DeleteTaskPushConfigRequest) error {
	st, p, err := h.pushCall(ctx, req.Tenant, req.TaskID, tenant.Write)
	if err != nil {
		return err
	}
	if req.ID == "" {
		return errConfigIDRequired
	}
	if err := st.Delete(ctx, p.principal, string(req.TaskID), req.ID); err != nil && !errors.Is(err, push.ErrNotFound) {
		return pushError(err, req.ID)
	}
	return nil
}

// inlinePush stores SendMessage's inline config for the task of env, the
// request's envelope, before the request is published, so its first
// update is delivered. prev is the task the message continues (nil: a new
// task), the caller's or one an admin may write (checked by submit); in is
// the caller's input. The config is stored under
// a2aproto.InlinePushPrincipal, the principal CreateTaskPushConfig keeps
// the task's configs under (its owner, for an admin's message continuing
// another principal's task too), where the push stage finds them.
func (h *handler) inlinePush(ctx context.Context, in normalizer.Input, req *a2a.SendMessageRequest, env *e2a.Envelope, prev *host.Task) (func(context.Context) error, error) {
	if req.Config == nil || req.Config.PushConfig == nil {
		return nil, nil
	}
	st := h.pushStore()
	if st == nil {
		return nil, a2a.ErrPushNotificationNotSupported
	}
	if env.TaskID == "" {
		return nil, fmt.Errorf("%w: a push notification config needs a task (the message's answer here is no task)", a2a.ErrInvalidParams)
	}
	cfg := *req.Config.PushConfig
	cfg.TaskID = a2a.TaskID(env.TaskID)
	_, undo, err := st.CreateUndoable(ctx, a2aproto.InlinePushPrincipal(in, prev, env), push.FromV1(&cfg))
	if err != nil {
		return nil, pushError(err, cfg.ID)
	}
	return undo, nil
}
