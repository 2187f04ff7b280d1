package a2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// Name is the protocol's name in the registry and in metric labels.
const Name = "a2e"

// Path is the endpoint of the front door: POST only.
const Path = "/a2e"

// MaxLines bounds the messages of one POST /a2e body.
const MaxLines = 64

// Error codes of the front door's own refusals (E2A's words for them).
const (
	codeBodyTooLarge = "body_too_large"
	codeReadError    = "read_error"
)

// Routes are the HTTP routes of the front door over h, for the registry:
// POST /a2e.
func Routes(h host.Host) []host.Route {
	return []host.Route{{Method: http.MethodPost, Path: Path, Handler: NewHandler(h)}}
}

// NewHandler returns the handler of POST /a2e over h: an NDJSON body of A2E
// messages answered as one NDJSON stream, message by message in order.
// handshake/req → handshake/resp, ping → pong, shutdown ends the answer;
// any other type is a request: published to its pool, then its
// invoke/event lines and the response (or error, with retryable) are
// streamed before the next message is read (a workflow execution,
// a2e.workflow.execute, is indexed by its executionId before its publish,
// as the REST API's: submission; an executionId naming a task of the
// caller's that is not a workflow execution is answered a conflict error
// line, not retryable, nothing published). A malformed line gets an
// error line naming it ("line N: …", detail line, 1-based, blank lines
// counted) and the others still run; an empty body (no message, blank
// lines only) is refused (400, invalid_request); a body that is not valid UTF-8 is
// refused whole (400, parse_error), so is a body over the host's limit
// (413, body_too_large, not retryable; 400 read_error, retryable, for a
// body that cannot be read), so is a body holding a workflow
// (a2e.workflow.execute) larger than the workflow executor takes,
// measured as the worker measures it, whatever the body's size (413,
// body_too_large, not retryable, in the REST API's words; it was published,
// then failed by the worker), and so is a body sent with an
// Idempotency-Key that holds more than one message submitting work (400,
// invalid_request, not retryable): the key is the id of one request.
func NewHandler(h host.Host) http.Handler { return &frontDoor{h: h} }

// frontDoor serves POST /a2e.
type frontDoor struct{ h host.Host }

var _ http.Handler = (*frontDoor)(nil)

// lineWriter is the one NDJSON answer of a POST /a2e: every message's
// answer (local replies, then egress's invoke/event lines and response)
// goes to it in order; the header is written once.
type lineWriter struct {
	http.ResponseWriter
	started bool
	submits int // messages of the body that submitted work
}

