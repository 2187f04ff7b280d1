package conformance

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// DefaultKey is the header that admits a [BindingHost]'s calls when its
// Key is empty.
const DefaultKey = "X-Api-Key"

// BindingHost is [RPCHost] for a protocol package that serves an SDK's
// bindings over the host's task store (A2A v1.0's: a host.Host, a
// host.HeaderGate and a host.Canceler whose callers are
// host.BindingCallers), without ingress or NATS.
//
// A call is admitted when it carries the header Key, whose value names
// its principal (the header is then removed, as the host strips
// credentials); without it the call is refused as the host refuses a
// call without credentials (401, "unauthenticated"). Tasks and contexts
// keep the host's ownership rule, one principal each, no tenant-wide
// access:
//   - another principal's task is not found ([host.ErrSessionNotFound]) and
//     never listed;
//   - a context belongs to the first principal that claims it (a
//     submission with ClaimContext, [BindingHost.AddTask],
//     [BindingHost.ClaimContext]); another's claim is [host.ErrConflict],
//     checked after the stream slot and before Before, as the host does;
//   - a submitted turn is recorded on its task before the publish and
//     taken off again when the publish fails (PublishErr); a task that
//     does not exist yet is made, owned by the caller; a turn of another
//     principal's task is [host.ErrConflict], with nothing published;
//   - a task [BindingHost.EndTask] ended is terminal: CheckTaskOpen is
//     [host.ErrTaskTerminal].
//
// CancelInterrupted answers egress.ErrNotCancelable (no turn of the fake
// ends interrupted); NextTurn waits for a turn submitted after the one
// named, or the context's end. Its zero value is ready; it is safe for
// concurrent use.
type BindingHost struct {
	RPCHost
	// Key is the header that admits a call and names its principal;
	// DefaultKey when empty.
	Key string

	tasks    []*ownedTask
	contexts map[string]string // context id → owner
	ended    map[string]bool
	turned   chan struct{} // closed and replaced when a turn is recorded
}

// ownedTask is a task of the store and the principal it belongs to.
type ownedTask struct {
	owner string
	task  host.ListedTask
}

var (
	_ host.Host          = (*BindingHost)(nil)
	_ host.HeaderGate    = (*BindingHost)(nil)
	_ host.Canceler      = (*BindingHost)(nil)
	_ host.Caller        = bindingCaller{}
	_ host.BindingCaller = bindingCaller{}
)

// Admit admits r as the principal its Key header names; a request without
// it is refused (401 unauthenticated), as is every request when Refusal
// is set.
func (h *BindingHost) Admit(w http.ResponseWriter, r *http.Request, _ string, refuse host.Refuse) (host.Caller, bool) {
	c, ok := h.admitHTTP(w, r, refuse)
	if !ok {
		return nil, false
	}
	return c, true
}

// admitHTTP admits r (Admit, AdmitBinding), writing a refusal with
// refuse.
func (h *BindingHost) admitHTTP(w http.ResponseWriter, r *http.Request, refuse host.Refuse) (bindingCaller, bool) {
	c, f := h.admit(r.Header)
	if f != nil {
		refuse(w, *f)
		return c, false
	}
	return c, true
}

// AdmitBinding is Admit, the caller a host.BindingCaller.
func (h *BindingHost) AdmitBinding(w http.ResponseWriter, r *http.Request, _ string, refuse host.Refuse) (host.BindingCaller, bool) {
	c, ok := h.admitHTTP(w, r, refuse)
	if !ok {
		return nil, false
	}
	return c, true
}

// AdmitHeader is Admit for a call that has headers but no HTTP request
// (gRPC metadata); the refusal is returned.
func (h *BindingHost) AdmitHeader(_ context.Context, header http.Header, _, _ string) (host.BindingCaller, *host.Refusal, error) {
	c, f := h.admit(header)
	if f != nil {
		return nil, f, nil
	}
	return c, nil, nil
}

func (h *BindingHost) admit(header http.Header) (bindingCaller, *host.Refusal) {
	if h.Refusal != nil {
		return bindingCaller{}, h.Refusal
	}
	key := cmp.Or(h.Key, DefaultKey)
	p := header.Get(key)
	if p == "" {
		return bindingCaller{}, &host.Refusal{Status: http.StatusUnauthorized, Code: "unauthenticated",
			Message: "missing credentials", RPCCode: jsonrpc.CodeAuthentication}
	}
	header.Del(key) // the credential goes no further, as the host strips it
	return bindingCaller{h: h, p: p}, nil
}

