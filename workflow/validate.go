package workflow

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Validate parses and checks a workflow without a policy: structure,
// references between operations, cycles, data-model dependencies, types
// and the default limits. Permissions are checked by [Executor.Validate].
func Validate(text string) ValidationResult {
	var rep report
	wf := parse(text, &rep)
	v := validator{wf: wf, rep: &rep, limits: DefaultLimits()}
	v.run()
	return rep.result()
}

// validator holds the semantic checks of one workflow.
type validator struct {
	wf        *Workflow
	rep       *report
	limits    Limits
	principal string
	policy    *Policy // nil: permissions are not checked
	vault     *Vault
	storages  []string // storage types available; nil: not checked
	// calls is the executor's API-call limiter when it is a WindowLimiter
	// (its limits known): nil, not checked.
	calls *WindowLimiter
	// deferLimits: maxOperations and maxExecutionTime (the Waits' budget),
	// which the policy may set per principal, are not checked (a
	// validate-only executor, which has no policy: CheckPrincipalLimits).
	deferLimits bool
	reached     map[string]bool
	checked     map[string]bool
	// visits counts the operations walk checked; past maxWalk the walk
	// stops with a limit error: Conditionals and Loops that list the same
	// operations many times expand exponentially.
	visits   int
	overWalk bool
}

// maxWalk bounds the operation visits of a validation: ten times the runs
// an execution may make (Limits.MaxSteps), as a walk checks both branches
// of every Conditional.
func (v *validator) maxWalk() int { return 10 * max(v.limits.MaxSteps, 100) }

// known data-model types for light type checking.
const (
	tArray  = "array"
	tObject = "object"
)

type written struct {
	path  Path
	sure  bool
	typ   string // "" unknown
	owner string
}

type scope struct {
	w      []written
	inLoop bool
	// opaque: an operation whose definition was refused (no type) ran
	// before: what it would have written is unknown, so a read no other
	// operation writes is a follow-on of that error, not one of its own.
	opaque bool
}

func (s *scope) clone() *scope {
	return &scope{w: append([]written(nil), s.w...), inLoop: s.inLoop, opaque: s.opaque}
}

// find returns how p is known: sure, only maybe, or not at all, and the
// known type when p was written exactly.
func (s *scope) find(p Path) (sure, maybe bool, typ string) {
	canon := p.canonical()
	for i := len(s.w) - 1; i >= 0; i-- {
		w := s.w[i]
		if !w.path.overlaps(p) {
			continue
		}
		if w.sure {
			if typ == "" && w.path.canonical() == canon {
				typ = w.typ
			}
			return true, true, typ
		}
		maybe = true
	}
	return false, maybe, ""
}

func (v *validator) run() {
	if v.reached == nil {
		v.reached = map[string]bool{}
		v.checked = map[string]bool{}
	}
	wf := v.wf
	// limits
	maxOps := v.limits.MaxOperations
	if pp, ok := v.policy.principal(v.principal); ok && pp.MaxOperations > 0 {
		maxOps = pp.MaxOperations
	}
	if !v.deferLimits && maxOps > 0 && len(wf.Defined) > maxOps {
		id := wf.Defined[maxOps]
		v.rep.errorf(wf.Operations[id].Line, id, "", CodeLimit, "the workflow defines %d operations; at most %d are allowed", len(wf.Defined), maxOps)
	}
	for _, id := range wf.Defined {
		v.checkOperation(wf.Operations[id])
	}
	if len(wf.Order) > 0 {
		v.walk(wf.Order, &scope{}, nil, wf.BeginLine, "")
	}
	// static step budget: each listing runs at least once
	if runs := v.least(wf.Order, runWeight, int64(v.limits.MaxSteps)); v.limits.MaxSteps > 0 && runs > int64(v.limits.MaxSteps) {
		v.rep.errorf(wf.BeginLine, "", "operationOrder", CodeLimit, "an execution would run at least %d operations, more than the %d it may run "+
			"(each listing in operationOrder runs, with a Conditional's shorter branch; a Loop may run none)", runs, v.limits.MaxSteps)
	} else if v.calls != nil {
		v.checkCalls()
	}
	// static wait budget: the Waits an execution runs at least. As long as
	// the budget fails too: the clock has moved when the last Wait starts,
	// and the executor refuses a Wait longer than what is left.
	maxT := v.maxExecutionTime()
	if waited := time.Duration(v.least(wf.Order, waitWeight, int64(maxT))); !v.deferLimits && maxT > 0 && waited >= maxT {
		v.rep.errorf(wf.BeginLine, "", "operationOrder", CodeLimit, "the Wait operations add up to %v, at least maxExecutionTime %v: the execution would always time out "+
			"(each Wait listed in operationOrder, with a Conditional's shorter branch; a Loop's may run none)", waited, maxT)
	}
	for _, id := range wf.Defined {
		if !v.reached[id] && wf.BeginLine != 0 {
			op := wf.Operations[id]
			v.rep.warnf(op.Line, id, "", CodeUnused, "operation is defined but never runs (not in operationOrder, ifTrue, ifFalse or a Loop)")
		}
	}
}

// least is the least an execution of ids adds up of weight: each listing
// counts (an id listed twice counts twice), a Conditional with its shorter
// branch, a Loop alone (it may run over no element). It stops adding past
// limit (the sums of the Conditionals' branches grow exponentially), and
// counts an operation that runs itself again (a cycle, refused by walk)
// alone.
func (v *validator) least(ids []string, weight func(*Operation) int64, limit int64) int64 {
	return v.leastOf(ids, weight, limit, map[string]int64{})
}

// leastOf is least with memo, each operation's sum, -1 while it is added.
func (v *validator) leastOf(ids []string, weight func(*Operation) int64, limit int64, memo map[string]int64) int64 {
	var n int64
	for _, id := range ids {
		if n > limit {
			break
		}
		op := v.wf.Operations[id]
		if op == nil || op.Type == "" {
			continue // refused elsewhere; runs nothing
		}
		sum, ok := memo[id]
		switch {
		case ok && sum < 0: // a cycle
			sum = weight(op)
		case ok:
		default:
			memo[id] = -1
			sum = weight(op)
			if c := op.Conditional; op.Type == OpConditional && c != nil {
				sum += min(v.leastOf(c.IfTrue, weight, limit, memo), v.leastOf(c.IfFalse, weight, limit, memo))
			}
			memo[id] = sum
		}
		n += sum
	}
	return n
}

// Weights of least: one per operation run, one per ApiCall, a Wait's
// duration.
func runWeight(*Operation) int64 { return 1 }

func callWeight(op *Operation) int64 {
	if op.Type == OpApiCall {
		return 1
	}
	return 0
}

func waitWeight(op *Operation) int64 {
	if op.Type == OpWait && op.Wait != nil {
		return int64(op.Wait.Duration)
	}
	return 0
}

// checkCalls refuses a workflow whose ApiCalls the API-call limiter (the
// executor's [WindowLimiter], sliding windows) is sure to refuse: more
// calls at least than PerMinute when maxExecutionTime fits in a minute, or
// than PerHour when it fits in an hour (all its calls then fall in one
// window; a longer budget lets Waits spread them). Such an execution made
// the calls the limit let through, then failed, retryable, every time.
func (v *validator) checkCalls() {
	calls := v.least(v.wf.Order, callWeight, int64(max(v.calls.PerHour, v.calls.PerMinute)))
	var limit int
	var window string
	switch maxT := v.maxExecutionTime(); {
	case v.calls.PerHour > 0 && calls > int64(v.calls.PerHour) && maxT > 0 && maxT <= time.Hour:
		limit, window = v.calls.PerHour, fmt.Sprintf("per hour (E2A_WORKFLOW_API_CALLS_PER_HOUR), and maxExecutionTime %v fits in an hour", maxT)
	case v.calls.PerMinute > 0 && calls > int64(v.calls.PerMinute) && maxT > 0 && maxT <= time.Minute:
		limit, window = v.calls.PerMinute, fmt.Sprintf("per minute (E2A_WORKFLOW_API_CALLS_PER_MINUTE), and maxExecutionTime %v fits in a minute", maxT)
	default:
		return
	}
	v.rep.errorf(v.wf.BeginLine, "", "operationOrder", CodeLimit, "an execution would make at least %d API calls "+
		"(each ApiCall listed in operationOrder, with a Conditional's shorter branch; a Loop's may make none); an agent may make %d %s", calls, limit, window)
}

func (v *validator) maxExecutionTime() time.Duration {
	return v.policy.maxExecutionTime(v.principal, v.limits)
}

// checkOperation runs the checks that do not depend on the data flow:
// permissions, credentials, storage types, timeouts.
func (v *validator) checkOperation(op *Operation) {
	if op.Type == "" {
		return
	}
	if v.policy != nil && !v.policy.allowedOperation(v.principal, op.Type) {
		v.rep.errorf(op.Line, op.ID, "operation", CodePermission, "operation type %s is not permitted for this agent", op.Type)
	}
	switch op.Type {
	case OpApiCall:
		a := op.ApiCall
		if maxT := v.maxExecutionTime(); maxT > 0 && a.Timeout > maxT {
			v.rep.warnf(op.Line, op.ID, "operation.ApiCall.timeout", CodeLimit, "timeout %v is longer than maxExecutionTime %v", a.Timeout, maxT)
		}
		if a.HasBody && (a.Method == "GET" || a.Method == "DELETE") {
			v.rep.warnf(op.Line, op.ID, "operation.ApiCall.body", CodeInvalidField, "a body with %s is unusual; many servers ignore it", a.Method)
		}
		for name, h := range a.Headers {
			if h.CredentialID == "" && isSecretHeader(name) {
				v.rep.warnf(op.Line, op.ID, "operation.ApiCall.headers."+name, CodeLiteralSecret,
					"a literal credential is stripped before the workflow is published (and never reaches the API); use {\"credentialRef\":{\"id\":…}}")
			}
		}
		if v.policy == nil || a.URL.raw == "" {
			break
		}
		static, hasRefs := a.URL.staticURL()
		u, err := url.Parse(static)
		if err != nil {
			break
		}
		if err := v.policy.checkRequest(v.principal, a.Method, u, !hasRefs); err != nil {
			v.rep.errorf(op.Line, op.ID, "operation.ApiCall.url", CodePermission, "%s", err.Message)
		}
		for name, h := range a.Headers {
			if h.CredentialID == "" {
				continue
			}
			if err := v.vault.check(v.principal, h.CredentialID, u); err != nil {
				v.rep.errorf(op.Line, op.ID, "operation.ApiCall.headers."+name, CodePermission, "%s", err.Message)
			}
		}
	case OpStoreData:
		if v.storages != nil && op.StoreData.Storage != "" && !in(v.storages, op.StoreData.Storage) {
			v.rep.errorf(op.Line, op.ID, "operation.StoreData.storage", CodePermission, "storage %q is not enabled on this server", op.StoreData.Storage)
		}
	}
}

// staticURL returns the url with references replaced by a placeholder and
// whether it had any.
func (t template) staticURL() (string, bool) {
	var b strings.Builder
	refs := false
	for _, p := range t.parts {
		if p.isRef {
			b.WriteString("ref")
			refs = true
		} else {
			b.WriteString(p.text)
		}
	}
	return b.String(), refs
}

// walk follows the execution order, checking that every path read was
// written before, detecting cycles and recording reached operations.
func (v *validator) walk(ids []string, sc *scope, stack []string, parentLine int, parentID string) {
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		if listed[id] {
			// Run again after itself in the same list: it reads what it
			// read the first time, now with its own writes too, so a
			// second check finds nothing new (and walking each repeat
			// multiplied the walk at every level).
			continue
		}
		listed[id] = true
		op := v.wf.Operations[id]
		if op == nil {
			if parentID != "" {
				v.rep.errorf(parentLine, parentID, "", CodeUndefinedReference, "operation %q is not defined", id)
			}
			continue
		}
		v.reached[id] = true
		if v.visits == v.maxWalk() {
			if !v.overWalk {
				v.overWalk = true
				v.rep.errorf(op.Line, id, "", CodeLimit, "the execution order expands to more than %d operations to check "+
					"(Conditionals and Loops that list operations many times)", v.maxWalk())
			}
			return
		}
		v.visits++
		if in(stack, id) {
			v.rep.errorf(op.Line, id, "", CodeCycle, "operation %q runs itself again through %s", id, strings.Join(append(stack, id), " → "))
			continue
		}
		// stack holds the Conditionals and Loops around op: op nests one
		// deeper only when it is one of them (an operation inside the
		// eighth of eight is no ninth).
		if nests := op.Type == OpConditional || op.Type == OpLoop; nests && len(stack) >= v.limits.MaxNesting && v.limits.MaxNesting > 0 {
			v.rep.errorf(op.Line, id, "", CodeLimit, "Conditional and Loop nest deeper than %d", v.limits.MaxNesting)
			continue
		}
		if op.Type == "" {
			sc.opaque = true
			continue
		}
		v.checkReads(op, sc)
		switch op.Type {
		case OpConditional:
			c := op.Conditional
			a, b := sc.clone(), sc.clone()
			next := append(append([]string(nil), stack...), id)
			v.walk(c.IfTrue, a, next, op.Line, id)
			v.walk(c.IfFalse, b, next, op.Line, id)
			sc.opaque = a.opaque || b.opaque
			base := len(sc.w)
			for _, w := range a.w[base:] {
				w.sure = w.sure && containsPath(b.w[base:], w.path)
				sc.w = append(sc.w, w)
			}
			for _, w := range b.w[base:] {
				w.sure = w.sure && containsPath(a.w[base:], w.path)
				sc.w = append(sc.w, w)
			}
		case OpLoop:
			inner := sc.clone()
			inner.inLoop = true
			base := len(inner.w)
			v.walk(op.Loop.Operations, inner, append(append([]string(nil), stack...), id), op.Line, id)
			sc.opaque = inner.opaque
			for _, w := range inner.w[base:] {
				w.sure = false // the array may be empty
				sc.w = append(sc.w, w)
			}
			if !op.Loop.OutputPath.IsZero() {
				sc.w = append(sc.w, written{path: op.Loop.OutputPath, sure: true, typ: tArray, owner: id})
			}
		default:
			if p := op.writes(); !p.IsZero() {
				sc.w = append(sc.w, written{path: p, sure: true, typ: outputType(op), owner: id})
			}
		}
	}
}

func containsPath(ws []written, p Path) bool {
	c := p.canonical()
	for _, w := range ws {
		if w.sure && w.path.canonical() == c {
			return true
		}
	}
	return false
}

// outputType is the type an operation is known to write ("" unknown).
func outputType(op *Operation) string {
	switch op.Type {
	case OpFilterData:
		return tArray
	case OpTransformData:
		switch op.TransformData.Transform {
		case "map", "sort":
			return tArray
		case "group":
			return tObject
		case "aggregate":
			if cfgString(op.TransformData.Config, "groupBy") != "" {
				return tObject
			}
			if _, ok := op.TransformData.Config["aggregations"]; ok {
				return tObject
			}
		}
	case OpMergeData:
		if op.MergeData.Strategy != "deepMerge" {
			return tArray
		}
	}
	return ""
}

// needsArray reports which read of op must be an array.
func needsArray(op *Operation) (Path, string) {
	switch op.Type {
	case OpFilterData:
		return op.FilterData.InputPath, "operation.FilterData.inputPath"
	case OpLoop:
		return op.Loop.InputPath, "operation.Loop.inputPath"
	case OpTransformData:
		if op.TransformData.Transform != "select" {
			return op.TransformData.InputPath, "operation.TransformData.inputPath"
		}
	}
	return Path{}, ""
}

func (v *validator) checkReads(op *Operation, sc *scope) {
	for _, p := range op.reads() {
		if p.IsZero() {
			continue
		}
		if len(p.segs) > 0 && p.segs[0].key == LoopVar && !p.segs[0].isIdx {
			if !sc.inLoop {
				v.rep.errorf(op.Line, op.ID, "", CodeUnresolvedPath, "%s is only set inside a Loop", p)
			}
			continue
		}
		if len(p.segs) == 0 {
			continue // the whole data model
		}
		sure, maybe, typ := sc.find(p)
		switch {
		case sure:
			if ap, field := needsArray(op); !ap.IsZero() && ap.canonical() == p.canonical() && typ != "" && typ != tArray {
				v.rep.errorf(op.Line, op.ID, field, CodeTypeMismatch, "%s holds an %s here, an array is needed", p, typ)
			}
		case maybe:
			v.rep.warnf(op.Line, op.ID, "", CodeMaybeUnresolved, "%s is written only on some paths (a Conditional branch or a Loop) before this operation", p)
		case sc.opaque:
			v.rep.warnf(op.Line, op.ID, "", CodeMaybeUnresolved, "%s is read but no earlier valid operation writes it: an invalid operation before it may (fix that one first)", p)
		default:
			v.rep.errorf(op.Line, op.ID, "", CodeUnresolvedPath, "%s is read but no earlier operation writes it", p)
		}
	}
}

// isSecretHeader reports header names that carry credentials.
func isSecretHeader(name string) bool {
	n := strings.ReplaceAll(strings.ToLower(name), "-", "_")
	switch n {
	case "authorization", "proxy_authorization", "x_api_key", "api_key", "apikey", "cookie", "x_auth_token":
		return true
	}
	return strings.Contains(n, "token") || strings.Contains(n, "secret") || strings.Contains(n, "password")
}
