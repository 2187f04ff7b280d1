package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// Pool is the agent pool the executor serves; Method the envelope method
// of a workflow execution, the only one it runs (Serve).
const (
	Pool   = normalizer.WorkflowPool
	Method = normalizer.MethodWorkflowExecute
)

// Params keys of a workflow envelope.
const (
	// ParamWorkflow holds the JSONL text (or an array of message objects).
	ParamWorkflow = "workflow"
)

// Anonymous is the principal of a request that names none.
const Anonymous = "anonymous"

// PrincipalOf returns the principal an envelope runs as: user_id, else
// source_agent_id, else [Anonymous]. The ingress sets user_id from the
// authenticated caller.
func PrincipalOf(env *e2a.Envelope) string {
	switch {
	case env.UserID != "":
		return env.UserID
	case env.SourceAgentID != "":
		return env.SourceAgentID
	}
	return Anonymous
}

// WorkflowText returns the workflow of an envelope: params.workflow as
// JSONL text, or as an array of message objects (re-encoded one a line,
// without HTML escaping). Its length is what the worker holds against
// MaxWorkflowBytes, and the doors with it before they publish.
func WorkflowText(env *e2a.Envelope) (string, error) {
	v, ok := env.Params[ParamWorkflow]
	if !ok {
		return "", fmt.Errorf("params.%s is missing", ParamWorkflow)
	}
	switch t := v.(type) {
	case string:
		return t, nil
	case []any:
		// One compact line per message, as sent: no HTML escaping (a
		// '<' stays one byte; U+2028 and U+2029 are always escaped).
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		for _, m := range t {
			if err := enc.Encode(m); err != nil { // (and its newline)
				return "", fmt.Errorf("params.%s: %v", ParamWorkflow, err)
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("params.%s must be JSONL text or an array of messages", ParamWorkflow)
}

var _ agent.Handler = (*Executor)(nil)

// Resumable reports false: a redelivered execution that already wrote
// frames is closed by the runtime with agent_interrupted (retryable),
// because its ApiCalls may have had effects that must not be repeated
// blindly.
func (e *Executor) Resumable() bool { return false }

// Serve runs the workflow of env as an agent.Handler of pool "workflow".
//
// Frames: first the plan, an e2a.chunk with delta_kind "custom" {kind:
// "status", data: {event: "a2e.execution", execution_id,
// workflow_execution_id, status: "running", operations: [{operationId,
// type, status: "pending"}, …]}} (operationOrder; A2E renders it as an
// invoke/event of kind status); then for each operation run, an e2a.chunk with delta_kind "tool" and
// a function_call delta when it starts (id "<operationId>#<step>", name the
// operation type, args {operationId, parent, iteration, config}) and a
// function_response delta when it ends (response {operationId, status,
// duration_ms, cached, outputPath, result | result_bytes, error}); a
// retried ApiCall attempt adds a "custom" chunk {kind: "status", event:
// "a2e.retry", operationId, step, attempt, delay_ms, error} (A2E: an
// invoke/event of kind status).
// An ApiCall or StoreData starts only once the frames before it, its
// function_call included, are stored (agent.Writer.Sync; the runtime's Chunk of a
// tool delta already waits for its store, so this costs no extra round
// trip today, and one per such operation at most): a worker dying during
// the call leaves them behind, and the redelivery ends with
// agent_interrupted rather than making the call again.
// The final frame is e2a.complete with result {execution_id,
// workflow_execution_id, status, results, duration_ms}, or e2a.error with
// code validation_error, permission_error, execution_error, timeout_error
// or data_error, retryable set for transient failures, and details
// {error: {type, message, operationId, details, suggestions}, execution_id,
// status, results, duration_ms} (and validation {valid, errors, warnings}
// for an invalid workflow).
//
// An envelope of another method than [Method] (a message sent to the pool
// with ?agent=workflow: its workflow string was never stripped of its
// secrets by the normalizer) is refused with validation_error, not
// retryable, and nothing runs.
func (e *Executor) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	if env.Method != Method {
		m := env.Method
		if len(m) > 64 { // a client's value: never echoed whole
			m = m[:64] + "…"
		}
		we := &Error{Type: ValidationError, Message: fmt.Sprintf("the workflow pool runs %s only (method %q)", Method, m),
			Suggestions: []string{`Send {"method": "` + Method + `", "params": {"workflow": "<JSONL>"}}`}}
		return failure(we, env.RequestID, "", nil, 0, nil)
	}
	principal := PrincipalOf(env)
	text, err := WorkflowText(env)
	if err != nil {
		we := &Error{Type: ValidationError, Message: err.Error(), Suggestions: []string{`Send {"workflow": "<JSONL>"}`}}
		return failure(we, env.RequestID, "", nil, 0, nil)
	}
	wf, res := e.Validate(principal, text)
	if !res.Valid {
		we := validationError(res)
		return failure(we, env.RequestID, wf.ExecutionID, nil, 0, &res)
	}
	obs := &frameObserver{w: w, wf: wf, max: e.limits.MaxFrameResultBytes, maxPlan: e.limits.MaxResultBytes}
	if err := obs.begin(env.RequestID); err != nil {
		return err // the writer failed (fenced, closed): the runtime settles
	}
	out, err := e.Execute(ctx, principal, env.RequestID, wf, obs)
	if err != nil {
		return err // the writer failed (fenced, closed): the runtime settles
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if out.Error != nil {
		return failure(out.Error, out.ExecutionID, out.WorkflowExecutionID, out.Results, out.DurationMs, nil)
	}
	return w.Complete(out)
}

// validationError summarizes a validation result as the spec's error.
func validationError(res ValidationResult) *Error {
	typ := ValidationError
	for _, is := range res.Errors {
		if is.Code == CodePermission {
			typ = PermissionError
			break
		}
	}
	msg := "the workflow is invalid"
	if len(res.Errors) > 0 {
		msg = res.Errors[0].Message
		if len(res.Errors) > 1 {
			msg += fmt.Sprintf(" (and %d more errors)", len(res.Errors)-1)
		}
	}
	we := &Error{Type: typ, Message: msg, Details: map[string]any{"errors": res.Errors, "warnings": res.Warnings}}
	if len(res.Errors) > 0 {
		we.OperationID = res.Errors[0].OperationID
	}
	we.Suggestions = []string{"Validate with POST /api/v1/workflows/validate and fix every error listed"}
	if typ == PermissionError {
		we.Suggestions = append(we.Suggestions, "Query /api/v1/capabilities for the operations, APIs and credentials this agent may use")
	}
	return we
}

func failure(we *Error, execID, wfExecID string, results map[string]any, ms int64, val *ValidationResult) error {
	if results == nil {
		results = map[string]any{}
	}
	d := map[string]any{"error": we, "execution_id": execID, "status": StatusFailed, "results": results, "duration_ms": ms}
	if wfExecID != "" {
		d["workflow_execution_id"] = wfExecID
	}
	if val != nil {
		d["validation"] = val
	}
	// encode through JSON so the frame holds plain values
	var details map[string]any
	_ = json.Unmarshal(marshal(d), &details)
	return &agent.Error{Code: we.Code(), Message: we.Message, Retryable: we.Retryable, Details: details}
}

// EventExecution names the first frame of an execution (Executor.Serve):
// a custom chunk {kind: "status", data: executionPlan}, which A2E renders
// as an invoke/event of kind status.
const EventExecution = "a2e.execution"

// executionPlan is the data of the EventExecution frame: the ids of the
// execution and its operationOrder, every operation pending.
type executionPlan struct {
	Event               string            `json:"event"`
	ExecutionID         string            `json:"execution_id"`
	WorkflowExecutionID string            `json:"workflow_execution_id,omitempty"`
	Status              string            `json:"status"`
	Operations          []OperationStatus `json:"operations"`
}

// operationResult is the response of a function_response frame.
type operationResult struct {
	OperationID string          `json:"operationId"`
	Status      string          `json:"status"`
	DurationMs  int64           `json:"duration_ms"`
	Cached      bool            `json:"cached"`
	Result      json.RawMessage `json:"result"`
	Error       json.RawMessage `json:"error"`
}

// planOf is the plan of execution requestID of wf: its operationOrder,
// pending.
func planOf(requestID string, wf *Workflow) executionPlan {
	p := executionPlan{Event: EventExecution, ExecutionID: requestID, WorkflowExecutionID: wf.ExecutionID, Status: StatusRunning,
		Operations: make([]OperationStatus, 0, len(wf.Order))}
	for _, id := range wf.Order {
		o := OperationStatus{OperationID: id, Status: StatusPending}
		if op := wf.Operations[id]; op != nil {
			o.Type = op.Type
		}
		p.Operations = append(p.Operations, o)
	}
	return p
}

// leavesProcess reports whether an operation of type typ acts outside the
// executor (an HTTP request, a stored value): its start frame is stored
// before it runs (agent.Writer.Sync).
func leavesProcess(typ string) bool { return typ == OpApiCall || typ == OpStoreData }

// frameObserver writes an execution's events as frames.
type frameObserver struct {
	w       agent.Writer
	wf      *Workflow
	max     int
	maxPlan int // bound of the plan's operations list (Limits.MaxResultBytes), as of a final frame's results
}

// begin writes the execution's first frame, its plan: what a status read
// while it runs (statusFromFrames) shows of the operations not started
// and of the client's executionId. Written with Write, which returns once
// the frame is queued (a Chunk waits for its store): no round trip of its
// own; the first operation's function_call, which is waited for, stores it.
// An operationOrder whose list would pass maxPlan bytes (an id listed
// thousands of times) is left out: the frame must fit in one message.
func (o *frameObserver) begin(requestID string) error {
	p := planOf(requestID, o.wf)
	n := 0
	for _, op := range p.Operations {
		// ids and types need no escaping; 64 bytes of names and punctuation
		if n += len(op.OperationID) + len(op.Type) + 64; n > o.maxPlan {
			p.Operations = []OperationStatus{}
			break
		}
	}
	return o.w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaCustom,
		Delta: map[string]any{"kind": "status", "data": p}}, false)
}

func (o *frameObserver) Event(_ context.Context, ev Event) error {
	id := fmt.Sprintf("%s#%d", ev.OperationID, ev.Step)
	switch ev.Phase {
	case PhaseStart:
		args := map[string]any{"operationId": ev.OperationID}
		if ev.Parent != "" {
			args["parent"] = ev.Parent
		}
		if ev.Iteration != nil {
			args["iteration"] = *ev.Iteration
		}
		if op := o.wf.Operations[ev.OperationID]; op != nil && jsonSize(op.Config) <= o.max {
			args["config"] = op.Config
		}
		if err := o.w.Chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: id, Name: ev.Type, Args: args}); err != nil {
			return err
		}
		if leavesProcess(ev.Type) {
			// The frames announcing the operation are stored before it acts:
			// a worker dying during the call leaves them, so the redelivery
			// ends with agent_interrupted instead of calling again.
			return o.w.Sync()
		}
		return nil
	case PhaseEnd:
		resp := map[string]any{"operationId": ev.OperationID, "status": ev.Status, "duration_ms": ev.DurationMs}
		if ev.Cached {
			resp["cached"] = true
		}
		if ev.OutputPath != "" {
			resp["outputPath"] = ev.OutputPath
		}
		if ev.Result != nil {
			resp["result"] = ev.Result
		}
		if ev.ResultBytes > 0 {
			resp["result_bytes"] = ev.ResultBytes
		}
		if ev.Error != nil {
			resp["error"] = ev.Error
		}
		return o.w.Chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionResponse, ID: id, Name: ev.Type, Response: resp})
	case PhaseRetry:
		// kind status: a notice, as the plan is (A2E renders a custom
		// chunk without a kind as an artifact)
		return o.w.Chunk(e2a.DeltaCustom, map[string]any{"kind": "status", "event": "a2e.retry", "operationId": ev.OperationID, "step": ev.Step,
			"attempt": ev.Attempt, "delay_ms": ev.DelayMs, "error": ev.Error})
	}
	return nil
}
