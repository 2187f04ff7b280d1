package normalizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// MethodWorkflowExecute is the method of an A2E workflow envelope; the
// routing rule sends it to WorkflowPool.
const MethodWorkflowExecute = "a2e.workflow.execute"

// Workflow line types.
const (
	WorkflowOperationUpdate = "operationUpdate"
	WorkflowBeginExecution  = "beginExecution"
)

// MaxWorkflowMessages bounds the messages of one workflow (JSONL lines
// that are not blank, or elements of a JSON array of messages): the
// workflow worker's bound (workflow.MaxLines is this constant). A workflow
// with more is refused before its messages are decoded (readWorkflow).
const MaxWorkflowMessages = 1000

// MaxWorkflowErrors bounds the line errors reported for one workflow.
const MaxWorkflowErrors = 100

// MaxWorkflowIDLen bounds an operationId or executionId, in characters:
// the workflow executor's bound (workflow.Parse refuses a longer one).
const MaxWorkflowIDLen = 128

var workflowID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// validWorkflowID reports whether id is an operationId or executionId the
// workflow executor takes: ^[a-zA-Z0-9_-]+$, at most MaxWorkflowIDLen.
func validWorkflowID(id string) bool {
	return len(id) <= MaxWorkflowIDLen && workflowID.MatchString(id)
}

// Workflow is the structure of an A2E workflow: its operations (in order
// of first definition; a later operationUpdate of the same id replaces the
// operation) and its beginExecution. Only structure is checked here (the
// JSONL schema of a2e-workflow-protocol.md); the catalog, permissions and
// path references are validated by the workflow executor.
type Workflow struct {
	Operations     []WorkflowOperation
	ExecutionID    string
	OperationOrder []string
	// Lines are the workflow's lines as objects, in order (blank lines
	// dropped).
	Lines []map[string]any
}

// WorkflowOperation is one defined operation.
type WorkflowOperation struct {
	ID   string // operationId
	Type string // the operation's single key, e.g. "ApiCall"
	// Operation is the line's operation object ({"ApiCall": {...}}).
	Operation map[string]any
}

