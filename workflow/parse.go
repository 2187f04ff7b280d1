package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/normalizer"

	"golang.org/x/net/http/httpguts"
)

// Parse limits.
const (
	// MaxWorkflowBytes bounds the JSONL text of one workflow.
	MaxWorkflowBytes = 1 << 20
	// MaxLines bounds the number of messages of one workflow: the
	// normalizer's bound too, which refuses a longer workflow at the door.
	MaxLines = normalizer.MaxWorkflowMessages
	maxIDLen = 128
)

// TooLargeMessage is the refusal of a workflow of n bytes, more than
// MaxWorkflowBytes: the validation error of the REST API and the worker,
// and POST /a2e's refusal before it publishes (protocols/a2e).
func TooLargeMessage(n int) string {
	return fmt.Sprintf("workflow is %d bytes, more than the %d allowed (MaxWorkflowBytes, a fixed limit of the workflow executor: "+
		"no environment variable raises it; E2A_MAX_BODY_BYTES bounds request bodies, not workflows)", n, MaxWorkflowBytes)
}

var idPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// storage keys: KV-safe characters, no "..", no leading or trailing dot or slash.
var keyPattern = regexp.MustCompile(`^[A-Za-z0-9_=-][A-Za-z0-9_=./-]*$`)

// Parse reads a JSONL workflow (one message a line; a JSON array of
// messages is accepted too, its elements numbered as lines) and checks its
// structure: message types, the operationId and executionId patterns,
// exactly one operation key from the catalog, required properties and their
// types. It returns the workflow and a report whose every issue carries its
// line and operationId. Semantic checks (references, paths, permissions,
// limits) are done by [Validate] and [Executor.Validate].
func Parse(text string) (*Workflow, ValidationResult) {
	var rep report
	wf := parse(text, &rep)
	return wf, rep.result()
}

type rawLine struct {
	line int
	data []byte
	val  any // already decoded (JSON array form)
}

func splitLines(text string, rep *report) []rawLine {
	trimmed := strings.TrimSpace(text)
	if strings.HasPrefix(trimmed, "[") {
		v, err := decodeJSON([]byte(trimmed))
		if err != nil {
			rep.errorf(1, "", "", CodeInvalidJSON, "invalid JSON array of messages: %v", err)
			return nil
		}
		arr := v.([]any)
		out := make([]rawLine, len(arr))
		for i, x := range arr {
			out[i] = rawLine{line: i + 1, val: x}
		}
		return out
	}
	var out []rawLine
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		out = append(out, rawLine{line: i + 1, data: []byte(l)})
	}
	return out
}

func parse(text string, rep *report) *Workflow {
	wf := &Workflow{Operations: map[string]*Operation{}}
	if len(text) > MaxWorkflowBytes {
		rep.errorf(1, "", "", CodeTooLarge, "%s", TooLargeMessage(len(text)))
		return wf
	}
	lines := splitLines(text, rep)
	if rep.nErrs > 0 {
		return wf
	}
	if len(lines) > MaxLines {
		rep.errorf(lines[MaxLines].line, "", "", CodeTooLarge, "%s", normalizer.TooManyWorkflowMessages(len(lines)))
		return wf
	}
	last := 0
	for _, rl := range lines {
		last = rl.line
		v := rl.val
		if rl.data != nil {
			var err error
			v, err = decodeJSON(rl.data)
			if err != nil {
				rep.errorf(rl.line, "", "", CodeInvalidJSON, "invalid JSON: %v", err)
				continue
			}
		}
		m, ok := v.(map[string]any)
		if !ok {
			rep.errorf(rl.line, "", "", CodeInvalidMessage, "a message must be a JSON object, got %s", typeName(v))
			continue
		}
		typ, _ := m["type"].(string)
		if wf.BeginLine != 0 {
			id, _ := m["operationId"].(string)
			rep.errorf(rl.line, id, "", CodeAfterBegin, "message after beginExecution (line %d); beginExecution must be the last message", wf.BeginLine)
			continue
		}
		switch typ {
		case MsgOperationUpdate:
			parseOperationUpdate(wf, rl.line, m, rep)
		case MsgBeginExecution:
			parseBegin(wf, rl.line, m, rep)
		case "":
			rep.errorf(rl.line, "", "type", CodeMissingField, "type is required (operationUpdate or beginExecution)")
		default:
			rep.errorf(rl.line, "", "type", CodeUnknownMessageType, "unknown message type %q (expected operationUpdate or beginExecution)", typ)
		}
	}
	wf.Lines = last
	if wf.BeginLine == 0 && len(lines) > 0 {
		rep.errorf(last, "", "", CodeMissingBegin, "no beginExecution message: the workflow never starts")
	}
	if len(lines) == 0 {
		rep.errorf(1, "", "", CodeMissingBegin, "the workflow is empty")
	}
	return wf
}