// CallerOf is the principal p as the host admits it (RPCHost's Caller
// stays the JSON-RPC calls' one).
func (h *BindingHost) CallerOf(p string) host.BindingCaller { return bindingCaller{h: h, p: p} }

// AddTask stores t as owner's task, its context claimed by owner when no
// one has claimed it; a task of the same id is replaced.
func (h *BindingHost) AddTask(owner string, t host.ListedTask) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.RequestIDs = slices.Clone(t.RequestIDs)
	h.tasks = slices.DeleteFunc(h.tasks, func(o *ownedTask) bool { return o.task.ID == t.ID })
	h.tasks = append(h.tasks, &ownedTask{owner: owner, task: t})
	h.claimLocked(owner, t.ContextID)
}

// ClaimContext claims contextID as owner's; host.ErrConflict when it is
// another principal's.
func (h *BindingHost) ClaimContext(owner, contextID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.claimLocked(owner, contextID)
}

func (h *BindingHost) claimLocked(owner, contextID string) error {
	if contextID == "" {
		return nil
	}
	if h.contexts == nil {
		h.contexts = map[string]string{}
	}
	if o, ok := h.contexts[contextID]; ok && o != owner {
		return host.ErrConflict
	}
	h.contexts[contextID] = owner
	return nil
}

// EndTask makes the task terminal: it takes no new message.
func (h *BindingHost) EndTask(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended == nil {
		h.ended = map[string]bool{}
	}
	h.ended[id] = true
}

// Task returns the task id as stored now and its owner; nil when there is
// none.
func (h *BindingHost) Task(id string) (t *host.ListedTask, owner string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if o := h.taskLocked(id); o != nil {
		c := o.task
		c.RequestIDs = slices.Clone(o.task.RequestIDs)
		return &c, o.owner
	}
	return nil, ""
}

func (h *BindingHost) taskLocked(id string) *ownedTask {
	for _, o := range h.tasks {
		if o.task.ID == id {
			return o
		}
	}
	return nil
}

// recordTurn appends the turn's request to its task, made for p when
// there is none, and returns how to take it off again; host.ErrConflict
// when the task is another principal's.
func (h *BindingHost) recordTurn(p string, turn *host.Turn, requestID string) (undo func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := h.taskLocked(turn.Task.ID)
	switch {
	case o == nil:
		o = &ownedTask{owner: p, task: host.ListedTask{Task: turn.Task}}
		o.task.RequestIDs = nil
		h.tasks = append(h.tasks, o)
	case o.owner != p:
		return nil, host.ErrConflict
	}
	o.task.RequestIDs = append(o.task.RequestIDs, requestID)
	o.task.Updated = time.Now().UTC().Format(time.RFC3339Nano)
	if h.turned != nil {
		close(h.turned)
		h.turned = nil
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		o.task.RequestIDs = slices.DeleteFunc(o.task.RequestIDs, func(id string) bool { return id == requestID })
	}, nil
}

// bindingCaller is the principal p a BindingHost admitted.
type bindingCaller struct {
	h *BindingHost
	p string
}

// Input is [Host]'s.
func (c bindingCaller) Input(r *http.Request, body []byte, agent string) normalizer.Input {
	return caller{&c.h.Host}.Input(r, body, agent)
}

// HeaderInput is the normalizer's view of a call with those headers.
func (c bindingCaller) HeaderInput(header http.Header, agent string) normalizer.Input {
	return normalizer.Input{Header: header, Channel: "http", Agent: agent}
}

// Submit is [Host]'s, the context claimed (ClaimContext) and the turn
// recorded on its task (Turn) before the publish, as the host does.
func (c bindingCaller) Submit(ctx context.Context, s host.Submission) (*host.Submitted, error) {
	var hooks submitHooks
	if s.ClaimContext {
		hooks.claim = func() error { return c.h.ClaimContext(c.p, s.Envelope.ContextID) }
	}
	if s.Turn != nil && !s.Turn.Session {
		hooks.record = func() (func(), error) { return c.h.recordTurn(c.p, s.Turn, s.Envelope.RequestID) }
	}
	return caller{&c.h.Host}.submit(ctx, s, hooks)
}

// Charge is [Host]'s.
func (c bindingCaller) Charge(ctx context.Context, protocol string, n int) *host.Refusal {
	return caller{&c.h.Host}.Charge(ctx, protocol, n)
}