// ParseWorkflow checks the structure of a JSONL workflow and returns it,
// or the structural errors, one per problem and line (at most
// MaxWorkflowErrors). A text starting with '[' is a JSON array of the
// messages, its elements numbered as lines, as the workflow worker reads it.
//
//   - every non-blank line is a JSON object with a string type,
//     operationUpdate or beginExecution;
//   - operationUpdate: operationId matches ^[a-zA-Z0-9_-]+$, operation is
//     an object with exactly one property whose value is an object;
//   - beginExecution: executionId matches ^[a-zA-Z0-9_-]+$,
//     operationOrder is a non-empty array of strings, each defined by an
//     earlier operationUpdate; exactly one beginExecution, on the last
//     non-blank line.
func ParseWorkflow(jsonl string) (*Workflow, []LineError) {
	p := &workflowParser{w: &Workflow{}, defined: map[string]int{}}
	lastLine, refused := readWorkflow(jsonl, func(ln int, m map[string]any) {
		p.w.Lines = append(p.w.Lines, m)
		typ, _ := m["type"].(string)
		switch typ {
		case WorkflowOperationUpdate:
			p.operationUpdate(ln, m)
		case WorkflowBeginExecution:
			p.beginExecution(ln, m)
		case "":
			p.add(ln, "type", "required, must be operationUpdate or beginExecution")
		default:
			p.add(ln, "type", "unknown type %s (want operationUpdate or beginExecution)", echo(typ))
		}
	}, func(ln int, format string, a ...any) { p.add(ln, "", format, a...) })
	switch {
	case refused:
	case lastLine == 0:
		p.add(1, "", "empty workflow")
	case p.beginLine == 0:
		p.add(lastLine, "", "no beginExecution line")
	case p.beginLine != lastLine:
		p.add(p.beginLine, "type", "beginExecution must be the last line (line %d follows)", lastLine)
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return p.w, nil
}

// workflowParser is ParseWorkflow's state.
type workflowParser struct {
	w         *Workflow
	errs      []LineError
	defined   map[string]int // operation id → index in w.Operations
	beginLine int            // the beginExecution's line; 0 before it
}

// add records an error, up to MaxWorkflowErrors.
func (p *workflowParser) add(line int, field, format string, a ...any) {
	if len(p.errs) < MaxWorkflowErrors {
		p.errs = append(p.errs, LineError{Line: line, Field: field, Message: sprintf(format, a...)})
	}
}

// TooManyWorkflowMessages is the refusal of a workflow of n messages, more
// than MaxWorkflowMessages: the normalizer's (readWorkflow) and the
// workflow worker's (workflow.Parse), in the same words.
func TooManyWorkflowMessages(n int) string {
	return sprintf("workflow has %d messages, more than the %d allowed", n, MaxWorkflowMessages)
}

// readWorkflow reads the messages of a workflow's text as the workflow
// worker does (workflow.Parse): the elements of a JSON array of messages
// when the text starts with '[', numbered from 1 as lines, else its JSONL
// lines (blank lines skipped, counted). msg gets each message that is a
// JSON object, in order, with its line; bad each one that is not, or
// nests deeper than e2a.MaxNesting. It returns the last message's line
// (0 when there is none). A workflow of more than MaxWorkflowMessages
// messages is refused whole before any is decoded (1M tiny lines cost a
// map each, ~240 MB): bad names the first message past the cap with
// TooManyWorkflowMessages, msg gets none, and refused is true. No message
// is ever dropped.
func readWorkflow(text string, msg func(ln int, m map[string]any), bad func(ln int, format string, a ...any)) (last int, refused bool) {
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "[") {
		return readWorkflowArray(t, msg, bad)
	}
	if n, over := countWorkflowLines(text); n > MaxWorkflowMessages {
		bad(over, "%s", TooManyWorkflowMessages(n))
		return over, true
	}
	lastLine, ln := 0, 0
	// One line at a time: a slice of every line's header would cost 16
	// bytes per newline, 64 MiB for a body of 4 MiB of blank lines.
	for raw := range strings.SplitSeq(text, "\n") {
		ln++
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		lastLine = ln
		if err := e2a.CheckDepth([]byte(line), e2a.MaxNesting); err != nil {
			bad(ln, "JSON nests deeper than %d", e2a.MaxNesting)
			continue
		}
		var m map[string]any
		if err := e2a.DecodeStrict([]byte(line), &m); err != nil || m == nil {
			bad(ln, "not a JSON object")
			continue
		}
		msg(ln, m)
	}
	return lastLine, false
}

// countWorkflowLines counts the messages of a JSONL workflow (its lines
// that are not blank) without decoding any, and returns the line of the
// first one past MaxWorkflowMessages (0 when there is none).
func countWorkflowLines(text string) (n, over int) {
	ln := 0
	for raw := range strings.SplitSeq(text, "\n") {
		ln++
		if strings.TrimSpace(raw) == "" {
			continue
		}
		if n++; n == MaxWorkflowMessages+1 {
			over = ln
		}
	}
	return n, over
}

