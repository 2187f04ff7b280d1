package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Record kinds.
const (
	// KindRequest: the envelope of a request as stored.
	KindRequest = "request"
	// KindFrame: one response frame as stored: a stored message holding a
	// burst of frames (header E2A-Frames) gives one record per frame.
	KindFrame = "frame"
	// KindSummary: the end of a request's records, with the result of the
	// invariant checks.
	KindSummary = "summary"
	// KindAccepted: a request `e2a publish` published (its PubAck).
	KindAccepted = "accepted"
)

// Request states in a Summary.
const (
	// StateComplete: the request has its final frame.
	StateComplete = "complete"
	// StateIncomplete: frames without a final one (still running, or
	// never closed: see DESIGN guarantee 3).
	StateIncomplete = "incomplete"
	// StateNoFrames: the envelope is stored but no frame was found.
	StateNoFrames = "no_frames"
)

// Record is one line of the output of replay, tail and publish.
type Record struct {
	Kind      string `json:"kind"`
	RequestID string `json:"request_id"`
	// Pool is the agent pool of the request (from its subject).
	Pool string `json:"pool,omitempty"`
	// Stream is the stream the message was read from; StreamSeq its
	// sequence there; Time when that stream stored it (on KindAccepted,
	// which a PubAck does not time: when the publisher got the PubAck,
	// by its own clock). The frames of a burst share them (and Subject,
	// Origin and Headers): see Burst.
	Stream    string `json:"stream,omitempty"`
	StreamSeq uint64 `json:"stream_seq,omitempty"`
	Time      string `json:"time,omitempty"`
	// Subject is the subject the message was published on (for messages
	// read from E2A_AUDIT, the original subject).
	Subject string `json:"subject,omitempty"`
	// Origin, for a message read from E2A_AUDIT, is "<stream> <sequence>"
	// of the original message.
	Origin string `json:"origin,omitempty"`
	// Sequence is the frame sequence (frames only).
	Sequence *int64 `json:"sequence,omitempty"`
	// Burst places the frame in the stored message holding it, when that
	// message holds several frames (frames only; nil for a message of one
	// frame).
	Burst *BurstPos `json:"burst,omitempty"`
	// Headers are the headers the publisher set (Nats-Msg-Id,
	// E2A-Request-Id, E2A-Sequence, E2A-Frames, traceparent, tracestate):
	// on the frames of a burst, those of the message holding them, whose
	// E2A-Sequence is its first frame's.
	Headers map[string]string `json:"headers,omitempty"`
	// Envelope (requests) and Frame (frames) are the payloads as stored.
	Envelope json.RawMessage `json:"envelope,omitempty"`
	Frame    json.RawMessage `json:"frame,omitempty"`
	// Summary closes a request (KindSummary).
	Summary *Summary `json:"summary,omitempty"`
	// Duplicate is set on KindAccepted when the request id was already
	// accepted within the deduplication window.
	Duplicate bool `json:"duplicate,omitempty"`
}

// BurstPos is the place of a frame in a stored response message holding a
// burst of frames (e2a.SplitBurst).
type BurstPos struct {
	// Index is the position of the frame in the message, from 0.
	Index int `json:"index"`
	// Frames is the number of frames the message holds (its E2A-Frames
	// header; when that header does not match the payload, the pieces the
	// checker found).
	Frames int `json:"frames"`
}

// Summary is the result of the checks of one request's frames.
type Summary struct {
	// State is StateComplete, StateIncomplete or StateNoFrames.
	State string `json:"state"`
	// Frames is the number of frames read (a burst counts its frames).
	Frames int `json:"frames"`
	// Status and ResponseKind are those of the final frame.
	Status       string `json:"status,omitempty"`
	ResponseKind string `json:"response_kind,omitempty"`
	// ErrorCode is the code of a final e2a.error frame.
	ErrorCode string `json:"error_code,omitempty"`
	// Interrupted is the state of a turn the agent ended asking for input
	// or authorization (e2a.StateInputRequired, e2a.StateAuthRequired:
	// e2a.Response.Interrupt): its status is succeeded, its task goes on
	// with the client's answer.
	Interrupted string `json:"interrupted,omitempty"`
	// RequestFound tells whether the envelope was found.
	RequestFound bool `json:"request_found"`
	// FirstFrame and LastFrame are the store times of the first and last
	// frames.
	FirstFrame string `json:"first_frame,omitempty"`
	LastFrame  string `json:"last_frame,omitempty"`
	// Violations lists every broken invariant: invalid frames (spec §12.4),
	// sequence gaps, repeats, frames after the final one, frames of another
	// request, headers that disagree with the frame (or, on a burst, with
	// its first frame), bursts whose payload does not hold the frames their
	// E2A-Frames header counts, frames whose envelope was not found (replay
	// only). Empty when the request is sound.
	Violations []string `json:"violations,omitempty"`
}

// OK reports whether no violation was found.
func (s *Summary) OK() bool { return len(s.Violations) == 0 }