// StreamSlot is [Host]'s.
func (c bindingCaller) StreamSlot(w http.ResponseWriter, refuse host.Refuse) (func(), bool) {
	return caller{&c.h.Host}.StreamSlot(w, refuse)
}

// AcquireStream takes a stream slot; none when NoSlot is set.
func (c bindingCaller) AcquireStream() (func(), bool) { return caller{&c.h.Host}.slot() }

// Task is the caller's task id; host.ErrSessionNotFound when there is none
// or it is another principal's.
func (c bindingCaller) Task(_ context.Context, id string, _ tenant.Access) (*host.Task, error) {
	t, owner := c.h.Task(id)
	if t == nil || owner != c.p {
		return nil, host.ErrSessionNotFound
	}
	return &t.Task, nil
}

// Record is the caller's task id (nil when there is none), an error
// matching host.ErrConflict when it is another principal's; the fake host
// keeps no ACP session records (nil).
func (c bindingCaller) Record(_ context.Context, id string, session bool) (*host.Task, error) {
	if session {
		return nil, nil
	}
	t, owner := c.h.Task(id)
	switch {
	case t == nil:
		return nil, nil
	case owner != c.p:
		return nil, host.ErrConflict
	}
	return &t.Task, nil
}

// CheckTaskOpen is host.ErrTaskTerminal for a task EndTask ended.
func (c bindingCaller) CheckTaskOpen(_ context.Context, t *host.Task) error {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	if c.h.ended[t.ID] {
		return host.ErrTaskTerminal
	}
	return nil
}

// CancelInterrupted is egress.ErrNotCancelable: no turn ends interrupted.
func (c bindingCaller) CancelInterrupted(context.Context, *host.Task) (string, error) {
	return "", egress.ErrNotCancelable
}

// CancelRunning is cancelTurns of t: the fake keeps no mark.
func (c bindingCaller) CancelRunning(ctx context.Context, t *host.Task, cancelTurns func(context.Context, *host.Task) error) (*host.Task, error) {
	return t, cancelTurns(ctx, t)
}

// NextTurn waits until the task holds a request after the request after
// and returns it; the context's error when it ends first.
func (c bindingCaller) NextTurn(ctx context.Context, t *host.Task, after string) (string, error) {
	for {
		c.h.mu.Lock()
		if o := c.h.taskLocked(t.ID); o != nil {
			if i := slices.Index(o.task.RequestIDs, after); i >= 0 && i+1 < len(o.task.RequestIDs) {
				next := o.task.RequestIDs[i+1]
				c.h.mu.Unlock()
				return next, nil
			}
		}
		if c.h.turned == nil {
			c.h.turned = make(chan struct{})
		}
		turned := c.h.turned
		c.h.mu.Unlock()
		select {
		case <-turned:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// LaterTurn is the request after the request after in the task now, ""
// when there is none.
func (c bindingCaller) LaterTurn(_ context.Context, t *host.Task, after string) (string, error) {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	if o := c.h.taskLocked(t.ID); o != nil {
		if i := slices.Index(o.task.RequestIDs, after); i >= 0 && i+1 < len(o.task.RequestIDs) {
			return o.task.RequestIDs[i+1], nil
		}
	}
	return "", nil
}

// Listing is the requests the task id holds now (none when there is no
// such task).
func (c bindingCaller) Listing(id string) egress.Listing {
	return func(context.Context) ([]string, error) {
		if t, _ := c.h.Task(id); t != nil {
			return t.RequestIDs, nil
		}
		return nil, nil
	}
}

// ListTasks returns the caller's tasks that keep accepts, in the order
// they were stored, reading at most max of them (0: all).
func (c bindingCaller) ListTasks(_ context.Context, max int, keep func(*host.ListedTask) bool) ([]*host.ListedTask, error) {
	c.h.mu.Lock()
	var mine []host.ListedTask
	for _, o := range c.h.tasks {
		if o.owner == c.p {
			t := o.task
			t.RequestIDs = slices.Clone(o.task.RequestIDs)
			mine = append(mine, t)
		}
	}
	c.h.mu.Unlock()
	if max > 0 && len(mine) > max {
		mine = mine[len(mine)-max:]
	}
	var out []*host.ListedTask
	for i := range mine {
		if keep(&mine[i]) {
			out = append(out, &mine[i])
		}
	}
	return out, nil
}
