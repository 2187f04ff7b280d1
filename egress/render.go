package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/redact"
)

// now is the clock of the few values not taken from frames (the submitted
// status-update of a stream without a given time); tests fix it.
var now = time.Now

// Renderer turns the frames of one request into one output format on one
// HTTP response. The [Service] drives it: Start once the request is known to
// exist, Frame for each frame in order, Heartbeat while idle, End exactly
// once. A renderer writes to its [Output] and never flushes: the driver
// flushes when no frame is waiting, after heartbeats and at the end.
//
// End(nil) follows the final frame. End(err) ends early: when Start was not
// called (unknown request, bad resume point) the renderer writes the whole
// error response in its protocol's shape and status; after Start it writes
// the error in-band when its format has a way to say it.
type Renderer interface {
	Start() error
	Frame(f *Frame) error
	Heartbeat() error
	End(err error) error
}

// Output is the response a renderer writes to: an http.ResponseWriter with
// a write deadline (a client that stops reading is cut off after the write
// timeout instead of holding the reader forever) and a record of whether
// the head was written.
type Output struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	armed   time.Time
	started bool
	pending bool // written since the last flush
	// endsResponse: the HTTP handler returns when the stream ends, so a
	// completed stream's end is left to net/http, which sends it with the
	// response's last chunk in one write (Service.serve and the E2A
	// stream endpoint set it; ServeFrom, over stdio, does not).
	endsResponse bool
	// headHeld: the head waits for the first frame (Service.Stream).
	headHeld bool
	err      error
	// scratch is reused to assemble what one Write sends (an event, a
	// line): net/http copies what it is given, so the next can reuse it.
	scratch []byte
}

// scratchBuf returns an empty buffer with room for n bytes, to assemble what
// the next Write sends; hand it back with reuse after that Write. It saves an
// allocation per event on a long stream. The buffer is o's: one Write at a
// time, from the goroutine writing the response.
func (o *Output) scratchBuf(n int) []byte {
	b := o.scratch[:0]
	o.scratch = nil
	if cap(b) < n {
		return make([]byte, 0, max(n, 2*cap(b)))
	}
	return b
}

// reuse hands a buffer from scratchBuf back once it was written. Buffers
// that grew beyond MaxScratch are dropped (one large event keeps no memory).
func (o *Output) reuse(b []byte) {
	if cap(b) <= MaxScratch {
		o.scratch = b[:0]
	}
}

// MaxScratch bounds the buffer a renderer or an Output keeps between the
// events it writes (larger ones are not kept).
const MaxScratch = 64 << 10

// KeepScratch is what a renderer keeps of b, a buffer it assembled an
// event in once the event is written: b emptied, or nil when it grew
// beyond MaxScratch.
func KeepScratch(b []byte) []byte {
	if cap(b) <= MaxScratch {
		return b[:0]
	}
	return nil
}

// FrameEvents writes evs, the events of frame f, with write, giving the
// last one the frame's SSE id (SeqID: Last-Event-ID resumes after the
// frame) and the others none.
func FrameEvents[E any](f *Frame, evs []E, write func(id string, ev E) error) error {
	for i, ev := range evs {
		id := ""
		if i == len(evs)-1 {
			id = SeqID(f)
		}
		if err := write(id, ev); err != nil {
			return err
		}
	}
	return nil
}

// NewOutput wraps w. writeTimeout bounds every write and flush (0: none).
func NewOutput(w http.ResponseWriter, writeTimeout time.Duration) *Output {
	return &Output{w: w, rc: http.NewResponseController(w), timeout: writeTimeout}
}

// Header returns the response headers.
func (o *Output) Header() http.Header { return o.w.Header() }

// Started reports whether the status line was written.
func (o *Output) Started() bool { return o.started }

// WriteHeader writes the status line once.
func (o *Output) WriteHeader(code int) {
	if o.started {
		return
	}
	o.started = true
	o.pending = true
	o.w.WriteHeader(code)
}

func (o *Output) arm() {
	if o.timeout <= 0 {
		return
	}
	now := time.Now()
	if now.Sub(o.armed) < o.timeout/4 {
		return
	}
	o.armed = now
	_ = o.rc.SetWriteDeadline(now.Add(o.timeout))
}

// Write writes p to the response (status 200 if none was written).
func (o *Output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	if !o.started {
		o.WriteHeader(http.StatusOK)
	}
	o.arm()
	o.pending = true
	n, err := o.w.Write(p)
	if err != nil {
		o.err = err
	}
	return n, err
}

// WriteString writes s.
func (o *Output) WriteString(s string) (int, error) { return o.Write([]byte(s)) }

