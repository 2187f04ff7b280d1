package workflow

import (
	"fmt"
	"time"
)

// Operation type names: the catalog of spec §4.
const (
	OpApiCall       = "ApiCall"
	OpFilterData    = "FilterData"
	OpTransformData = "TransformData"
	OpConditional   = "Conditional"
	OpLoop          = "Loop"
	OpStoreData     = "StoreData"
	OpWait          = "Wait"
	OpMergeData     = "MergeData"
)

// Catalog lists every operation type the executor implements.
var Catalog = []string{OpApiCall, OpFilterData, OpTransformData, OpConditional, OpLoop, OpStoreData, OpWait, OpMergeData}

// Message types of the JSONL stream.
const (
	MsgOperationUpdate = "operationUpdate"
	MsgBeginExecution  = "beginExecution"
)

// Filter and condition operators.
var Operators = []string{"==", "!=", ">", "<", ">=", "<=", "in", "contains", "startsWith", "endsWith"}

// Transform types.
var Transforms = []string{"map", "sort", "group", "aggregate", "select"}

// Merge strategies.
var MergeStrategies = []string{"concat", "union", "intersect", "deepMerge"}

// Storage types of StoreData.
const (
	StorageLocal   = "localStorage"
	StorageSession = "sessionStorage"
	StorageFile    = "file"
)

// Aggregate functions of TransformData aggregate.
var AggregateFuncs = []string{"count", "sum", "avg", "min", "max"}

// MapFuncs are the functions TransformData map may apply to a value.
var MapFuncs = []string{"toUpperCase", "toLowerCase", "trim", "length", "toString", "toNumber", "round", "floor", "ceil", "abs", "not"}

// HTTP methods ApiCall accepts.
var Methods = []string{"GET", "POST", "PUT", "DELETE", "PATCH"}

// Workflow is a parsed JSONL workflow.
type Workflow struct {
	// Operations by operationId; a later operationUpdate replaces an earlier one.
	Operations map[string]*Operation
	// Defined lists operation ids in the order they were first defined.
	Defined []string
	// ExecutionID and Order come from beginExecution.
	ExecutionID string
	Order       []string
	// BeginLine is the line of beginExecution (0 when missing).
	BeginLine int
	// Lines is the number of lines read.
	Lines int
}

// Operation is one operation of a workflow. Exactly one of the typed
// fields is set, matching Type.
type Operation struct {
	ID   string
	Type string
	Line int
	// Config is the operation's object as written (numbers as json.Number).
	Config map[string]any

	ApiCall       *ApiCall
	FilterData    *FilterData
	TransformData *TransformData
	Conditional   *Conditional
	Loop          *Loop
	StoreData     *StoreData
	Wait          *Wait
	MergeData     *MergeData
}

// ApiCall is an HTTP request (spec §4.1).
type ApiCall struct {
	Method  string
	URL     template
	Headers map[string]HeaderValue
	// Body is the request body with {/workflow/...} references left in
	// place; HasBody tells an explicit null from no body.
	Body       any
	HasBody    bool
	OutputPath Path
	Timeout    time.Duration // 0: the executor's default (30 s)
}

// HeaderValue is a header: a literal (which may hold references) or a
// credential reference resolved by the vault inside the worker. Prefix is
// written before the credential's value (e.g. "Bearer "), an extension.
type HeaderValue struct {
	Value        template
	CredentialID string
	Prefix       string
}

// Condition is one FilterData condition (field relative to the element) or
// the condition of a Conditional (Path absolute).
type Condition struct {
	Field    string
	field    []segment
	Path     Path
	Operator string
	// Value is the literal to compare with; a string that is exactly a
	// reference ("{/workflow/x}") is replaced by the value at that path.
	Value any
}

// FilterData keeps the array elements matching every condition.
type FilterData struct {
	InputPath  Path
	Conditions []Condition
	OutputPath Path
}

// TransformData applies one transform.
type TransformData struct {
	InputPath  Path
	Transform  string
	Config     map[string]any
	OutputPath Path
}

// Conditional runs IfTrue or IfFalse.
type Conditional struct {
	Condition Condition
	IfTrue    []string
	IfFalse   []string
}

// Loop runs Operations once per element of InputPath.
type Loop struct {
	InputPath  Path
	Operations []string
	OutputPath Path // zero when absent
}

// StoreData stores the value at InputPath.
type StoreData struct {
	InputPath Path
	Storage   string
	Key       string
}

// Wait pauses the execution.
type Wait struct {
	Duration time.Duration
}