func (w *lineWriter) WriteHeader(code int) {
	if w.started {
		return
	}
	w.started = true
	w.ResponseWriter.Header().Set("Content-Type", "application/x-ndjson")
	w.ResponseWriter.WriteHeader(code)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *lineWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// FlushError is Flush with the flush's error (http.ResponseController
// takes Flush alone for one that cannot fail: a stream cut off as a slow
// client during a flush was counted a client gone).
func (w *lineWriter) FlushError() error { return http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the connection.
func (w *lineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// line writes one A2E message as a compact JSON line.
func (w *lineWriter) line(m Message) {
	b, _ := json.Marshal(m)
	_, _ = w.Write(append(b, '\n'))
	w.Flush()
}

// refuse writes a refusal as one A2E error line with the HTTP status, its
// wait as Retry-After too unless the answer has one (the gate's).
func refuse(w http.ResponseWriter, f host.Refusal) {
	f.SetRetryAfter(w.Header())
	lw := &lineWriter{ResponseWriter: w}
	lw.WriteHeader(f.Status)
	lw.line(refusalLine("", f))
}

// refusalLine is f as the A2E error answering req_id reqID: detail has
// its http_status, its data as limit, and its wait as retry_after (whole
// seconds, rounded up; A2EError has no field of its own for it, and a
// line after the answer started can carry it nowhere else).
func refusalLine(reqID string, f host.Refusal) Message {
	detail := map[string]any{"http_status": f.Status}
	if f.Data != nil {
		detail["limit"] = f.Data
	}
	if s := f.RetryAfterSeconds(); s > 0 {
		detail["retry_after"] = s
	}
	return NewError(reqID, f.Code, f.Message, f.Retryable, detail)
}

var _ host.Refuse = refuse

// ofCapability names in error line m the capability namespace of the
// message type method that failed (capabilityOf, as the renderer's error
// lines name it), as an A2EError says which capability failed.
func ofCapability(m Message, method string) Message {
	m.CapabilityName = capabilityOf(method)
	return m
}

func (d *frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := d.h.Admit(w, r, Name, refuse)
	if !ok {
		return
	}
	// The answer is one stream, whatever the messages: it takes one of
	// the caller's stream slots.
	release, ok := c.StreamSlot(w, refuse)
	if !ok {
		return
	}
	defer release()
	// A resume point (Last-Event-ID, ?from=) applies to each call's
	// answer; a malformed one is refused before any line runs, as E2A
	// refuses it before its publish: the calls would run and each be
	// answered bad_request.
	if _, err := egress.ResumePoint(r); err != nil {
		refuse(w, host.Refusal{Status: http.StatusBadRequest, Code: normalizer.A2ECodeInvalidRequest, Message: egress.ClientMessage(err)})
		return
	}
	maxBody := d.h.MaxBody()
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		// Over the limit: body_too_large, as the door's other 413s (a
		// message over the server's max_payload, a workflow too large)
		// and E2A's; any other read error is not the body's size.
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			refuse(w, host.Refusal{Status: http.StatusRequestEntityTooLarge, Code: codeBodyTooLarge,
				Message: "body exceeds " + strconv.FormatInt(maxBody, 10) + " bytes"})
		} else {
			refuse(w, host.Refusal{Status: http.StatusBadRequest, Code: codeReadError,
				Message: "could not read the request body", Retryable: true})
		}
		return
	}
	if !utf8.Valid(body.Bytes()) {
		// Refused whole, before any line runs: encoding/json would replace
		// the bad bytes with U+FFFD.
		refuse(w, host.Refusal{Status: http.StatusBadRequest, Code: normalizer.A2ECodeParseError,
			Message: "the body is not valid UTF-8"})
		return
	}
	if n := d.keyedSubmissions(r, c, body.Bytes()); n > 1 {
		// An Idempotency-Key is the id of one request (it becomes its
		// request id): given to two, the second would be a duplicate of
		// the first and answered with the first's frames. Refused whole,
		// before any line runs.
		refuse(w, host.Refusal{Status: http.StatusBadRequest, Code: normalizer.A2ECodeInvalidRequest,
			Message: "the Idempotency-Key header names one request, and the body holds " + strconv.Itoa(n) +
				" messages that submit work: send them without the header, or one per POST"})
		return
	}
	lw := &lineWriter{ResponseWriter: w}
	if m, ok := d.workflowTooLarge(r, c, body.Bytes()); ok {
		// Refused whole, before any line runs, as the REST door refuses
		// it before publishing: it was published, then failed by the
		// workflow worker (an accepted request refused later).
		lw.WriteHeader(http.StatusRequestEntityTooLarge)
		lw.line(m)
		return
	}
	sc := bufio.NewScanner(&body)
	sc.Buffer(make([]byte, 0, 64<<10), int(maxBody)+1)
	n, ln := 0, 0 // messages, lines (1-based, blank ones counted)
	for sc.Scan() {
		ln++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if n++; n > MaxLines {
			lw.line(NewError("", normalizer.A2ECodeInvalidRequest, "more than "+strconv.Itoa(MaxLines)+" messages in one body", false, nil))
			return
		}
		if !d.message(lw, r, c, line, ln) {
			return
		}
	}
	if n == 0 {
		// No message at all: refused whole (400), as the body's other
		// refusals before any line runs; it was a 200. (A body of
		// messages that need no answer, pong or events sent back, is
		// answered with nothing, 200.)
		lw.WriteHeader(http.StatusBadRequest)
		lw.line(NewError("", normalizer.A2ECodeInvalidRequest, "empty body: send one A2E message per line", false, nil))
	}
}

// keyedSubmissions returns, when the caller names the request id (the
// Idempotency-Key header: the host's input carries a RequestID), how many
// messages of body would be submitted as requests (every line the
// normalizer accepts that is not answered locally, up to MaxLines and the
// first shutdown); 0 when the caller names none. Nothing is recorded: ids
// the normalizer makes here are thrown away.
func (d *frontDoor) keyedSubmissions(r *http.Request, c host.Caller, body []byte) int {
	agent := r.URL.Query().Get("agent")
	norm := d.h.Normalizer()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), len(body)+1)
	lines, n := 0, 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if lines++; lines > MaxLines {
			break
		}
		in := c.Input(r, line, agent)
		if in.RequestID == "" {
			return 0
		}
		in.NewID = nil
		res, err := norm.FromA2E(in)
		if err != nil {
			continue
		}
		if res.Op != normalizer.OpLocal {
			n++
			continue
		}
		if res.Envelope.Method == "shutdown" {
			break
		}
	}
	return n
}