// readWorkflowArray is readWorkflow of a JSON array of messages t (white
// space trimmed), read one element at a time: each is checked (JSON, at
// most e2a.MaxNesting deep with the array) and counted, only the first
// MaxWorkflowMessages kept, and those are decoded (e2a.DecodeStrict) once
// the whole array is known to be valid and within the cap.
func readWorkflowArray(t string, msg func(ln int, m map[string]any), bad func(ln int, format string, a ...any)) (int, bool) {
	invalid := func() (int, bool) {
		bad(1, "not a JSON array of messages (nesting at most %d)", e2a.MaxNesting)
		return 1, false
	}
	dec := json.NewDecoder(strings.NewReader(t))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return invalid()
	}
	var raw json.RawMessage // reused: an element past the cap costs no allocation of its own
	var kept [][]byte
	n := 0
	for dec.More() {
		// The array is one level: an element nests at most MaxNesting-1.
		if err := dec.Decode(&raw); err != nil || e2a.CheckDepth(raw, e2a.MaxNesting-1) != nil {
			return invalid()
		}
		if n++; n <= MaxWorkflowMessages {
			kept = append(kept, bytes.Clone(raw))
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') || strings.TrimSpace(t[dec.InputOffset():]) != "" {
		return invalid()
	}
	if n > MaxWorkflowMessages {
		bad(MaxWorkflowMessages+1, "%s", TooManyWorkflowMessages(n))
		return MaxWorkflowMessages + 1, true
	}
	for i, b := range kept {
		var v any
		if err := e2a.DecodeStrict(b, &v); err != nil {
			return invalid()
		}
		if m, ok := v.(map[string]any); ok && m != nil {
			msg(i+1, m)
		} else {
			bad(i+1, "not a JSON object")
		}
	}
	return n, false
}

// workflowString prepares the workflow string of an a2e.workflow.execute
// envelope (a string params.workflow), whatever its door (the A2E door's
// a2eWorkflow, every other one's finish), once: it is read as the
// workflow worker reads it (readWorkflow: JSONL, or a JSON array of the
// messages) and replaced by the JSONL FromWorkflow writes (workflowJSONL:
// secrets removed, the sender's line numbers kept), the count added to
// details.stripped_secrets, so that a secret in the text is removed as it
// is from an array of the messages (by stripSecrets). A string with a
// message that is no JSON object, whose secrets are out of reach, or with
// more than MaxWorkflowMessages messages is refused with its lines
// (ErrInvalidParams, A2E validation_error, HTTP 422). Blank text is kept.
// It returns the workflow's last message (nil for none).
func (r *req) workflowString(env *e2a.Envelope) (map[string]any, *Error) {
	wf, isStr := env.Params["workflow"].(string)
	if r.workflowDone || env.Method != MethodWorkflowExecute || !isStr {
		return nil, nil
	}
	r.workflowDone = true
	var msgs []map[string]any
	var nos []int
	var bad []LineError
	_, refused := readWorkflow(wf, func(ln int, m map[string]any) {
		msgs, nos = append(msgs, m), append(nos, ln)
	}, func(ln int, format string, a ...any) {
		if len(bad) < MaxWorkflowErrors {
			bad = append(bad, LineError{Line: ln, Message: sprintf(format, a...)})
		}
	})
	switch {
	case refused:
		return nil, &Error{Kind: ErrInvalidParams, Protocol: r.adapter, Method: MethodWorkflowExecute, Lines: bad,
			Msg: sprintf("workflow has more than %d messages", MaxWorkflowMessages)}
	case len(bad) > 0:
		return nil, &Error{Kind: ErrInvalidParams, Protocol: r.adapter, Method: MethodWorkflowExecute, Lines: bad,
			Msg: sprintf("workflow has %d message(s) that are not JSON objects", len(bad))}
	case len(msgs) == 0:
		return nil, nil
	}
	text, stripped, err := workflowJSONL(msgs, nos, r.n.secretRef)
	if err != nil {
		return nil, newErr(ErrInvalidParams, r.adapter, "%v", err)
	}
	// The newlines after the last message are kept too: normalizing the
	// envelope again (a raw E2A copy of it) leaves it as it is.
	tail := wf[len(strings.TrimRightFunc(wf, unicode.IsSpace)):]
	env.Params["workflow"] = text + strings.Repeat("\n", strings.Count(tail, "\n"))
	addStripped(env.Provenance, stripped)
	return msgs[len(msgs)-1], nil
}