// publisherHeaders are the headers copied into records.
var publisherHeaders = []string{
	subjects.HeaderMsgID, subjects.HeaderRequestID, subjects.HeaderSequence,
	subjects.HeaderFrames, subjects.HeaderTraceparent, subjects.HeaderTracestate,
}

func recordHeaders(h nats.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	var out map[string]string
	for _, k := range publisherHeaders {
		if v := h.Get(k); v != "" {
			if out == nil {
				out = make(map[string]string, len(publisherHeaders))
			}
			out[k] = v
		}
	}
	return out
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// storedMsg is a message read from a stream, with its original subject
// when it was read from E2A_AUDIT. A response message holds one frame, or
// a burst of them (see frames).
type storedMsg struct {
	stream  string
	seq     uint64
	time    time.Time
	subject string // original subject
	origin  string // "<stream> <seq>" for sourced messages
	header  nats.Header
	data    []byte
}

// frames returns the frames a stored response message holds: its payload,
// or the pieces of a burst (header E2A-Frames, e2a.SplitBurst). When the
// payload does not hold what the header counts, it returns an error
// wrapping e2a.ErrInvalidBurst and, so that they are still checked, what
// the payload holds: itself when it is one JSON value, else its non-empty
// lines.
func (m *storedMsg) frames() ([][]byte, error) {
	v := m.header.Get(subjects.HeaderFrames)
	pieces, err := e2a.SplitBurst(v, m.data)
	if err == nil {
		return pieces, nil
	}
	err = fmt.Errorf("header %s is %.40q: %w", subjects.HeaderFrames, v, err)
	if json.Valid(m.data) {
		return [][]byte{m.data}, err
	}
	for _, p := range bytes.Split(m.data, []byte{'\n'}) {
		if len(p) > 0 {
			pieces = append(pieces, p)
		}
	}
	if len(pieces) == 0 {
		pieces = [][]byte{m.data}
	}
	return pieces, err
}

// firstFrame returns the first frame of a stored response message.
func (m *storedMsg) firstFrame() []byte {
	f, _ := m.frames()
	return f[0]
}

// frameHead is what the checker needs of a frame that does not validate.
type frameHead struct {
	RequestID string `json:"request_id"`
	Sequence  *int64 `json:"sequence"`
	IsFinal   bool   `json:"is_final"`
}

// checkedFrame is one frame of a stored message, as the checker read it.
type checkedFrame struct {
	data []byte
	// seq is the frame's sequence, -1 when unknown.
	seq int64
	// index is the frame's position in the message, count the number of
	// frames found in it (1: not a burst).
	index, count int
}

// checker checks the frames of one request as they come, with
// e2a.SequenceChecker for the ordering invariants and Response.Validate for
// each frame. After a sequence violation it starts a new SequenceChecker
// at the frame that broke it, so that one gap is reported once and the
// frames after it are still checked against each other. The frames of a
// burst are checked one by one, as if stored alone, and the headers of the
// message holding them once, against its first frame.
type checker struct {
	requestID string
	seq       e2a.SequenceChecker
	// base is the sequence the current SequenceChecker started from: it
	// sees sequence s as s-base.
	base   int64
	frames int
	// final is what the summary tells of the final frame (nil: none yet):
	// not the frame, which a request finished keeps no more of.
	final      *finalFrame
	afterFinal bool
	first      time.Time
	last       time.Time
	violations []string
}

func newChecker(requestID string) *checker { return &checker{requestID: requestID} }

// finalFrame is what a checker keeps of a request's final frame.
type finalFrame struct {
	seq                                  int64
	status, kind, errorCode, interrupted string
}

func newFinalFrame(r *e2a.Response) *finalFrame {
	f := &finalFrame{seq: r.Sequence, status: r.Status, kind: r.ResponseKind}
	if r.ResponseKind == e2a.KindError {
		if eb, err := r.Error(); err == nil {
			f.errorCode = eb.Code
		}
	}
	if state, _, ok := r.Interrupt(); ok {
		f.interrupted = state
	}
	return f
}

func (c *checker) violation(format string, a ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, a...))
}

// add checks the frames of one stored response message and returns them.
func (c *checker) add(m *storedMsg) []checkedFrame {
	pieces, err := m.frames()
	if err != nil {
		c.violation("message at %s %d: %v", m.stream, m.seq, err)
	}
	out := make([]checkedFrame, len(pieces))
	for i, p := range pieces {
		out[i] = checkedFrame{data: p, index: i, count: len(pieces)}
		out[i].seq = c.addFrame(m, p, i, len(pieces))
	}
	c.checkHeaders(m, out)
	return out
}

// addFrame checks one frame, data, the frame at index of the n found in m,
// and returns its sequence (-1 when unknown).
func (c *checker) addFrame(m *storedMsg, data []byte, index, n int) int64 {
	c.frames++
	if c.first.IsZero() {
		c.first = m.time
	}
	c.last = m.time
	r, err := e2a.ResponseFromJSON(data)
	if err != nil {
		if n > 1 {
			c.violation("frame at %s %d (frame %d of %d in the message): %v", m.stream, m.seq, index, n, err)
		} else {
			c.violation("frame at %s %d: %v", m.stream, m.seq, err)
		}
		var h frameHead
		if json.Unmarshal(data, &h) != nil || h.Sequence == nil {
			return -1
		}
		r = &e2a.Response{RequestID: h.RequestID, Sequence: *h.Sequence, IsFinal: h.IsFinal}
	}
	if r.RequestID != c.requestID {
		c.violation("frame %d has request_id %q, stored under request %q", r.Sequence, r.RequestID, c.requestID)
	}
	if c.afterFinal || c.final != nil {
		c.violation("frame %d stored after the final frame %d", r.Sequence, c.final.seq)
		c.afterFinal = true
		return r.Sequence
	}
	shifted := *r
	shifted.Sequence = r.Sequence - c.base
	shifted.RequestID = c.requestID
	if err := c.seq.Add(&shifted); err != nil {
		if c.seq.Next() == 0 && c.base == 0 {
			c.violation("frame %d is the first frame: sequence must start at 0", r.Sequence)
		} else {
			c.violation("frame %d where %d was expected (%s)", r.Sequence, c.seq.Next()+c.base, gapOrRepeat(r.Sequence, c.seq.Next()+c.base))
		}
		// Resynchronize on this frame.
		c.seq = e2a.SequenceChecker{}
		c.base = r.Sequence
		shifted.Sequence = 0
		_ = c.seq.Add(&shifted)
	}
	if r.IsFinal {
		c.final = newFinalFrame(r)
	}
	return r.Sequence
}

func gapOrRepeat(got, want int64) string {
	if got > want {
		return "gap"
	}
	return "repeated or out of order"
}

// checkHeaders compares the headers of a stored message with the frames
// found in it: E2A-Sequence and Nats-Msg-Id name its first frame. They are
// not checked when the first frame's sequence is unknown (that frame is
// reported invalid).
func (c *checker) checkHeaders(m *storedMsg, frames []checkedFrame) {
	first := frames[0].seq
	if first < 0 {
		return
	}
	what := fmt.Sprintf("frame %d", first)
	if len(frames) > 1 {
		what = fmt.Sprintf("burst of %d frames at %s %d (first frame %d)", len(frames), m.stream, m.seq, first)
	}
	if v := m.header.Get(subjects.HeaderSequence); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n != first {
			c.violation("%s: header %s is %q", what, subjects.HeaderSequence, v)
		}
	}
	if v := m.header.Get(subjects.HeaderMsgID); v != "" {
		if id, n, err := subjects.ParseFrameMsgID(v); err != nil || n != first || id != c.requestID {
			c.violation("%s: header %s is %q, want %q", what, subjects.HeaderMsgID, v, subjects.FrameMsgID(c.requestID, first))
		}
	}
}

// summary closes the check.
func (c *checker) summary(requestFound bool) *Summary {
	s := &Summary{Frames: c.frames, RequestFound: requestFound, FirstFrame: formatTime(c.first), LastFrame: formatTime(c.last)}
	switch {
	case c.frames == 0:
		s.State = StateNoFrames
	case c.final != nil:
		s.State = StateComplete
		s.Status, s.ResponseKind, s.ErrorCode, s.Interrupted = c.final.status, c.final.kind, c.final.errorCode, c.final.interrupted
	default:
		s.State = StateIncomplete
	}
	s.Violations = append([]string(nil), c.violations...)
	return s
}

func requestRecord(m *storedMsg, id, pool string) Record {
	return Record{
		Kind: KindRequest, RequestID: id, Pool: pool,
		Stream: m.stream, StreamSeq: m.seq, Time: formatTime(m.time),
		Subject: m.subject, Origin: m.origin, Headers: recordHeaders(m.header),
		Envelope: rawJSON(m.data),
	}
}

// frameRecord is the record of frame f of the stored message m.
func frameRecord(m *storedMsg, id, pool string, f checkedFrame) Record {
	r := Record{
		Kind: KindFrame, RequestID: id, Pool: pool,
		Stream: m.stream, StreamSeq: m.seq, Time: formatTime(m.time),
		Subject: m.subject, Origin: m.origin, Headers: recordHeaders(m.header),
		Frame: rawJSON(f.data),
	}
	if f.seq >= 0 {
		seq := f.seq
		r.Sequence = &seq
	}
	if f.count > 1 {
		r.Burst = &BurstPos{Index: f.index, Frames: f.count}
	}
	return r
}

// rawJSON returns data when it is valid JSON, and otherwise the JSON
// string of it, so that every record stays one valid JSON line.
func rawJSON(data []byte) json.RawMessage {
	if json.Valid(data) {
		return compact(data)
	}
	b, _ := json.Marshal(string(data))
	return b
}

func compact(data []byte) json.RawMessage {
	var out bytes.Buffer
	out.Grow(len(data))
	if err := json.Compact(&out, data); err != nil {
		return data
	}
	return out.Bytes()
}