// workflowTooLarge returns the refusal of a body holding a workflow
// execution (type a2e.workflow.execute) whose workflow is larger than the
// workflow executor takes (workflow.MaxWorkflowBytes), measured as the
// worker measures it (the length of workflow.WorkflowText of the envelope
// published: an array of messages written again, a string as the
// normalizer rewrites it, U+2028 written \u2028, secrets replaced), in
// the REST door's words (workflow.TooLargeMessage): 413, body_too_large,
// not retryable, detail {http_status, limit, workflow_bytes}. Every
// workflow execution is measured, whatever its size; no other message is
// read twice (mayBeWorkflow).
func (d *frontDoor) workflowTooLarge(r *http.Request, c host.Caller, body []byte) (Message, bool) {
	if !mentionsWorkflow(body) {
		return Message{}, false
	}
	agent := r.URL.Query().Get("agent")
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, len(body)+1)
	for lines := 0; sc.Scan() && lines < MaxLines; {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		lines++
		if !mayBeWorkflow(line) {
			continue
		}
		res, err := d.h.Normalizer().FromA2E(c.Input(r, line, agent))
		if err != nil || res.Envelope.Method != normalizer.MethodWorkflowExecute {
			continue
		}
		text, err := workflow.WorkflowText(res.Envelope)
		if err != nil || len(text) <= workflow.MaxWorkflowBytes {
			continue
		}
		reqID := res.Envelope.CorrelationID
		if reqID == "" {
			reqID = res.Envelope.MessageID
		}
		return ofCapability(NewError(reqID, codeBodyTooLarge, workflow.TooLargeMessage(len(text)), false, map[string]any{
			"http_status": http.StatusRequestEntityTooLarge, "limit": workflow.MaxWorkflowBytes, "workflow_bytes": len(text)}),
			res.Envelope.Method), true
	}
	return Message{}, false
}

var workflowType, unicodeEscape = []byte(normalizer.MethodWorkflowExecute), []byte(`\u`)

// mentionsWorkflow reports whether b may hold a message of type
// a2e.workflow.execute: a JSON string holds that type only spelled out or
// with a \u escape.
func mentionsWorkflow(b []byte) bool {
	return bytes.Contains(b, workflowType) || bytes.Contains(b, unicodeEscape)
}

// mayBeWorkflow reports whether line, one message, may be a workflow
// execution, which the normalizer then decides: it mentions the type
// (mentionsWorkflow) and its member "type" is that type (its top-level
// members read, not decoded), or it is no JSON object.
func mayBeWorkflow(line []byte) bool {
	if !mentionsWorkflow(line) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return true
	}
	var typ string
	return json.Unmarshal(m["type"], &typ) == nil && typ == normalizer.MethodWorkflowExecute
}