func parseOperationUpdate(wf *Workflow, line int, m map[string]any, rep *report) {
	id, ok := m["operationId"].(string)
	switch {
	case m["operationId"] == nil:
		rep.errorf(line, "", "operationId", CodeMissingField, "operationId is required")
		return
	case !ok:
		rep.errorf(line, "", "operationId", CodeInvalidField, "operationId must be a string")
		return
	case !idPattern.MatchString(id) || len(id) > maxIDLen:
		rep.errorf(line, id, "operationId", CodeInvalidID, "operationId must match ^[a-zA-Z0-9_-]+$ (at most %d characters)", maxIDLen)
		return
	}
	for k := range m {
		if k != "type" && k != "operationId" && k != "operation" {
			rep.warnf(line, id, k, CodeUnknownField, "unknown property ignored")
		}
	}
	opv, present := m["operation"]
	opm, ok := opv.(map[string]any)
	switch {
	case !present || opv == nil:
		rep.errorf(line, id, "operation", CodeMissingField, "operation is required")
		keepUnusable(wf, line, id)
		return
	case !ok:
		rep.errorf(line, id, "operation", CodeInvalidField, "operation must be an object, got %s", typeName(opv))
		keepUnusable(wf, line, id)
		return
	case len(opm) != 1:
		rep.errorf(line, id, "operation", CodeInvalidField, "operation must have exactly one key (the operation type), got %d", len(opm))
		keepUnusable(wf, line, id)
		return
	}
	var typ string
	var cfgv any
	for k, v := range opm {
		typ, cfgv = k, v
	}
	if !in(Catalog, typ) {
		rep.errorf(line, id, "operation", CodeUnknownOperation, "unknown operation type %q; the catalog has %s", typ, strings.Join(Catalog, ", "))
		keepUnusable(wf, line, id)
		return
	}
	cfg, ok := cfgv.(map[string]any)
	if !ok {
		rep.errorf(line, id, "operation."+typ, CodeInvalidField, "must be an object, got %s", typeName(cfgv))
		keepUnusable(wf, line, id)
		return
	}
	op := &Operation{ID: id, Type: typ, Line: line, Config: cfg}
	r := &fieldReader{rep: rep, line: line, opID: id, prefix: "operation." + typ, m: cfg}
	before := rep.nErrs
	switch typ {
	case OpApiCall:
		op.ApiCall = decodeApiCall(r)
	case OpFilterData:
		op.FilterData = decodeFilterData(r)
	case OpTransformData:
		op.TransformData = decodeTransformData(r)
	case OpConditional:
		op.Conditional = decodeConditional(r)
	case OpLoop:
		op.Loop = decodeLoop(r)
	case OpStoreData:
		op.StoreData = decodeStoreData(r)
	case OpWait:
		op.Wait = decodeWait(r)
	case OpMergeData:
		op.MergeData = decodeMergeData(r)
	}
	r.finish()
	if prev, dup := wf.Operations[id]; dup {
		rep.warnf(line, id, "operationId", CodeRedefined, "redefines the operation of line %d (the later definition is used)", prev.Line)
	} else {
		wf.Defined = append(wf.Defined, id)
	}
	if rep.nErrs > before {
		// keep the id known (so references to it do not add noise) but
		// unusable: the workflow is invalid anyway.
		op.Type = ""
	}
	wf.Operations[id] = op
}