// Flush sends what is buffered to the client.
func (o *Output) Flush() error {
	if o.err != nil {
		return o.err
	}
	if !o.started {
		// net/http would send an implicit 200; record it.
		o.WriteHeader(http.StatusOK)
	}
	o.arm()
	o.pending = false
	if err := o.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		o.err = err
		return err
	}
	return nil
}

// flushPending flushes what was written since the last flush, if anything.
func (o *Output) flushPending() error {
	if !o.pending {
		return o.err
	}
	return o.Flush()
}

var _ waitHooks = (*Output)(nil)

// beforeWait flushes what is pending, unless the head is held for the
// first frame.
func (o *Output) beforeWait() error {
	if o.headHeld {
		return nil
	}
	return o.flushPending()
}

// headHoldOver sends the held head: the first frame is late.
func (o *Output) headHoldOver() error {
	o.headHeld = false
	return o.flushPending()
}

// Err returns the first write error.
func (o *Output) Err() error { return o.err }

// slow reports whether the write error is the write deadline passing.
func (o *Output) slow() bool { return o.err != nil && errors.Is(o.err, os.ErrDeadlineExceeded) }

// writeJSON writes a complete JSON response.
func (o *Output) writeJSON(status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	o.Header().Set("Content-Type", "application/json")
	o.WriteHeader(status)
	b = append(b, '\n')
	_, err = o.Write(b)
	return err
}

// APIError is the JSON error body of the E2A HTTP surface:
// {"error":{"code":"…","message":"…","retryable":false}}, the shape ingress
// answers too.
type APIError struct {
	Error APIErrorBody `json:"error"`
}

// APIErrorBody is the inner object of [APIError]. Retryable says whether the
// same call may succeed later (unavailable, timeout).
type APIErrorBody struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// Error codes of the E2A HTTP surface and the HTTP status each maps to.
const (
	CodeNotFound     = "not_found"     // 404
	CodeBadRequest   = "bad_request"   // 400
	CodeTimeout      = "timeout"       // 504
	CodeInvalidFrame = "invalid_frame" // 502
	CodeUnavailable  = "unavailable"   // 503
	CodeCancelled    = "cancelled"     // 499 (client went away)
	CodeInternal     = "internal"      // 500
	CodeNotAccept    = "not_acceptable"
	// CodeNotCancelable: the request already ended (409).
	CodeNotCancelable = "not_cancelable"
)

// Classify maps an error of this package (or of NATS) to an HTTP status and
// an error code. Ingress uses it to answer in the same shape.
func Classify(err error) (status int, code string) {
	var ne interface{ Timeout() bool }
	switch {
	case err == nil:
		return http.StatusOK, ""
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, ErrNotCancelable):
		return http.StatusConflict, CodeNotCancelable
	case errors.Is(err, ErrWaitTimeout):
		return http.StatusGatewayTimeout, CodeTimeout
	case errors.Is(err, ErrInvalidFrame):
		return http.StatusBadGateway, CodeInvalidFrame
	case errors.Is(err, context.Canceled):
		return 499, CodeCancelled
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, CodeTimeout
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrDisconnected):
		return http.StatusServiceUnavailable, CodeUnavailable
	case errors.As(err, &ne) && ne.Timeout():
		return http.StatusServiceUnavailable, CodeUnavailable
	}
	return http.StatusInternalServerError, CodeInternal
}

func apiError(err error) (int, APIError) {
	st, code := Classify(err)
	msg := err.Error()
	if code == CodeNotFound {
		msg = NotFoundMessage // one wording, whatever the cause
	}
	return st, APIError{Error: APIErrorBody{Code: code, Message: msg,
		Retryable: code == CodeUnavailable || code == CodeTimeout}}
}

// NotFoundMessage is the message of every 404 of the E2A HTTP surface (the
// console's included), for an unknown request and for another principal's.
const NotFoundMessage = "request not found"

// WriteError writes err as a JSON error response in the E2A shape.
func WriteError(w http.ResponseWriter, err error) {
	st, body := apiError(err)
	o := NewOutput(w, 0)
	_ = o.writeJSON(st, body)
}

// compactLine returns raw JSON on one line: raw itself when it holds no line
// break (the common case: frames are written compact), a compacted copy
// otherwise.
func compactLine(raw []byte) []byte {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		// Not JSON: keep it on one line anyway.
		return bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r"), nil), []byte("\n"), []byte(" "))
	}
	return b.Bytes()
}

// sse writes Server-Sent Events.
type sse struct{ o *Output }

func (s sse) head(retry time.Duration) {
	h := s.o.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.o.WriteHeader(http.StatusOK)
	if retry > 0 {
		s.o.WriteString("retry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\n")
	}
}

func (s sse) comment(text string) error {
	_, err := s.o.WriteString(": " + text + "\n\n")
	return err
}

