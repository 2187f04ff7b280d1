package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/outbound"
)

// Limits bound what one workflow may do.
type Limits struct {
	// MaxOperations bounds the operations a workflow defines (20).
	MaxOperations int
	// MaxExecutionTime bounds one execution (30 s).
	MaxExecutionTime time.Duration
	// MaxResponseBytes bounds an ApiCall response body (1 MiB); a non-2xx
	// answer past it is still reported by its status code.
	MaxResponseBytes int64
	// MaxLoopIterations bounds the elements one Loop runs over (1,000).
	MaxLoopIterations int
	// MaxSteps bounds operations run in one execution, counting each run
	// inside Loops and Conditionals (1,000).
	MaxSteps int
	// MaxNesting bounds how deep Conditionals and Loops nest (8).
	MaxNesting int
	// DefaultTimeout is an ApiCall's timeout when it names none (30 s).
	DefaultTimeout time.Duration
	// MaxResultBytes bounds the results of the final frame (256 KiB);
	// larger results are replaced by a summary {truncated, bytes}.
	MaxResultBytes int
	// MaxFrameResultBytes bounds the result shown in an operation's end
	// frame (4 KiB); larger ones are left out (their size is given).
	MaxFrameResultBytes int
	// MaxStoreBytes bounds a StoreData value (512 KiB).
	MaxStoreBytes int
	// MaxDataBytes bounds the outputs of one execution together, as JSON
	// (16 MiB): past it the execution fails with a DataError. Without it a
	// few operations (a MergeData of the data model with itself, run
	// again and again) doubled the data model at every step. It bounds
	// too the values one operation references, a value counted once per
	// reference (a DataError for that operation).
	MaxDataBytes int
	// LocalQuota is the localStorage quota per principal, listed in the
	// capabilities (localStorageQuotaBytes) when positive. The storage
	// enforces it (Stores.LocalQuota, given the same); 0 lists none.
	LocalQuota int64
	// SessionQuota is the sessionStorage quota per principal, listed in
	// the capabilities (sessionStorageQuotaBytes) when positive. The
	// storage enforces it (Stores.SessionQuota, given the same); 0 lists
	// none.
	SessionQuota int64
}

// DefaultLimits returns the spec's security constraints and the
// executor's other defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxOperations: 20, MaxExecutionTime: 30 * time.Second, MaxResponseBytes: 1 << 20,
		MaxLoopIterations: 1000, MaxSteps: 1000, MaxNesting: 8, DefaultTimeout: 30 * time.Second,
		MaxResultBytes: 256 << 10, MaxFrameResultBytes: 4 << 10, MaxStoreBytes: 512 << 10, MaxDataBytes: 16 << 20,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	defaultTo(&l.MaxOperations, d.MaxOperations)
	defaultTo(&l.MaxExecutionTime, d.MaxExecutionTime)
	defaultTo(&l.MaxResponseBytes, d.MaxResponseBytes)
	defaultTo(&l.MaxLoopIterations, d.MaxLoopIterations)
	defaultTo(&l.MaxSteps, d.MaxSteps)
	defaultTo(&l.MaxNesting, d.MaxNesting)
	defaultTo(&l.DefaultTimeout, d.DefaultTimeout)
	defaultTo(&l.MaxResultBytes, d.MaxResultBytes)
	defaultTo(&l.MaxFrameResultBytes, d.MaxFrameResultBytes)
	defaultTo(&l.MaxStoreBytes, d.MaxStoreBytes)
	defaultTo(&l.MaxDataBytes, d.MaxDataBytes)
	return l
}

