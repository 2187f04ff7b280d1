package console

import (
	"context"
	"net/http"

	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/push/pushstate"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// PushDelivery is the console's view of one push notification config of
// a task and its delivery state: the webhook's host only, never its path,
// query, token or credentials (which the view function must not return).
// It is push.DeliveryState, declared in push/pushstate: the console does
// not import the push stage, whose A2A SDK dependencies would follow it
// into egress.
type PushDelivery = pushstate.Delivery

// PushView returns the push notification configs of principal's task
// taskID with their delivery state (none for a task that is not the
// principal's: the same answer as a task without configs). cmd/e2a passes
// the push store's Deliveries.
type PushView func(ctx context.Context, principal, taskID string) ([]PushDelivery, error)

// WithPushView serves GET /console/api/tasks/{task}/push from v (nil is
// refused; without it the route answers 404).
func WithPushView(v PushView) Option {
	return option.Check(ErrInvalidOption, v != nil, func(o *options) { o.push = v }, "nil push view")
}

// TaskPush is what GET /console/api/tasks/{task}/push answers.
type TaskPush struct {
	TaskID    string         `json:"task_id"`
	Principal string         `json:"principal"`
	Configs   []PushDelivery `json:"configs"`
}

// taskPush answers the push configs of a task, for its owner: a principal
// sees its own task's configs (another's task lists nothing, as a task
// without configs); one that sees everything (audit, admin, open) names
// the owner with ?user= (default its own id).
func (c *Console) taskPush(w http.ResponseWriter, r *http.Request) {
	if c.o.push == nil {
		apiError(w, http.StatusNotFound, "not_found", "push notifications are not served by this process")
		return
	}
	// The task is the path's segment, or, on the route that takes it in
	// the query (how the page asks for the task "." or ".."), ?id=.
	task := r.PathValue("task")
	if task == "" {
		if task = r.URL.Query().Get("id"); task == "" {
			apiError(w, http.StatusBadRequest, "bad_request", "missing task id (?id=)")
			return
		}
	}
	if err := subjects.ValidateID(task); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "invalid task id")
		return
	}
	p := principalFrom(r.Context())
	owner := p.ID
	if u := r.URL.Query().Get("user"); u != "" && u != p.ID {
		if !p.SeesAll() {
			writeJSON(w, http.StatusOK, TaskPush{TaskID: task, Principal: u, Configs: []PushDelivery{}})
			return
		}
		owner = u
	}
	ds, err := c.o.push(r.Context(), owner, task)
	if err != nil {
		c.o.log.Warn("console: push delivery state unavailable", "err", err)
		apiError(w, http.StatusServiceUnavailable, "unavailable", "the push delivery state could not be read; retry")
		return
	}
	if ds == nil {
		ds = []PushDelivery{}
	}
	writeJSON(w, http.StatusOK, TaskPush{TaskID: task, Principal: owner, Configs: ds})
}