// workflowJSONL removes the secrets of a workflow's messages in place
// (scrubMap, every adapter's policy: a literal ApiCall header
// "Authorization": "Bearer …" is replaced, a {"credentialRef": …} header
// and its scheme prefix are kept) and then writes them as canonical
// JSONL, one compact object a line, so that no copy keeps a secret. With
// lineNos (each message's line), a blank line stands for each line
// skipped, so that the worker's errors name the sender's lines, and the
// last line has no newline (a compact one-line workflow keeps its size,
// which the worker and the A2E door hold against the workflow limit). It
// returns the text and how many values it replaced.
func workflowJSONL(lines []map[string]any, lineNos []int, ref SecretRefFunc) (string, int, error) {
	stripped := 0
	for _, l := range lines {
		stripped += scrubMap(l, ref)
	}
	var buf bytes.Buffer
	newlines := 0
	for i, l := range lines {
		b, err := jsonstr.MarshalNoEscape(l)
		if err != nil {
			return "", 0, fmt.Errorf("workflow line does not encode: %v", err)
		}
		if lineNos == nil {
			buf.Write(b)
			buf.WriteByte('\n')
			continue
		}
		for ; newlines < lineNos[i]-1; newlines++ {
			buf.WriteByte('\n')
		}
		buf.Write(b)
	}
	return buf.String(), stripped, nil
}

// operationUpdate reads the operationUpdate m of line ln: a valid one
// defines its operation (a later one of the same id replaces it).
func (p *workflowParser) operationUpdate(ln int, m map[string]any) {
	id, ok := m["operationId"].(string)
	if !ok || !workflowID.MatchString(id) {
		p.add(ln, "operationId", "required, must match ^[a-zA-Z0-9_-]+$")
	}
	op, isObj := m["operation"].(map[string]any)
	opType := ""
	switch {
	case !isObj:
		p.add(ln, "operation", "required, must be an object")
	case len(op) != 1:
		p.add(ln, "operation", "must have exactly one property (the operation type), has %d", len(op))
	default:
		for k, v := range op {
			opType = k
			if _, ok := v.(map[string]any); !ok {
				p.add(ln, "operation", "the value of %s must be an object", echo(k))
			}
		}
	}
	if ok && workflowID.MatchString(id) && isObj && len(op) == 1 {
		wo := WorkflowOperation{ID: id, Type: opType, Operation: op}
		if j, seen := p.defined[id]; seen {
			p.w.Operations[j] = wo
		} else {
			p.defined[id] = len(p.w.Operations)
			p.w.Operations = append(p.w.Operations, wo)
		}
	}
}

// beginExecution reads the beginExecution m of line ln: the execution id
// and the order of operations, each defined by an earlier operationUpdate.
func (p *workflowParser) beginExecution(ln int, m map[string]any) {
	if p.beginLine != 0 {
		p.add(ln, "type", "a second beginExecution (first on line %d)", p.beginLine)
		return
	}
	p.beginLine = ln
	id, ok := m["executionId"].(string)
	if !ok || !workflowID.MatchString(id) {
		p.add(ln, "executionId", "required, must match ^[a-zA-Z0-9_-]+$")
	}
	p.w.ExecutionID = id
	order, isArr := m["operationOrder"].([]any)
	if !isArr || len(order) == 0 {
		p.add(ln, "operationOrder", "required, must be a non-empty array of operation ids")
		return
	}
	for k, o := range order {
		s, isStr := o.(string)
		if !isStr {
			p.add(ln, sprintf("operationOrder[%d]", k), "must be a string")
			continue
		}
		if _, seen := p.defined[s]; !seen {
			p.add(ln, sprintf("operationOrder[%d]", k), "operation %s is not defined by an earlier operationUpdate", echo(s))
		}
		p.w.OperationOrder = append(p.w.OperationOrder, s)
	}
}