// keepUnusable keeps operation id, whose operationUpdate was refused (its
// error reported), known but unusable (no type), as an operation whose
// configuration has errors is: the references to it (operationOrder, a
// Conditional's branches, a Loop) are then not reported as
// undefined_operation, a follow-on of the one root cause.
func keepUnusable(wf *Workflow, line int, id string) {
	if _, dup := wf.Operations[id]; !dup {
		wf.Defined = append(wf.Defined, id)
	}
	wf.Operations[id] = &Operation{ID: id, Line: line}
}

func parseBegin(wf *Workflow, line int, m map[string]any, rep *report) {
	wf.BeginLine = line
	r := &fieldReader{rep: rep, line: line, m: m, seen: map[string]bool{"type": true}}
	if id, ok := r.str("executionId", true); ok {
		if !idPattern.MatchString(id) || len(id) > maxIDLen {
			rep.errorf(line, "", "executionId", CodeInvalidID, "executionId must match ^[a-zA-Z0-9_-]+$ (at most %d characters)", maxIDLen)
		}
		wf.ExecutionID = id
	}
	if order, ok := r.strs("operationOrder", true); ok {
		if len(order) == 0 {
			rep.errorf(line, "", "operationOrder", CodeInvalidField, "operationOrder needs at least one operation")
		}
		seen := map[string]bool{}
		for i, id := range order {
			if _, ok := wf.Operations[id]; !ok {
				rep.errorf(line, id, fmt.Sprintf("operationOrder[%d]", i), CodeUndefinedReference, "operation %q is not defined by an earlier operationUpdate", id)
			}
			if seen[id] {
				rep.warnf(line, id, fmt.Sprintf("operationOrder[%d]", i), CodeRedefined, "operation %q is listed more than once and runs each time", id)
			}
			seen[id] = true
		}
		wf.Order = order
	}
	r.finish()
}

// badHeaderValue refuses a header value (or a credential's prefix) that
// net/http would refuse to send: a line break, NUL or another control
// character but the tab.
const badHeaderValue = "header values cannot contain line breaks or control characters"

// fieldReader reads the properties of one object, reporting problems with
// the message's line, the operation id and the property's dotted name.
type fieldReader struct {
	rep    *report
	line   int
	opID   string
	prefix string
	m      map[string]any
	seen   map[string]bool
}

func (r *fieldReader) name(n string) string {
	if n == "" {
		return r.prefix
	}
	if r.prefix == "" {
		return n
	}
	return r.prefix + "." + n
}

func (r *fieldReader) errorf(field, code, format string, a ...any) {
	r.rep.errorf(r.line, r.opID, r.name(field), code, format, a...)
}

func (r *fieldReader) get(n string, required bool) (any, bool) {
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.seen[n] = true
	v, ok := r.m[n]
	if !ok {
		if required {
			r.errorf(n, CodeMissingField, "is required")
		}
		return nil, false
	}
	return v, true
}

func (r *fieldReader) str(n string, required bool) (string, bool) {
	v, ok := r.get(n, required)
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		r.errorf(n, CodeInvalidField, "must be a string, got %s", typeName(v))
		return "", false
	}
	return s, true
}

func (r *fieldReader) enum(n string, required bool, allowed []string) (string, bool) {
	s, ok := r.str(n, required)
	if !ok {
		return "", false
	}
	if !in(allowed, s) {
		r.errorf(n, CodeInvalidField, "%q is not one of %s", s, strings.Join(allowed, ", "))
		return "", false
	}
	return s, true
}