// defaultTo sets *v to d when *v is the zero value.
func defaultTo[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Resolver resolves host names; *net.Resolver implements it. Tests plug a
// resolver that answers what they need (e.g. a name resolving to 127.0.0.1).
type Resolver = outbound.Resolver

// Options configure an [Executor]. Every field is optional.
type Options struct {
	// Policy is the API knowledge base and per-principal permissions; nil
	// allows every operation type and no API call.
	Policy *Policy
	// Vault resolves credentialRef headers; nil has no credentials.
	Vault *Vault
	// Limits; zero fields take [DefaultLimits].
	Limits Limits
	// Retry; the zero value takes [DefaultRetryPolicy]. Set MaxRetries to
	// -1 to disable retries.
	Retry RetryPolicy
	// Clock; nil is the wall clock.
	Clock Clock
	// Resolver for ApiCall host names; nil is net.DefaultResolver.
	Resolver Resolver
	// Cache; nil is a per-process [MemoryCache]. Use [NoCache] to disable.
	Cache Cache
	// Storage for StoreData; nil disables StoreData.
	Storage Storage
	// Limiter for ApiCall attempts; nil is a per-process
	// [WindowLimiter] with the spec's defaults (30/min, 500/h).
	Limiter CallLimiter
	// Logger; nil discards. Nothing logged holds a credential value.
	Logger *slog.Logger
	// DialTimeout for ApiCall connections (10 s).
	DialTimeout time.Duration
	// ContinueOnError makes a failed top-level operation not stop the
	// execution (spec §5: "Failed operations stop execution
	// (configurable)"): the next operations of operationOrder still run
	// (one reading a missing output fails in turn), the outcome is failed
	// with the first failure as its error and every failure in
	// error.details.failedOperations, and results hold what succeeded.
	// Timeouts, cancellation and limits still end the execution. Default
	// false: the first failure stops it.
	ContinueOnError bool
	// ValidateOnly makes an executor that validates for another one which
	// runs the workflows (`e2a serve`'s REST API, in front of the workflow
	// pool): Validate checks structure, references, data flow, types,
	// storage types (Storage's Kinds: give it the runner's, e.g.
	// [StorageKinds]) and the limits no policy sets per principal, and
	// leaves the operation types a policy permits, the API knowledge base,
	// credential access and the per-principal limits (maxOperations,
	// maxExecutionTime: the Waits' budget, the API calls) to the
	// executor that runs the workflow, which holds the policy and the
	// vault and refuses a workflow in the same error shape
	// (ValidationResult.Deferred lists these checks). Policy and Vault are
	// not consulted by Validate.
	ValidateOnly bool
}

// NoCache is a Cache that never stores anything.
type NoCache struct{}

// Get implements Cache.
func (NoCache) Get(context.Context, string) (any, bool, error) { return nil, false, nil }

// Set implements Cache.
func (NoCache) Set(context.Context, string, string, any, time.Duration) error { return nil }

// Invalidate implements Cache.
func (NoCache) Invalidate(context.Context, string) error { return nil }

// Executor validates and runs workflows. It is safe for concurrent use;
// each execution has its own data model.
type Executor struct {
	opts      Options
	limits    Limits
	retry     RetryPolicy
	clock     Clock
	cache     Cache
	limiter   CallLimiter
	log       *slog.Logger
	transport *http.Transport
}

// New returns an executor.
func New(opts Options) *Executor {
	e := &Executor{opts: opts, limits: opts.Limits.withDefaults(), retry: opts.Retry, clock: opts.Clock,
		cache: opts.Cache, limiter: opts.Limiter, log: opts.Logger}
	if e.retry.MaxRetries == 0 && e.retry.InitialDelay == 0 && e.retry.MaxDelay == 0 && e.retry.Multiplier == 0 && !e.retry.Jitter {
		e.retry = DefaultRetryPolicy()
	} else {
		if e.retry.InitialDelay == 0 {
			e.retry.InitialDelay = time.Second
		}
		if e.retry.MaxDelay == 0 {
			e.retry.MaxDelay = time.Minute
		}
		if e.retry.Multiplier == 0 {
			e.retry.Multiplier = 2
		}
	}
	if e.clock == nil {
		e.clock = RealClock{}
	}
	if e.cache == nil {
		e.cache = NewMemoryCache(e.clock)
	}
	if e.limiter == nil {
		e.limiter = NewWindowLimiter(0, 0, e.clock)
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.transport = e.newTransport()
	return e
}

// Limits returns the executor's limits.
func (e *Executor) Limits() Limits { return e.limits }

// Policy returns the executor's policy (may be nil).
func (e *Executor) Policy() *Policy { return e.opts.Policy }

// Vault returns the executor's vault (may be nil).
func (e *Executor) Vault() *Vault { return e.opts.Vault }

// Validate parses and fully checks a workflow for principal: structure,
// references, data-model dependencies, types, limits, operation
// permissions, the API knowledge base (hosts, methods and paths known
// before execution) and credential access; with Options.ValidateOnly, not
// the last three nor the limits a policy may set per principal, which the
// result lists as Deferred. It never executes anything.
func (e *Executor) Validate(principal, text string) (*Workflow, ValidationResult) {
	var rep report
	wf := parse(text, &rep)
	v := validator{wf: wf, rep: &rep, limits: e.limits, principal: principal, policy: e.policy(), vault: e.opts.Vault, storages: e.storageKinds()}
	if e.opts.ValidateOnly {
		// without the policy, the caller's maxOperations and
		// maxExecutionTime (which the Waits' and the calls' checks need)
		// are unknown: the runner's (CheckPrincipalLimits)
		v.policy, v.vault, v.deferLimits = nil, nil, true
	} else {
		v.calls, _ = e.limiter.(*WindowLimiter)
	}
	v.run()
	res := rep.result()
	if e.opts.ValidateOnly {
		res.Deferred = DeferredChecks()
	}
	return wf, res
}

// The checks a ValidateOnly executor leaves to the executor that runs the
// workflow (ValidationResult.Deferred).
const (
	// CheckOperationPermissions: the operation types the policy permits
	// the principal.
	CheckOperationPermissions = "operation_permissions"
	// CheckAPIKnowledgeBase: ApiCall's hosts, methods and paths against
	// the API knowledge base and the allowed hosts and networks.
	CheckAPIKnowledgeBase = "api_knowledge_base"
	// CheckCredentials: the credentialRefs the vault holds for the
	// principal and the API.
	CheckCredentials = "credentials"
	// CheckPrincipalLimits: the limits the policy may set per principal
	// (PrincipalPolicy: maxOperations, maxExecutionTime, against which
	// the Waits and the API calls a workflow is sure to make are held).
	CheckPrincipalLimits = "principal_limits"
)

// DeferredChecks lists the checks a ValidateOnly executor leaves to the
// executor that runs the workflow.
func DeferredChecks() []string {
	return []string{CheckOperationPermissions, CheckAPIKnowledgeBase, CheckCredentials, CheckPrincipalLimits}
}

func (e *Executor) policy() *Policy {
	if e.opts.Policy == nil {
		return &Policy{}
	}
	return e.opts.Policy
}

func (e *Executor) storageKinds() []string {
	if e.opts.Storage == nil {
		return []string{}
	}
	return e.opts.Storage.Kinds()
}

// Execution statuses.
const (
	StatusSuccess = "success"
	StatusFailed  = "failed"
	StatusRunning = "running"
	StatusPending = "pending"
)

// Outcome is the result of one execution: the body of the final
// e2a.complete frame and of /api/v1/workflows/execute.
type Outcome struct {
	// ExecutionID is the request id of the execution (the key of
	// /api/v1/executions/{id}); WorkflowExecutionID is the executionId of
	// beginExecution, which clients choose and need not be unique.
	ExecutionID         string         `json:"execution_id"`
	WorkflowExecutionID string         `json:"workflow_execution_id,omitempty"`
	Status              string         `json:"status"`
	Results             map[string]any `json:"results"`
	DurationMs          int64          `json:"duration_ms"`
	Error               *Error         `json:"error,omitempty"`
}

// Event phases.
const (
	PhaseStart = "start"
	PhaseEnd   = "end"
	PhaseRetry = "retry"
)

// Event reports an operation starting, ending, or an ApiCall attempt
// being retried. Events never hold credential values.
type Event struct {
	Phase       string `json:"phase"`
	OperationID string `json:"operationId"`
	Type        string `json:"type"`
	// Step counts operation runs in this execution (1-based); a start and
	// its end share it.
	Step int `json:"step"`
	// Parent is the Conditional or Loop running the operation; Iteration
	// its Loop index.
	Parent    string `json:"parent,omitempty"`
	Iteration *int   `json:"iteration,omitempty"`
	// End only.
	Status      string `json:"status,omitempty"`
	DurationMs  int64  `json:"duration_ms,omitempty"`
	Cached      bool   `json:"cached,omitempty"`
	OutputPath  string `json:"outputPath,omitempty"`
	Result      any    `json:"result,omitempty"`
	ResultBytes int    `json:"result_bytes,omitempty"`
	Error       *Error `json:"error,omitempty"`
	// Retry only.
	Attempt int   `json:"attempt,omitempty"`
	DelayMs int64 `json:"delay_ms,omitempty"`
}

// Observer receives events; an error stops the execution (e.g. the
// frame writer was fenced out).
type Observer interface {
	Event(ctx context.Context, ev Event) error
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, ev Event) error

// Event implements Observer.
func (f ObserverFunc) Event(ctx context.Context, ev Event) error { return f(ctx, ev) }

// execution is the state of one run.
type execution struct {
	e         *Executor
	wf        *Workflow
	principal string
	requestID string
	obs       Observer
	data      *Data
	results   map[string]any
	started   time.Time
	deadline  time.Time
	steps     int
	dataBytes int           // the outputs' JSON bytes so far (Limits.MaxDataBytes)
	waited    time.Duration // the Waits run so far (see timeout)
	red       *redactor
	obsErr    error
	mu        sync.Mutex
}

// errObserver wraps an observer failure so it is not reported as an
// operation failure.
type errObserver struct{ err error }

func (e errObserver) Error() string { return "observer: " + e.err.Error() }
func (e errObserver) Unwrap() error { return e.err }

// Execute runs a validated workflow for principal. requestID identifies
// the execution (sessionStorage scope, Outcome.ExecutionID). It returns
// the outcome; a non-nil error means the observer failed (the frames can
// no longer be written) and the outcome is partial.
func (e *Executor) Execute(ctx context.Context, principal, requestID string, wf *Workflow, obs Observer) (*Outcome, error) {
	maxT := e.opts.Policy.maxExecutionTime(principal, e.limits)
	x := &execution{e: e, wf: wf, principal: principal, requestID: requestID, obs: obs, data: NewData(),
		results: map[string]any{}, started: e.clock.Now(), red: &redactor{}}
	x.deadline = x.started.Add(maxT)
	ctx, cancel := context.WithTimeout(ctx, maxT)
	defer cancel()
	var err error
	if e.opts.ContinueOnError {
		err = x.runContinuing(ctx, wf.Order)
	} else {
		err = x.runList(ctx, wf.Order, "", nil)
	}
	out := &Outcome{ExecutionID: requestID, WorkflowExecutionID: wf.ExecutionID, Status: StatusSuccess,
		Results: x.results, DurationMs: e.clock.Now().Sub(x.started).Milliseconds()}
	if err != nil {
		var oe errObserver
		if errors.As(err, &oe) {
			out.Status = StatusFailed
			return out, oe.err
		}
		out.Status = StatusFailed
		out.Error = x.toError(ctx, err, maxT)
	}
	out.Results = x.red.value(capResults(out.Results, e.limits.MaxResultBytes)).(map[string]any)
	return out, nil
}

// toError turns any failure into the spec's error, redacted.
func (x *execution) toError(ctx context.Context, err error, maxT time.Duration) *Error {
	var we *Error
	if !errors.As(err, &we) {
		we = newError(ExecutionError, "%v", err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && we.Type != TimeoutError && we.Type != PermissionError && we.Type != DataError {
		we = x.timeout(we.OperationID, 0, "the execution exceeded maxExecutionTime (%v)", maxT)
		we.Suggestions = []string{"Split the workflow or reduce Wait durations and API timeouts"}
	}
	we.Message = x.red.text(we.Message)
	if we.Details != nil {
		we.Details = x.red.value(we.Details).(map[string]any)
	}
	return we
}

func (x *execution) emit(ctx context.Context, ev Event) error {
	if x.obs == nil {
		return nil
	}
	if err := x.obs.Event(ctx, ev); err != nil {
		return errObserver{err}
	}
	return nil
}

func (x *execution) runList(ctx context.Context, ids []string, parent string, iter *int) error {
	for _, id := range ids {
		if err := x.runOne(ctx, id, parent, iter); err != nil {
			return err
		}
	}
	return nil
}

// runContinuing runs the top-level operations past failures
// (Options.ContinueOnError); it returns the first failure, with every
// failed operation listed in its details.
func (x *execution) runContinuing(ctx context.Context, ids []string) error {
	var first *Error
	var failed []map[string]any
	for _, id := range ids {
		err := x.runOne(ctx, id, "", nil)
		if err == nil {
			continue
		}
		var we *Error
		var oe errObserver
		if errors.As(err, &oe) || errors.Is(ctx.Err(), context.Canceled) || !errors.As(err, &we) {
			return err
		}
		if first == nil {
			first = we
		}
		failed = append(failed, map[string]any{"operationId": we.OperationID, "type": we.Type, "message": we.Message})
		if we.limit || we.Type == TimeoutError || ctx.Err() != nil {
			// A limit or the execution's time, on the executor's clock or
			// the context's, ends the execution: it is the failure, the
			// earlier ones listed with it (a timeout, on either clock,
			// dropped them).
			return we.withDetail("failedOperations", failed)
		}
	}
	if first == nil {
		return nil
	}
	return first.withDetail("failedOperations", failed)
}

// remaining is the execution budget left on the executor's clock.
func (x *execution) remaining() time.Duration { return x.deadline.Sub(x.e.clock.Now()) }

func (x *execution) runOne(ctx context.Context, id, parent string, iter *int) error {
	op := x.wf.Operations[id]
	if op == nil || op.Type == "" {
		return &Error{Type: ValidationError, OperationID: id, Message: "operation is not defined"}
	}
	if err := ctx.Err(); err != nil {
		return x.ctxError(ctx, id)
	}
	if x.remaining() <= 0 {
		return x.timeout(id, 0, "the execution exceeded maxExecutionTime (%v)", x.deadline.Sub(x.started))
	}
	x.steps++
	if x.steps > x.e.limits.MaxSteps {
		return &Error{Type: ExecutionError, OperationID: id, Message: fmt.Sprintf("the execution ran more than %d operations (Loops included)", x.e.limits.MaxSteps), limit: true}
	}
	step := x.steps
	if err := x.emit(ctx, Event{Phase: PhaseStart, OperationID: id, Type: op.Type, Step: step, Parent: parent, Iteration: iter}); err != nil {
		return err
	}
	t0 := x.e.clock.Now()
	res, cached, err := x.run(ctx, op, step, iter)
	end := Event{Phase: PhaseEnd, OperationID: id, Type: op.Type, Step: step, Parent: parent, Iteration: iter,
		DurationMs: x.e.clock.Now().Sub(t0).Milliseconds(), Cached: cached}
	if err != nil {
		var oe errObserver
		if errors.As(err, &oe) {
			return err
		}
		we := x.toError(ctx, err, x.deadline.Sub(x.started))
		if we.OperationID == "" {
			we.OperationID = id
		}
		end.Status, end.Error = StatusFailed, we
		if eerr := x.emit(ctx, end); eerr != nil {
			return eerr
		}
		return we
	}
	res = x.red.value(res)
	if !depthAtMost(res, maxValueDepth) {
		we := &Error{Type: DataError, OperationID: id, Message: fmt.Sprintf("the output nests deeper than %d levels", maxValueDepth), limit: true}
		end.Status, end.Error = StatusFailed, we
		if eerr := x.emit(ctx, end); eerr != nil {
			return eerr
		}
		return we
	}
	room := x.e.limits.MaxDataBytes - x.dataBytes
	n, over := jsonSizeAtMost(res, room)
	if x.dataBytes += n; over {
		we := &Error{Type: DataError, OperationID: id, Message: fmt.Sprintf("the execution's outputs exceed %d bytes (this one: more than the %d left)", x.e.limits.MaxDataBytes, max(room, 0)), limit: true}
		end.Status, end.Error = StatusFailed, we
		if eerr := x.emit(ctx, end); eerr != nil {
			return eerr
		}
		return we
	}
	if p := op.writes(); !p.IsZero() && op.Type != OpLoop {
		if err := x.data.Set(p, res); err != nil {
			we := &Error{Type: DataError, OperationID: id, Message: err.Error()}
			end.Status, end.Error = StatusFailed, we
			if eerr := x.emit(ctx, end); eerr != nil {
				return eerr
			}
			return we
		}
		end.OutputPath = p.String()
	}
	x.results[id] = res
	end.Status = StatusSuccess
	if n <= x.e.limits.MaxFrameResultBytes {
		end.Result = res
	} else {
		end.ResultBytes = n
	}
	return x.emit(ctx, end)
}

func (x *execution) ctxError(ctx context.Context, id string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return x.timeout(id, 0, "the execution exceeded maxExecutionTime (%v)", x.deadline.Sub(x.started))
	}
	return ctx.Err()
}

// timeout is the TimeoutError of an execution out of maxExecutionTime,
// before a Wait of wait (0 for any other operation). Spec §10 lists
// "Timeout errors" among the retryable errors, and truthfully so when
// what took the time varies (an API's latency, a loaded worker): the next
// run may fit. Not when the workflow's own Waits, those run and this one,
// fill the budget alone: every run ends the same way.
func (x *execution) timeout(id string, wait time.Duration, format string, a ...any) *Error {
	e := newError(TimeoutError, format, a...)
	e.OperationID = id
	e.Retryable = x.waited+wait < x.deadline.Sub(x.started)
	return e
}

// get reads a path for an operation: a missing path is a DataError.
func (x *execution) get(p Path) (any, error) {
	v, ok := x.data.Get(p)
	if !ok {
		return nil, dataError("%s does not exist", p)
	}
	return v, nil
}

// references returns get for the references of one operation run (its
// url, headers, body, condition values, MergeData sources): the values it
// returns add up, counted once per reference, to at most MaxDataBytes,
// else a DataError. Each value lies in the data model, which MaxDataBytes
// bounds, but a workflow may reference one value thousands of times: the
// body, text or merge built from them was thousands of times the limit
// before any check (an OOM of the worker and every execution on it).
func (x *execution) references() func(Path) (any, error) {
	left := x.e.limits.MaxDataBytes
	return func(p Path) (any, error) {
		v, err := x.get(p)
		if err != nil {
			return nil, err
		}
		if left -= sizeAtMost(v, left); left < 0 {
			e := dataError("the values this operation references add up to more than %d bytes (MaxDataBytes), counting a value once per reference", x.e.limits.MaxDataBytes)
			e.Suggestions = []string{"Reference each value once, or a smaller part of it"}
			return nil, e
		}
		return v, nil
	}
}

func (x *execution) run(ctx context.Context, op *Operation, step int, iter *int) (any, bool, error) {
	switch op.Type {
	case OpApiCall:
		return x.apiCall(ctx, op, step, iter)
	case OpFilterData:
		in, err := x.get(op.FilterData.InputPath)
		if err != nil {
			return nil, false, err
		}
		conds := make([]Condition, len(op.FilterData.Conditions))
		refs := x.references()
		for i, c := range op.FilterData.Conditions {
			v, err := resolveValue(c.Value, refs)
			if err != nil {
				return nil, false, err
			}
			c.Value = v
			conds[i] = c
		}
		return x.cached(ctx, op, in, conds, func() (any, error) { return filterArray(ctx, in, conds) })
	case OpTransformData:
		in, err := x.get(op.TransformData.InputPath)
		if err != nil {
			return nil, false, err
		}
		td := op.TransformData
		return x.cached(ctx, op, in, nil, func() (any, error) {
			return transform(ctx, in, td.Transform, td.Config, x.e.limits.MaxDataBytes-x.dataBytes)
		})
	case OpMergeData:
		srcs := make([]any, len(op.MergeData.Sources))
		refs := x.references()
		for i, p := range op.MergeData.Sources {
			v, err := refs(p)
			if err != nil {
				return nil, false, err
			}
			srcs[i] = v
		}
		r, err := merge(ctx, op.MergeData.Strategy, srcs)
		return r, false, err
	case OpConditional:
		return x.conditional(ctx, op, iter)
	case OpLoop:
		return x.loop(ctx, op)
	case OpWait:
		d := op.Wait.Duration
		if d > x.remaining() {
			return nil, false, x.timeout("", d, "waiting %v would pass maxExecutionTime (%v left)", d, x.remaining().Round(time.Millisecond))
		}
		if err := x.e.clock.Sleep(ctx, d); err != nil {
			return nil, false, x.ctxError(ctx, op.ID)
		}
		x.waited += d
		return map[string]any{"waited_ms": numberValue(float64(d.Milliseconds()))}, false, nil
	case OpStoreData:
		return x.storeData(ctx, op)
	}
	return nil, false, newError(ValidationError, "unknown operation type %q", op.Type)
}

// cached runs compute through the cache for FilterData and TransformData:
// the key is the hash of the type, the principal, the configuration and
// the input. Without the principal another tenant running the same
// operation on the same input was served the first one's value, and its
// cached:true told it what the other had run within the TTL.
func (x *execution) cached(ctx context.Context, op *Operation, input any, conds []Condition, compute func() (any, error)) (any, bool, error) {
	ttl := CacheTTL[op.Type]
	if ttl <= 0 {
		r, err := compute()
		return r, false, err
	}
	var resolved []any
	for _, c := range conds {
		resolved = append(resolved, c.Value)
	}
	key := hashKey(op.Type, x.principal, op.Config, resolved, input)
	if v, ok, err := x.e.cache.Get(ctx, key); err == nil && ok {
		return v, true, nil
	}
	r, err := compute()
	if err != nil {
		return nil, false, err
	}
	if err := x.e.cache.Set(ctx, key, "op:"+op.Type, r, ttl); err != nil {
		x.e.log.Warn("workflow: cache set failed", "type", op.Type, "err", err)
	}
	return r, false, nil
}

func (x *execution) conditional(ctx context.Context, op *Operation, iter *int) (any, bool, error) {
	c := op.Conditional.Condition
	v, _ := x.data.Get(c.Path) // a missing path reads as null
	operand, err := resolveValue(c.Value, x.references())
	if err != nil {
		return nil, false, err
	}
	ok := evalOperator(v, c.Operator, operand)
	branch, ids := "ifTrue", op.Conditional.IfTrue
	if !ok {
		branch, ids = "ifFalse", op.Conditional.IfFalse
	}
	if err := x.runList(ctx, ids, op.ID, iter); err != nil {
		return nil, false, err
	}
	exec := make([]any, len(ids))
	for i, id := range ids {
		exec[i] = id
	}
	return map[string]any{"condition": ok, "branch": branch, "executed": exec}, false, nil
}

func (x *execution) loop(ctx context.Context, op *Operation) (any, bool, error) {
	in, err := x.get(op.Loop.InputPath)
	if err != nil {
		return nil, false, err
	}
	arr, ok := in.([]any)
	if !ok {
		return nil, false, dataError("Loop needs an array at %s, got %s", op.Loop.InputPath, typeName(in))
	}
	if len(arr) > x.e.limits.MaxLoopIterations {
		return nil, false, &Error{Type: ExecutionError, Message: fmt.Sprintf("Loop over %d elements; at most %d are allowed", len(arr), x.e.limits.MaxLoopIterations), limit: true}
	}
	// Each iteration runs each of its operations at least once: a Loop
	// sure to pass MaxSteps is refused before its first, as one past
	// MaxLoopIterations is, not after most of its side effects.
	if at := x.steps + len(arr)*len(op.Loop.Operations); at > x.e.limits.MaxSteps {
		return nil, false, &Error{Type: ExecutionError, Message: fmt.Sprintf("Loop over %d elements of %d operations: the execution would run more than %d operations (Loops included)",
			len(arr), len(op.Loop.Operations), x.e.limits.MaxSteps), limit: true}
	}
	saved, hadSaved := x.data.root[LoopVar]
	defer func() {
		if hadSaved {
			x.data.root[LoopVar] = saved
		} else {
			delete(x.data.root, LoopVar)
		}
	}()
	out := make([]any, 0, len(arr))
	last := op.Loop.Operations[len(op.Loop.Operations)-1]
	for i, el := range arr {
		x.data.root[LoopVar] = map[string]any{"item": el, "index": numberValue(float64(i))}
		idx := i
		if err := x.runList(ctx, op.Loop.Operations, op.ID, &idx); err != nil {
			return nil, false, err
		}
		out = append(out, x.results[last])
	}
	if !op.Loop.OutputPath.IsZero() {
		if err := x.data.Set(op.Loop.OutputPath, out); err != nil {
			return nil, false, dataError("%v", err)
		}
	}
	return out, false, nil
}

func (x *execution) storeData(ctx context.Context, op *Operation) (any, bool, error) {
	st := op.StoreData
	v, err := x.get(st.InputPath)
	if err != nil {
		return nil, false, err
	}
	if x.e.opts.Storage == nil || !in(x.e.opts.Storage.Kinds(), st.Storage) {
		return nil, false, permissionError("storage %s is not enabled on this server", st.Storage)
	}
	b, err := encodeStored(x.red.value(v))
	if err != nil {
		return nil, false, dataError("value at %s does not encode: %v", st.InputPath, err)
	}
	if len(b) > x.e.limits.MaxStoreBytes {
		return nil, false, dataError("value at %s is %d bytes; StoreData takes at most %d", st.InputPath, len(b), x.e.limits.MaxStoreBytes)
	}
	loc, err := x.e.opts.Storage.Store(ctx, StoreScope{Principal: x.principal, RequestID: x.requestID}, st.Storage, st.Key, b)
	if err != nil {
		return nil, false, err
	}
	return map[string]any{"storage": st.Storage, "key": st.Key, "location": loc, "bytes": numberValue(float64(len(b)))}, false, nil
}

// capResults replaces the largest results by a summary until the whole
// fits in max bytes.
func capResults(res map[string]any, max int) map[string]any {
	if max <= 0 {
		return res
	}
	sizes := map[string]int{}
	total := 2
	for k, v := range res {
		sizes[k] = jsonSize(v) + len(k) + 4
		total += sizes[k]
	}
	if total <= max {
		return res
	}
	keys := make([]string, 0, len(res))
	for k := range res {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return sizes[keys[i]] > sizes[keys[j]] })
	out := make(map[string]any, len(res))
	for k, v := range res {
		out[k] = v
	}
	for _, k := range keys {
		if total <= max {
			break
		}
		total -= sizes[k]
		out[k] = map[string]any{"truncated": true, "bytes": numberValue(float64(sizes[k]))}
		total += 40
	}
	return out
}

// marshal is json.Marshal for values of the data model.
func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