// MergeData merges several values.
type MergeData struct {
	Sources    []Path
	Strategy   string
	OutputPath Path
}

// Issue is one validation error or warning. Line is the 1-based line of
// the JSONL message (the element's position for a JSON array), OperationID
// the operation concerned (when any), Field the property inside the message
// in dotted form (e.g. operation.FilterData.conditions[0].operator).
type Issue struct {
	Line        int    `json:"line"`
	OperationID string `json:"operationId,omitempty"`
	Field       string `json:"field,omitempty"`
	Code        string `json:"code"`
	Message     string `json:"message"`
}

// Issue codes.
const (
	CodeInvalidJSON        = "invalid_json"
	CodeInvalidMessage     = "invalid_message"
	CodeUnknownMessageType = "unknown_message_type"
	CodeInvalidID          = "invalid_id"
	CodeUnknownOperation   = "unknown_operation"
	CodeMissingField       = "missing_field"
	CodeInvalidField       = "invalid_field"
	CodeUnknownField       = "unknown_field"
	CodeRedefined          = "operation_redefined"
	CodeMissingBegin       = "missing_begin_execution"
	CodeAfterBegin         = "message_after_begin_execution"
	CodeUndefinedReference = "undefined_operation"
	CodeCycle              = "cycle"
	CodeUnresolvedPath     = "unresolved_path"
	CodeMaybeUnresolved    = "path_may_be_unset"
	CodeTypeMismatch       = "type_mismatch"
	CodePermission         = "permission_denied"
	CodeLimit              = "limit_exceeded"
	CodeUnused             = "unused_operation"
	CodeTooLarge           = "too_large"
	CodeLiteralSecret      = "literal_secret"
)

// ValidationResult is the answer of /api/v1/workflows/validate.
type ValidationResult struct {
	Valid    bool    `json:"valid"`
	Errors   []Issue `json:"errors"`
	Warnings []Issue `json:"warnings"`
	// Deferred lists the checks this server did not make because another
	// executor runs the workflow and makes them (Options.ValidateOnly:
	// CheckOperationPermissions, CheckAPIKnowledgeBase, CheckCredentials);
	// absent when every check was made.
	Deferred []string `json:"deferred,omitempty"`
}

// maxIssues is how many errors, and how many warnings, a report lists: a
// workflow of a million bytes can hold a hundred thousand mistakes, and
// the answer would be thirty times its size. The rest are counted, in a
// last issue of their list.
const maxIssues = 100

type report struct {
	errs, warns       []Issue
	nErrs             int // errors found, listed or not
	moreErr, moreWarn int // found past maxIssues, not listed
	seen              map[string]bool
}

func issueText(line int, opID, field, msg string) string {
	s := fmt.Sprintf("line %d", line)
	if opID != "" {
		s += fmt.Sprintf(", operation %q", opID)
	}
	if field != "" {
		s += ": " + field
	}
	return s + ": " + msg
}

func (r *report) add(warn bool, line int, opID, field, code, format string, a ...any) {
	is := Issue{Line: line, OperationID: opID, Field: field, Code: code,
		Message: issueText(line, opID, field, fmt.Sprintf(format, a...))}
	k := fmt.Sprint(warn, is)
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if r.seen[k] {
		return
	}
	r.seen[k] = true
	switch {
	case warn && len(r.warns) < maxIssues:
		r.warns = append(r.warns, is)
	case warn:
		r.moreWarn++
	case len(r.errs) < maxIssues:
		r.errs = append(r.errs, is)
		r.nErrs++
	default:
		r.moreErr++
		r.nErrs++
	}
}

func (r *report) errorf(line int, opID, field, code, format string, a ...any) {
	r.add(false, line, opID, field, code, format, a...)
}

func (r *report) warnf(line int, opID, field, code, format string, a ...any) {
	r.add(true, line, opID, field, code, format, a...)
}

func (r *report) result() ValidationResult {
	more := func(list []Issue, n int, what string) []Issue {
		if n == 0 {
			return list
		}
		return append(list, Issue{Code: CodeLimit, Message: fmt.Sprintf("%d more %s not listed (the first %d are)", n, what, maxIssues)})
	}
	res := ValidationResult{Valid: r.nErrs == 0, Errors: more(r.errs, r.moreErr, "errors"), Warnings: more(r.warns, r.moreWarn, "warnings")}
	if res.Errors == nil {
		res.Errors = []Issue{}
	}
	if res.Warnings == nil {
		res.Warnings = []Issue{}
	}
	return res
}

func in(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