func (r *fieldReader) path(n string, required bool) (Path, bool) {
	s, ok := r.str(n, required)
	if !ok {
		return Path{}, false
	}
	p, err := ParsePath(s)
	if err != nil {
		r.errorf(n, CodeInvalidField, "%v", err)
		return Path{}, false
	}
	return p, true
}

// outPath reads a path that an operation writes.
func (r *fieldReader) outPath(n string, required bool) (Path, bool) {
	p, ok := r.path(n, required)
	if !ok {
		return p, false
	}
	if len(p.segs) == 0 {
		r.errorf(n, CodeInvalidField, "cannot write %s itself", Root)
		return Path{}, false
	}
	if p.segs[0].key == LoopVar {
		r.errorf(n, CodeInvalidField, "%s/%s is reserved for Loop", Root, LoopVar)
		return Path{}, false
	}
	return p, true
}

func (r *fieldReader) strs(n string, required bool) ([]string, bool) {
	v, ok := r.get(n, required)
	if !ok {
		return nil, false
	}
	a, isArr := v.([]any)
	if !isArr {
		r.errorf(n, CodeInvalidField, "must be an array of strings, got %s", typeName(v))
		return nil, false
	}
	out := make([]string, 0, len(a))
	good := true
	for i, x := range a {
		s, isStr := x.(string)
		if !isStr {
			r.errorf(fmt.Sprintf("%s[%d]", n, i), CodeInvalidField, "must be a string, got %s", typeName(x))
			good = false
			continue
		}
		out = append(out, s)
	}
	return out, good
}

func (r *fieldReader) number(n string, required bool) (float64, bool) {
	v, ok := r.get(n, required)
	if !ok {
		return 0, false
	}
	f, isNum := toNumber(v)
	if !isNum || math.IsNaN(f) || math.IsInf(f, 0) {
		r.errorf(n, CodeInvalidField, "must be a number, got %s", typeName(v))
		return 0, false
	}
	return f, true
}

func (r *fieldReader) object(n string, required bool) (map[string]any, bool) {
	v, ok := r.get(n, required)
	if !ok {
		return nil, false
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		r.errorf(n, CodeInvalidField, "must be an object, got %s", typeName(v))
		return nil, false
	}
	return m, true
}

func (r *fieldReader) sub(n string, m map[string]any) *fieldReader {
	return &fieldReader{rep: r.rep, line: r.line, opID: r.opID, prefix: r.name(n), m: m}
}

// finish reports properties nobody read as warnings.
func (r *fieldReader) finish() {
	for k := range r.m {
		if !r.seen[k] {
			r.rep.warnf(r.line, r.opID, r.name(k), CodeUnknownField, "unknown property ignored")
		}
	}
}

func (r *fieldReader) opIDs(n string, required bool) ([]string, bool) {
	ids, ok := r.strs(n, required)
	if !ok {
		return nil, false
	}
	for i, id := range ids {
		if !idPattern.MatchString(id) {
			r.errorf(fmt.Sprintf("%s[%d]", n, i), CodeInvalidID, "%q is not a valid operationId", id)
		}
	}
	return ids, true
}