// FromWorkflow normalizes an A2E workflow, sent either as JSONL (one
// operationUpdate/beginExecution per line) or as the REST body
// {"workflow": "<jsonl>"} of POST /api/v1/workflows/execute (the text may
// be a JSON array of the messages, as the workflow executor reads it),
// into one envelope for the workflow pool:
//
//   - method "a2e.workflow.execute" (routed to WorkflowPool unless a
//     method rule says otherwise), source_protocol "a2e", details
//     workflow_format "jsonl" or "rest";
//   - task_id ← executionId (the id clients poll with
//     GET /api/v1/executions/{id}); request_id is never taken from it;
//   - params.workflow: the workflow as canonical JSONL (one compact object
//     per line, secrets stripped), params.execution_id,
//     params.operation_order, params.operations ([{"operationId",
//     "operation"}] in definition order);
//   - is_stream for JSONL (progress frames), not for the REST form.
//
// Literal secrets in operations (e.g. an ApiCall header "Authorization":
// "Bearer …") are replaced like any secret field; {"credentialRef": …}
// objects are references and are kept.
//
// Errors: ErrParse (REST body not JSON); ErrInvalidRequest (a REST body
// whose workflow is not a string); ErrInvalidParams with Error.Lines for
// structural errors (HTTP 422, A2E validation_error).
func (n *Normalizer) FromWorkflow(in Input) (*Result, error) {
	r := n.begin(in, e2a.SourceA2E, ProtocolWorkflow)
	text, format, e := workflowText(in.Body)
	if e != nil {
		return nil, e
	}
	w, lines := ParseWorkflow(text)
	if lines != nil {
		return nil, &Error{Kind: ErrInvalidParams, Protocol: ProtocolWorkflow, Method: MethodWorkflowExecute,
			Msg: sprintf("workflow has %d structural error(s)", len(lines)), Lines: lines}
	}
	env := r.newEnvelope(MethodWorkflowExecute)
	env.Provenance.Details[DetailWorkflowFormat] = format
	env.TaskID = w.ExecutionID
	env.IsStream = format == "jsonl"
	text, stripped, err := workflowJSONL(w.Lines, nil, r.n.secretRef)
	if err != nil {
		return nil, newErr(ErrInvalidParams, ProtocolWorkflow, "%v", err)
	}
	r.workflowDone = true // its secrets are removed: finish leaves the text alone
	if stripped > 0 {
		env.Provenance.Details[DetailStrippedSecrets] = stripped
	}
	ops := make([]any, len(w.Operations))
	for i, o := range w.Operations {
		ops[i] = map[string]any{"operationId": o.ID, "operation": o.Operation}
	}
	order := make([]any, len(w.OperationOrder))
	for i, o := range w.OperationOrder {
		order[i] = o
	}
	env.Params = map[string]any{
		"workflow":        text,
		"execution_id":    w.ExecutionID,
		"operation_order": order,
		"operations":      ops,
	}
	return r.finish(env, OpSubmit, false)
}

// workflowText returns the JSONL of a workflow body and its format: the
// REST form is one JSON object with a "workflow" member and no "type".
func workflowText(body []byte) (string, string, *Error) {
	if e := checkUTF8(body, ProtocolWorkflow); e != nil {
		return "", "", e
	}
	t := bytes.TrimSpace(body)
	if len(t) > 0 && t[0] == '{' {
		var m map[string]json.RawMessage
		err := json.Unmarshal(t, &m)
		switch {
		case err == nil:
			if raw, ok := m["workflow"]; ok {
				if _, hasType := m["type"]; !hasType {
					var s string
					if err := json.Unmarshal(raw, &s); err != nil {
						return "", "", newErr(ErrInvalidRequest, ProtocolWorkflow, `"workflow" must be a string of JSONL`)
					}
					return s, "rest", nil
				}
			}
		case looksLikeREST(t):
			return "", "", newErr(ErrParse, ProtocolWorkflow, "body is not valid JSON: %v", err)
		}
	}
	return string(body), "jsonl", nil
}

// looksLikeREST reports whether a body starts as the REST form
// {"workflow": …} (possibly pretty-printed over several lines).
func looksLikeREST(t []byte) bool {
	if len(t) == 0 || t[0] != '{' {
		return false
	}
	rest := bytes.TrimSpace(t[1:])
	return bytes.HasPrefix(rest, []byte(`"workflow"`))
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }
