package a2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// Name is the protocol's name in the registry and in metric labels.
const Name = "a2e"

// Path is the endpoint of the front door: POST only.
const Path = "/a2e"

// MaxLines bounds the messages of one POST /a2e body.
const MaxLines = 64

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
// streamed before the next message is read. A malformed line gets an
// error line and the others still run; a body that is not valid UTF-8 is
// refused whole (400, parse_error), and so is a body sent with an
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
		refuse(w, host.Refusal{Status: http.StatusRequestEntityTooLarge, Code: normalizer.A2ECodeInvalidRequest,
			Message: "body exceeds " + strconv.FormatInt(maxBody, 10) + " bytes"})
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
	sc := bufio.NewScanner(&body)
	sc.Buffer(make([]byte, 0, 64<<10), int(maxBody)+1)
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if n++; n > MaxLines {
			lw.line(NewError("", normalizer.A2ECodeInvalidRequest, "more than "+strconv.Itoa(MaxLines)+" messages in one body", false, nil))
			return
		}
		if !d.message(lw, r, c, line) {
			return
		}
	}
	if n == 0 {
		// (A body of messages that need no answer, pong or events sent
		// back, is answered with nothing.)
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

// message answers one message; it returns false when the answer ends
// (shutdown, client gone).
func (d *frontDoor) message(lw *lineWriter, r *http.Request, c host.Caller, line []byte) bool {
	norm := d.h.Normalizer()
	res, err := norm.FromA2E(c.Input(r, line, r.URL.Query().Get("agent")))
	if err != nil {
		reqID := ""
		if ne, ok := err.(*normalizer.Error); ok {
			reqID = ne.ReqID
		}
		method := ""
		if ne, ok := err.(*normalizer.Error); ok {
			method = ne.Method
		}
		lw.line(ofCapability(NewError(reqID, normalizer.A2ECode(err), egress.ClientMessage(err), false, nil), method))
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
	sub, err := c.Submit(r.Context(), host.Submission{Pool: res.Pool, Envelope: env})
	switch {
	case errors.Is(err, host.ErrUnknownPool):
		lw.line(ofCapability(NewError(reqID, "unknown_agent", egress.ClientMessage(err), false, nil), env.Method))
		return r.Context().Err() == nil
	case errors.Is(err, host.ErrInvalidPool):
		// Not a pool name at all: no retry can succeed (E2A: 400 invalid_agent).
		lw.line(ofCapability(NewError(reqID, "invalid_agent", egress.ClientMessage(err), false, nil), env.Method))
		return r.Context().Err() == nil
	case errors.Is(err, host.ErrConflict):
		lw.line(ofCapability(NewError(reqID, "conflict", "the request id (Idempotency-Key) is already in use; choose another", false, nil), env.Method))
		return r.Context().Err() == nil
	case errors.Is(err, host.ErrTooLarge):
		lw.line(ofCapability(NewError(reqID, "body_too_large", egress.ClientMessage(err), false, map[string]any{"http_status": http.StatusRequestEntityTooLarge}), env.Method))
		return r.Context().Err() == nil
	case err != nil:
		lw.line(ofCapability(NewError(reqID, "unavailable", "the pipeline could not accept the request; retry later", true, nil), env.Method))
		return r.Context().Err() == nil
	}
	defer sub.Done()
	d.h.Serve(lw, r, sub.RequestID, Format, func(o *render.Output) render.Renderer {
		return NewRenderer(o, Params{ReqID: reqID, ReqType: env.Method})
	})
	// Serve leaves the end of the stream buffered for the end of the
	// response; the next message's answer may take a while.
	lw.Flush()
	return r.Context().Err() == nil
}