func decodeApiCall(r *fieldReader) *ApiCall {
	op := &ApiCall{}
	if m, ok := r.str("method", true); ok {
		op.Method = strings.ToUpper(m)
		if !in(Methods, op.Method) {
			r.errorf("method", CodeInvalidField, "%q is not one of %s", m, strings.Join(Methods, ", "))
		}
	}
	if u, ok := r.str("url", true); ok {
		if t, err := parseURLTemplate(u); err != nil {
			r.errorf("url", CodeInvalidField, "%v", err)
		} else {
			op.URL = t
		}
	}
	if h, ok := r.object("headers", false); ok {
		op.Headers = map[string]HeaderValue{}
		for name, v := range h {
			f := "headers." + name
			if !httpguts.ValidHeaderFieldName(name) {
				r.errorf(f, CodeInvalidField, "invalid header name")
				continue
			}
			if forbiddenHeaders[strings.ToLower(name)] {
				r.errorf(f, CodePermission, "header %s may not be set by a workflow", name)
				continue
			}
			switch t := v.(type) {
			case string:
				tm, err := parseTemplate(t)
				if err != nil {
					r.errorf(f, CodeInvalidField, "%v", err)
					continue
				}
				if !httpguts.ValidHeaderFieldValue(t) {
					r.errorf(f, CodeInvalidField, "%s", badHeaderValue)
					continue
				}
				op.Headers[name] = HeaderValue{Value: tm}
			case map[string]any:
				hr := r.sub(f, t)
				cr, ok := hr.object("credentialRef", true)
				if ok {
					crr := hr.sub("credentialRef", cr)
					if id, ok := crr.str("id", true); ok {
						if id == "" {
							crr.errorf("id", CodeInvalidField, "must not be empty")
						}
						hv := HeaderValue{CredentialID: id}
						if p, ok := hr.str("prefix", false); ok {
							hv.Prefix = p
							if !httpguts.ValidHeaderFieldValue(p) {
								hr.errorf("prefix", CodeInvalidField, "%s", badHeaderValue)
							}
						}
						op.Headers[name] = hv
					}
					crr.finish()
				}
				hr.finish()
			default:
				r.errorf(f, CodeInvalidField, "must be a string or {\"credentialRef\":{\"id\":...}}, got %s", typeName(v))
			}
		}
	}
	if b, ok := r.get("body", false); ok {
		op.Body, op.HasBody = b, true
		if _, err := valueRefs(b); err != nil {
			r.errorf("body", CodeInvalidField, "%v", err)
		}
	}
	if p, ok := r.outPath("outputPath", true); ok {
		op.OutputPath = p
	}
	if t, ok := r.number("timeout", false); ok {
		if t <= 0 || t != math.Trunc(t) || t > float64(24*time.Hour/time.Millisecond) {
			r.errorf("timeout", CodeInvalidField, "must be a whole number of milliseconds from 1 to one day (86400000)")
		} else {
			op.Timeout = time.Duration(t) * time.Millisecond
		}
	}
	return op
}

// parseURLTemplate parses an ApiCall url: http or https, no user
// information, and references only after the host, so that the destination
// is known before anything runs.
func parseURLTemplate(u string) (template, error) {
	t, err := parseTemplate(u)
	if err != nil {
		return t, err
	}
	// the static form, references replaced by a harmless placeholder
	var static strings.Builder
	for _, p := range t.parts {
		if p.isRef {
			static.WriteString("ref")
		} else {
			static.WriteString(p.text)
		}
	}
	pu, err := url.Parse(static.String())
	if err != nil {
		return t, fmt.Errorf("invalid url: %v", err)
	}
	if pu.Scheme != "http" && pu.Scheme != "https" {
		return t, fmt.Errorf("url scheme must be http or https, got %q", pu.Scheme)
	}
	if pu.Host == "" || pu.Opaque != "" {
		return t, fmt.Errorf("url needs a host")
	}
	if pu.User != nil {
		return t, fmt.Errorf("url must not carry user information; use a credentialRef header")
	}
	schemeEnd := strings.Index(u, "://") + 3
	hostEnd := len(u)
	if k := strings.IndexAny(u[schemeEnd:], "/?#"); k >= 0 {
		hostEnd = schemeEnd + k
	}
	for _, p := range t.parts {
		if p.isRef && p.offset < hostEnd {
			return t, fmt.Errorf("a reference may not appear in the scheme or host of the url")
		}
	}
	return t, nil
}

