package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/redact"
	"github.com/e2a-pipeline/pipeline/render"
)

// Compile-time checks: every renderer implements Renderer.
var (
	_ render.Renderer = (*e2aSSE)(nil)
	_ render.Renderer = (*e2aNDJSON)(nil)
	_ render.Renderer = (*e2aJSON)(nil)
)

func (*e2aSSE) PassThrough() bool    { return true }
func (*e2aNDJSON) PassThrough() bool { return true }
func (*e2aJSON) PassThrough() bool   { return true }

// e2aSSE renders E2A frames as Server-Sent Events: id: <sequence>,
// event: <response_kind>, data: <the frame as stored>.
type e2aSSE struct {
	o     *render.Output
	retry time.Duration
	intro string
}

// NewE2ASSE returns the E2A SSE renderer. retry is the reconnection delay
// announced to the client (0: none); intro is the comment written first, so
// that the client sees the stream open before the first frame.
func NewE2ASSE(o *render.Output, retry time.Duration, intro string) render.Renderer {
	return &e2aSSE{o: o, retry: retry, intro: intro}
}

func (r *e2aSSE) Start() error {
	render.SSEHead(r.o, r.retry)
	if r.intro == "" {
		r.intro = "ok"
	}
	return render.SSEComment(r.o, r.intro)
}

func (r *e2aSSE) Frame(f *render.Frame) error {
	return render.SSEEvent(r.o, render.SeqID(f), f.Kind(), f.Raw)
}

func (r *e2aSSE) Heartbeat() error { return render.SSEComment(r.o, "keep-alive") }

func (r *e2aSSE) End(err error) error {
	return endStream(r.o, err, func(body APIError) error { return render.SSEEventJSON(r.o, "", "error", body) })
}

// endStream ends an SSE or NDJSON stream that failed with err (nil: it
// writes nothing): as an HTTP error, its status and [APIError], while the
// head is not written yet, else with inStream writing the APIError after
// the frames.
func endStream(o *render.Output, err error, inStream func(body APIError) error) error {
	if err == nil {
		return nil
	}
	st, body := apiError(err)
	if !o.Started() {
		return o.WriteJSON(st, body)
	}
	return inStream(body)
}

// e2aNDJSON renders one E2A frame per line (spec §12.7). A heartbeat is an
// empty line; an error after the head is one line {"error":{…}}.
type e2aNDJSON struct{ o *render.Output }

// NewE2ANDJSON returns the E2A NDJSON renderer.
func NewE2ANDJSON(o *render.Output) render.Renderer { return &e2aNDJSON{o: o} }

func (r *e2aNDJSON) Start() error {
	render.NDJSONHead(r.o)
	return nil
}

func (r *e2aNDJSON) Frame(f *render.Frame) error { return render.WriteLine(r.o, f.Raw) }

func (r *e2aNDJSON) Heartbeat() error {
	_, err := r.o.WriteString("\n")
	return err
}

func (r *e2aNDJSON) End(err error) error {
	return endStream(r.o, err, func(body APIError) error { return render.WriteLineJSON(r.o, body) })
}

// Request states of the aggregated E2A JSON.
const (
	StatePending   = "pending"   // accepted, no frame yet
	StateRunning   = "running"   // frames, no final frame yet
	StateSucceeded = "succeeded" // final frame with status succeeded
	StateFailed    = "failed"    // final frame with status failed
	// StateInputRequired and StateAuthRequired: the final frame
	// interrupts the turn (e2a.Response.Interrupt); the task waits for
	// the client's next message.
	StateInputRequired = e2a.StateInputRequired
	StateAuthRequired  = e2a.StateAuthRequired
)

// RequestView is the aggregated E2A JSON of GET /v1/requests/{id}: the
// envelope as accepted, and the frames so far as stored (from ?from= on).
// The HTTP status is 200 when the request has ended (its final frame is
// stored; frames stored after it, by hand or by a rogue writer, are
// ignored, as the streams ignore them), 202 while it runs. State is the
// request's, whatever the resume point: with ?from= past every frame
// stored, Frames is empty and State is still running or the final frame's
// (pending: no frame at all). NextSequence is the sequence to ask for
// next: the one after the last of Frames; with none, the resume point
// while the request runs, and the one after the final frame once it has
// ended, however far past it the resume point was.
type RequestView struct {
	RequestID    string            `json:"request_id"`
	State        string            `json:"state"`
	Envelope     json.RawMessage   `json:"envelope,omitempty"`
	Frames       []json.RawMessage `json:"frames"`
	NextSequence int64             `json:"next_sequence"`
}

// e2aJSON writes a RequestView incrementally, frame by frame, so that a
// request with many frames is never held in memory.
type e2aJSON struct {
	o        *render.Output
	id       string
	envelope []byte
	final    bool
	n        int
	next     int64
	state    string
}

// NewE2AJSON returns the aggregated JSON renderer. final tells whether the
// frames to come include the final frame (status 200) or not (202);
// envelope is the stored envelope (nil when it aged out); from is the
// first sequence to come.
func NewE2AJSON(o *render.Output, requestID string, envelope []byte, final bool, from int64) render.Renderer {
	return newE2AJSON(o, requestID, envelope, final, from, "")
}

// newE2AJSON is NewE2AJSON with the state of the request when no frame is
// written ("" for pending: no frame at all): a resume point past every
// frame stored still answers the state of the request's last frame.
func newE2AJSON(o *render.Output, requestID string, envelope []byte, final bool, from int64, state string) render.Renderer {
	return &e2aJSON{o: o, id: requestID, envelope: envelope, final: final, next: from, state: state}
}

func (r *e2aJSON) Start() error {
	r.o.Header().Set("Content-Type", "application/json")
	r.o.Header().Set("Cache-Control", "no-cache")
	if r.final {
		r.o.WriteHeader(http.StatusOK)
	} else {
		r.o.WriteHeader(http.StatusAccepted)
	}
	id, _ := json.Marshal(r.id)
	buf := append([]byte(`{"request_id":`), id...)
	if len(r.envelope) > 0 {
		buf = append(buf, `,"envelope":`...)
		buf = append(buf, jsonValue(r.envelope)...)
	}
	buf = append(buf, `,"frames":[`...)
	_, err := r.o.Write(buf)
	return err
}

func (r *e2aJSON) Frame(f *render.Frame) error {
	state := StateRunning
	if f.IsFinal() {
		// Only the final frame is decoded whole, for its status; before
		// anything of it is written, so that a frame that does not decode
		// leaves the answer whole for End.
		resp, err := f.Decoded()
		if err != nil {
			return err
		}
		state = finalState(resp)
	}
	if r.n > 0 {
		if _, err := r.o.WriteString(","); err != nil {
			return err
		}
	}
	r.n++
	r.next = f.Sequence() + 1
	r.state = state
	_, err := r.o.Write(jsonValue(f.Raw))
	return err
}

// finalState is the state of a request whose final frame is resp.
func finalState(resp *e2a.Response) string {
	if resp.Status == e2a.StatusFailed {
		return StateFailed
	}
	if st, _, ok := resp.Interrupt(); ok {
		return st
	}
	return StateSucceeded
}

// jsonValue returns stored bytes as one JSON value on one line: the JSON
// itself, or, for bytes that are not JSON (an integrator may publish
// anything on the subjects), a JSON string of them, so the answer stays
// valid JSON.
func jsonValue(raw []byte) []byte {
	if json.Valid(raw) {
		return render.CompactLine(raw)
	}
	b, _ := json.Marshal(string(raw))
	return b
}

func (r *e2aJSON) Heartbeat() error { return nil }

func (r *e2aJSON) End(err error) error {
	if err != nil && !r.o.Started() {
		st, body := apiError(err)
		return r.o.WriteJSON(st, body)
	}
	state := r.state
	if state == "" {
		state = StatePending
	}
	tail := `],"state":"` + state + `","next_sequence":` + strconv.FormatInt(r.next, 10)
	if err != nil {
		_, body := apiError(err)
		b, _ := json.Marshal(body.Error)
		tail += `,"error":` + string(b)
	}
	_, werr := r.o.WriteString(tail + "}\n")
	return werr
}

// projecting re-encodes each frame with its L3 projections filled (the
// projector of [WithProjections]) before the wrapped E2A renderer writes
// it.
type projecting struct {
	render.Renderer
	fill func(*e2a.Response) *e2a.Response
}

func (p projecting) Frame(f *render.Frame) error {
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	r := p.fill(resp)
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return p.Renderer.Frame(&render.Frame{Response: r, Raw: raw, StreamSeq: f.StreamSeq})
}

func maybeProjecting(r *http.Request, rend render.Renderer, fill func(*e2a.Response) *e2a.Response) render.Renderer {
	if fill != nil && IsTrue(QueryValue(r, "projections")) {
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
type redacting struct{ render.Renderer }

func (p redacting) Frame(f *render.Frame) error {
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
	return p.Renderer.Frame(f.WithRaw(raw))
}