// message answers one message, line ln of the body (1-based); it returns
// false when the answer ends (shutdown, client gone).
func (d *frontDoor) message(lw *lineWriter, r *http.Request, c host.Caller, line []byte, ln int) bool {
	norm := d.h.Normalizer()
	res, err := norm.FromA2E(c.Input(r, line, r.URL.Query().Get("agent")))
	if err != nil {
		// Which line and why: a body holds up to MaxLines messages.
		reqID, method := "", ""
		if ne, ok := err.(*normalizer.Error); ok {
			reqID, method = ne.ReqID, ne.Method
		}
		lw.line(ofCapability(NewError(reqID, normalizer.A2ECode(err), "line "+strconv.Itoa(ln)+": "+egress.ClientMessage(err), false,
			map[string]any{"line": ln}), method))
		return true
	}
	env := res.Envelope
	reqID := env.CorrelationID
	if reqID == "" {
		reqID = env.MessageID
	}
	if res.Op == normalizer.OpLocal {
		switch env.Method {
		case "handshake/req":
			m := NewMessage("handshake/resp", reqID)
			m.Result = map[string]any{"accepted": true, "server": "e2a-pipeline", "version": d.h.Version(),
				"types": norm.A2ETypes().Types()}
			lw.line(m)
		case "ping":
			lw.line(NewMessage("pong", reqID))
		case "shutdown":
			return false
		default:
			// pong, handshake/resp, invoke/event, error from a client:
			// nothing to answer.
		}
		return true
	}
	// The gate charged the body's first request; each further one is
	// charged too, so a body of many messages cannot multiply the
	// principal's rate limit. Over it, the rest of the body is not run.
	if lw.submits++; lw.submits > 1 {
		if f := c.Charge(r.Context(), Name, 1); f != nil {
			lw.line(ofCapability(refusalLine(reqID, *f), env.Method))
			return false
		}
	}
	sb, undoDuplicate := d.submission(res)
	sub, err := c.Submit(r.Context(), sb)
	switch {
	case errors.Is(err, host.ErrUnknownPool):
		lw.line(ofCapability(NewError(reqID, "unknown_agent", egress.ClientMessage(err), false, nil), env.Method))
		return r.Context().Err() == nil
	case errors.Is(err, host.ErrInvalidPool):
		// Not a pool name at all: no retry can succeed (E2A: 400 invalid_agent).
		lw.line(ofCapability(NewError(reqID, "invalid_agent", egress.ClientMessage(err), false, nil), env.Method))
		return r.Context().Err() == nil
	case errors.Is(err, workflow.ErrNotExecution):
		// An executionId naming a task of the caller's that is not a
		// workflow execution (IndexExecution, before the publish).
		lw.line(ofCapability(NewError(reqID, "conflict", workflow.NotExecutionMessage, false, nil), env.Method))
		return r.Context().Err() == nil
	case errors.Is(err, host.ErrConflict):
		lw.line(ofCapability(NewError(reqID, "conflict", "the request id (Idempotency-Key) is already in use; choose another", false, nil), env.Method))
		return r.Context().Err() == nil
	case errors.Is(err, host.ErrTooLarge):
		lw.line(ofCapability(NewError(reqID, codeBodyTooLarge, egress.ClientMessage(err), false, map[string]any{"http_status": http.StatusRequestEntityTooLarge}), env.Method))
		return r.Context().Err() == nil
	case err != nil:
		lw.line(ofCapability(NewError(reqID, "unavailable", "the pipeline could not accept the request; retry later", true, nil), env.Method))
		return r.Context().Err() == nil
	}
	defer sub.Done()
	if sub.Duplicate {
		undoDuplicate(r.Context())
	}
	d.h.Serve(lw, sub.Answering(r), sub.RequestID, Format, func(o *render.Output) render.Renderer {
		return NewRenderer(o, Params{ReqID: reqID, ReqType: env.Method})
	})
	// Serve leaves the end of the stream buffered for the end of the
	// response; the next message's answer may take a while.
	lw.Flush()
	return r.Context().Err() == nil
}

// submission is the submission of res, a request; for a workflow
// execution (a2e.workflow.execute) with an executionId (its envelope's
// task_id) on a host that indexes executions (workflow.ExecutionIndex),
// its executionId is indexed just before the publish (Before), as the REST
// API's is, and taken out again if the publish fails: never an accepted
// execution GET /api/v1/executions/{executionId} does not find.
// undoDuplicate takes it out of the index for a submission that turned out
// to be a duplicate (an Idempotency-Key used before: answered as the first
// request, which indexed its own executionId); it does nothing for any
// other.
func (d *frontDoor) submission(res *normalizer.Result) (sub host.Submission, undoDuplicate func(context.Context)) {
	sub = host.Submission{Pool: res.Pool, Envelope: res.Envelope}
	ix, ok := d.h.(workflow.ExecutionIndex)
	if !ok || res.Envelope.Method != normalizer.MethodWorkflowExecute || res.Envelope.TaskID == "" {
		return sub, func(context.Context) {}
	}
	var undo func(context.Context) error
	sub.Before = func(ctx context.Context) (func(context.Context) error, error) {
		u, err := ix.IndexExecution(ctx, res.Pool, res.Envelope)
		undo = u
		return u, err
	}
	return sub, func(ctx context.Context) {
		if undo == nil {
			return
		}
		// (even when the client has gone; the host logs a failure)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = undo(ctx)
	}
}