// event writes one event; id and event are omitted when empty. data must be
// one line of JSON. A line break in id or event (an E2A event is named
// after the frame's response_kind, which an integrator may write with
// "\n" escapes) is written as a space: it would end the field and let the
// frame write fields and events of its own into the stream.
func (s sse) event(id, event string, data []byte) error {
	id, event = sseField(id), sseField(event)
	buf := s.o.scratchBuf(len(data) + len(id) + len(event) + 24)
	if id != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, id...)
		buf = append(buf, '\n')
	}
	if event != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, event...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, compactLine(data)...)
	buf = append(buf, "\n\n"...)
	_, err := s.o.Write(buf)
	s.o.reuse(buf)
	return err
}

// sseField returns v with its line breaks (CR, LF) as spaces.
func sseField(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, v)
}

func (s sse) eventJSON(id, event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.event(id, event, b)
}

func seqID(f *Frame) string { return strconv.FormatInt(f.sequence(), 10) }

// SeqID is the SSE event id of a frame: its sequence, in decimal (what a
// client resumes from with Last-Event-ID).
func SeqID(f *Frame) string { return seqID(f) }

// SSEHead writes the head of an SSE response: 200, text/event-stream, no
// caching or proxy buffering, and the retry interval when retry > 0.
func SSEHead(o *Output, retry time.Duration) { sse{o}.head(retry) }

// SSEComment writes an SSE comment (": text").
func SSEComment(o *Output, text string) error { return sse{o}.comment(text) }

// SSEEvent writes one SSE event; id and event are omitted when empty, data
// is one line of JSON.
func SSEEvent(o *Output, id, event string, data []byte) error { return sse{o}.event(id, event, data) }

// SSEEventJSON writes one SSE event whose data is v in JSON.
func SSEEventJSON(o *Output, id, event string, v any) error { return sse{o}.eventJSON(id, event, v) }

// SSEEndEvent writes a stream's last event, v in JSON (its error), opening
// the SSE response first when nothing was written yet: what a renderer's
// End writes for a stream that failed before or after it started.
func SSEEndEvent(o *Output, event string, v any) error {
	if !o.Started() {
		SSEHead(o, 0)
	}
	return SSEEventJSON(o, "", event, v)
}

// WriteLine writes b, one JSON value, as one compact line (an NDJSON
// record).
func WriteLine(o *Output, b []byte) error { return writeLine(o, b) }

// NDJSONHead writes the head of an NDJSON response: 200,
// application/x-ndjson, no caching or proxy buffering.
func NDJSONHead(o *Output) {
	h := o.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	o.WriteHeader(http.StatusOK)
}

func writeLine(o *Output, b []byte) error {
	b = compactLine(b)
	buf := o.scratchBuf(len(b) + 1)
	buf = append(append(buf, b...), '\n')
	_, err := o.Write(buf)
	o.reuse(buf)
	return err
}

// WriteLineJSON writes v as one compact JSON line (an NDJSON record).
func WriteLineJSON(o *Output, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeLine(o, b)
}

// projecting re-encodes each frame with its L3 projections filled (the
// projector of [WithProjections]) before the wrapped E2A renderer writes
// it.
type projecting struct {
	Renderer
	fill func(*e2a.Response) *e2a.Response
}

func (p projecting) Frame(f *Frame) error {
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	r := p.fill(resp)
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return p.Renderer.Frame(&Frame{Response: r, Raw: raw, StreamSeq: f.StreamSeq})
}

func maybeProjecting(r *http.Request, rend Renderer, fill func(*e2a.Response) *e2a.Response) Renderer {
	if fill != nil && isTrue(r.URL.Query().Get("projections")) {
		rend = projecting{rend, fill}
	}
	if redactingFrames(r.Context()) {
		rend = redacting{rend}
	}
	return rend
}

type redactKey struct{}

// RedactFrames returns ctx marked so that the E2A streams served under it
// replace the value of every secret-named key of each frame (package redact,
// the rule the normalizer and the logger use). The console serves its
// streams so; API clients get frames as stored.
func RedactFrames(ctx context.Context) context.Context {
	return context.WithValue(ctx, redactKey{}, true)
}

func redactingFrames(ctx context.Context) bool {
	v, _ := ctx.Value(redactKey{}).(bool)
	return v
}

// redacting re-encodes each frame with its secrets replaced before the
// wrapped E2A renderer writes it; frames without any pass unchanged.
type redacting struct{ Renderer }

func (p redacting) Frame(f *Frame) error {
	dec := json.NewDecoder(bytes.NewReader(f.Raw))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil || redact.Redact(m, nil) == 0 {
		return p.Renderer.Frame(f)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// Not f.text: what the head scan kept are views of the unredacted bytes.
	return p.Renderer.Frame(&Frame{Raw: raw, StreamSeq: f.StreamSeq, seq: f.sequence(), final: f.isFinal(), rkind: f.kind()})
}