func decodeCondition(r *fieldReader, absolute bool) (Condition, bool) {
	var c Condition
	good := true
	if absolute {
		p, ok := r.path("path", true)
		good = good && ok
		c.Path = p
	} else {
		f, ok := r.str("field", true)
		if ok {
			segs, err := parseField(f)
			if err != nil {
				r.errorf("field", CodeInvalidField, "%v", err)
				good = false
			}
			c.Field, c.field = f, segs
		} else {
			good = false
		}
	}
	op, ok := r.enum("operator", true, Operators)
	good = good && ok
	c.Operator = op
	v, present := r.get("value", false)
	c.Value = v
	if _, err := valueRefs(v); err != nil {
		r.errorf("value", CodeInvalidField, "%v", err)
		good = false
	}
	if ok {
		if !present && op != "==" && op != "!=" {
			r.errorf("value", CodeMissingField, "is required for operator %q", op)
			good = false
		} else if msg := checkOperand(op, v); msg != "" {
			r.errorf("value", CodeTypeMismatch, "%s", msg)
			good = false
		}
	}
	r.finish()
	return c, good
}

// checkOperand checks the literal operand of an operator; references are
// checked when they are resolved.
func checkOperand(op string, v any) string {
	if s, ok := v.(string); ok {
		if t, err := parseTemplate(s); err == nil {
			if _, whole := t.whole(); whole {
				return ""
			}
		}
	}
	switch op {
	case "in":
		if _, ok := v.([]any); !ok {
			return fmt.Sprintf("operator \"in\" needs an array value, got %s", typeName(v))
		}
	case "startsWith", "endsWith":
		if _, ok := v.(string); !ok {
			return fmt.Sprintf("operator %q needs a string value, got %s", op, typeName(v))
		}
	case ">", "<", ">=", "<=":
		switch typeName(v) {
		case "number", "string":
		default:
			return fmt.Sprintf("operator %q needs a number or a string, got %s", op, typeName(v))
		}
	}
	return ""
}

func decodeFilterData(r *fieldReader) *FilterData {
	op := &FilterData{}
	op.InputPath, _ = r.path("inputPath", true)
	op.OutputPath, _ = r.outPath("outputPath", true)
	v, ok := r.get("conditions", true)
	if ok {
		a, isArr := v.([]any)
		switch {
		case !isArr:
			r.errorf("conditions", CodeInvalidField, "must be an array, got %s", typeName(v))
		case len(a) == 0:
			r.errorf("conditions", CodeInvalidField, "needs at least one condition")
		}
		for i, x := range a {
			n := fmt.Sprintf("conditions[%d]", i)
			m, isObj := x.(map[string]any)
			if !isObj {
				r.errorf(n, CodeInvalidField, "must be an object, got %s", typeName(x))
				continue
			}
			if c, ok := decodeCondition(r.sub(n, m), false); ok {
				op.Conditions = append(op.Conditions, c)
			}
		}
	}
	return op
}

func decodeTransformData(r *fieldReader) *TransformData {
	op := &TransformData{}
	op.InputPath, _ = r.path("inputPath", true)
	op.OutputPath, _ = r.outPath("outputPath", true)
	op.Transform, _ = r.enum("transform", true, Transforms)
	cfg, _ := r.object("config", false)
	op.Config = cfg
	if op.Transform == "" {
		return op
	}
	c := r.sub("config", cfg)
	switch op.Transform {
	case "map":
		field, hasField := c.str("field", false)
		if hasField {
			checkFieldSyntax(c, "field", field)
		}
		_, hasFn := c.enum("fn", false, MapFuncs)
		if t, ok := c.str("target", false); ok {
			checkFieldSyntax(c, "target", t)
		}
		fields, hasFields := c.object("fields", false)
		for k, v := range fields {
			s, ok := v.(string)
			if !ok {
				c.errorf("fields."+k, CodeInvalidField, "must be a field name (string), got %s", typeName(v))
				continue
			}
			checkFieldSyntax(c, "fields."+k, s)
		}
		_, hasSet := c.object("set", false)
		if !hasField && !hasFn && !hasFields && !hasSet {
			c.errorf("", CodeMissingField, "map needs at least one of field, fn, fields, set")
		}
	case "sort":
		if f, ok := c.str("field", false); ok {
			checkFieldSyntax(c, "field", f)
		}
		c.enum("order", false, []string{"asc", "desc"})
	case "group":
		if f, ok := c.str("field", true); ok {
			checkFieldSyntax(c, "field", f)
		}
	case "aggregate":
		if g, ok := c.str("groupBy", false); ok {
			checkFieldSyntax(c, "groupBy", g)
		}
		aggs, hasAggs := c.get("aggregations", false)
		_, hasOp := c.m["operation"]
		switch {
		case hasAggs:
			a, ok := aggs.([]any)
			if !ok || len(a) == 0 {
				c.errorf("aggregations", CodeInvalidField, "must be a non-empty array")
				break
			}
			for i, x := range a {
				n := fmt.Sprintf("aggregations[%d]", i)
				m, ok := x.(map[string]any)
				if !ok {
					c.errorf(n, CodeInvalidField, "must be an object")
					continue
				}
				checkAggregation(c.sub(n, m), true)
			}
		case hasOp:
			checkAggregation(c, false)
		default:
			c.errorf("operation", CodeMissingField, "aggregate needs operation (with field) or aggregations")
		}
	case "select":
		fields, ok := c.strs("fields", true)
		if ok && len(fields) == 0 {
			c.errorf("fields", CodeInvalidField, "needs at least one field")
		}
		for i, f := range fields {
			checkFieldSyntax(c, fmt.Sprintf("fields[%d]", i), f)
		}
	}
	c.finish()
	return op
}

func checkAggregation(r *fieldReader, own bool) {
	fn, ok := r.enum("operation", true, AggregateFuncs)
	f, hasField := r.str("field", false)
	if hasField {
		checkFieldSyntax(r, "field", f)
	}
	if ok && fn != "count" && !hasField {
		r.errorf("field", CodeMissingField, "is required for %q", fn)
	}
	if own {
		r.str("as", false)
		r.finish()
	}
}

func checkFieldSyntax(r *fieldReader, n, s string) {
	if _, err := parseField(s); err != nil {
		r.errorf(n, CodeInvalidField, "%v", err)
	}
}

func decodeConditional(r *fieldReader) *Conditional {
	op := &Conditional{}
	if m, ok := r.object("condition", true); ok {
		op.Condition, _ = decodeCondition(r.sub("condition", m), true)
	}
	op.IfTrue, _ = r.opIDs("ifTrue", true)
	op.IfFalse, _ = r.opIDs("ifFalse", false)
	return op
}

func decodeLoop(r *fieldReader) *Loop {
	op := &Loop{}
	op.InputPath, _ = r.path("inputPath", true)
	ids, ok := r.opIDs("operations", true)
	if ok && len(ids) == 0 {
		r.errorf("operations", CodeInvalidField, "needs at least one operation")
	}
	op.Operations = ids
	op.OutputPath, _ = r.outPath("outputPath", false)
	return op
}

func decodeStoreData(r *fieldReader) *StoreData {
	op := &StoreData{}
	op.InputPath, _ = r.path("inputPath", true)
	op.Storage, _ = r.enum("storage", true, []string{StorageLocal, StorageSession, StorageFile})
	if k, ok := r.str("key", true); ok {
		if msg := checkStoreKey(k); msg != "" {
			r.errorf("key", CodeInvalidField, "%s", msg)
		} else {
			op.Key = k
		}
	}
	return op
}

func checkStoreKey(k string) string {
	switch {
	case len(k) == 0 || len(k) > 200:
		return "must have 1 to 200 characters"
	case !keyPattern.MatchString(k):
		return "may hold only letters, digits and _ = - . / and cannot start with . or /"
	case strings.Contains(k, "..") || strings.Contains(k, "//") || strings.HasSuffix(k, ".") || strings.HasSuffix(k, "/") || strings.Contains(k, "/.") || strings.Contains(k, "./"):
		return "may not contain .., //, /. or ./ nor end with . or /"
	}
	return ""
}

func decodeWait(r *fieldReader) *Wait {
	op := &Wait{}
	if d, ok := r.number("duration", true); ok {
		if d < 0 || d > float64(24*time.Hour/time.Millisecond) {
			r.errorf("duration", CodeInvalidField, "must be a number of milliseconds between 0 and one day")
		} else {
			op.Duration = time.Duration(d * float64(time.Millisecond))
		}
	}
	return op
}

func decodeMergeData(r *fieldReader) *MergeData {
	op := &MergeData{}
	if v, ok := r.get("sources", true); ok {
		a, isArr := v.([]any)
		if !isArr || len(a) == 0 {
			r.errorf("sources", CodeInvalidField, "must be a non-empty array of paths")
		}
		for i, x := range a {
			n := fmt.Sprintf("sources[%d]", i)
			s, ok := x.(string)
			if !ok {
				r.errorf(n, CodeInvalidField, "must be a path string, got %s", typeName(x))
				continue
			}
			p, err := ParsePath(s)
			if err != nil {
				r.errorf(n, CodeInvalidField, "%v", err)
				continue
			}
			op.Sources = append(op.Sources, p)
		}
		if isArr && len(a) == 1 {
			r.rep.warnf(r.line, r.opID, r.name("sources"), CodeInvalidField, "a single source merges nothing")
		}
	}
	op.Strategy, _ = r.enum("strategy", true, MergeStrategies)
	op.OutputPath, _ = r.outPath("outputPath", true)
	return op
}

// readsOf lists the paths an operation reads.
func (op *Operation) reads() []Path {
	switch op.Type {
	case OpApiCall:
		out := op.ApiCall.URL.refs()
		for _, h := range op.ApiCall.Headers {
			out = append(out, h.Value.refs()...)
		}
		b, _ := valueRefs(op.ApiCall.Body)
		return append(out, b...)
	case OpFilterData:
		out := []Path{op.FilterData.InputPath}
		for _, c := range op.FilterData.Conditions {
			r, _ := valueRefs(c.Value)
			out = append(out, r...)
		}
		return out
	case OpTransformData:
		return []Path{op.TransformData.InputPath}
	case OpConditional:
		r, _ := valueRefs(op.Conditional.Condition.Value)
		return append([]Path{op.Conditional.Condition.Path}, r...)
	case OpLoop:
		return []Path{op.Loop.InputPath}
	case OpStoreData:
		return []Path{op.StoreData.InputPath}
	case OpMergeData:
		return op.MergeData.Sources
	}
	return nil
}

// writes returns the path an operation writes (zero when none).
func (op *Operation) writes() Path {
	switch op.Type {
	case OpApiCall:
		return op.ApiCall.OutputPath
	case OpFilterData:
		return op.FilterData.OutputPath
	case OpTransformData:
		return op.TransformData.OutputPath
	case OpLoop:
		return op.Loop.OutputPath
	case OpMergeData:
		return op.MergeData.OutputPath
	}
	return Path{}
}

// children returns the operations a Conditional or Loop runs.
func (op *Operation) children() []string {
	switch op.Type {
	case OpConditional:
		return append(append([]string(nil), op.Conditional.IfTrue...), op.Conditional.IfFalse...)
	case OpLoop:
		return op.Loop.Operations
	}
	return nil
}

// MarshalJSON writes the operation in its wire form.
func (op *Operation) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"type": MsgOperationUpdate, "operationId": op.ID, "operation": map[string]any{op.Type: op.Config}})
}
