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
	// KindFrame: one response frame as stored.
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
	// sequence there; Time when that stream stored it.
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
	// Headers are the headers the publisher set (Nats-Msg-Id,
	// E2A-Request-Id, E2A-Sequence, traceparent, tracestate).
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

// Summary is the result of the checks of one request's frames.
type Summary struct {
	// State is StateComplete, StateIncomplete or StateNoFrames.
	State string `json:"state"`
	// Frames is the number of frames read.
	Frames int `json:"frames"`
	// Status and ResponseKind are those of the final frame.
	Status       string `json:"status,omitempty"`
	ResponseKind string `json:"response_kind,omitempty"`
	// ErrorCode is the code of a final e2a.error frame.
	ErrorCode string `json:"error_code,omitempty"`
	// RequestFound tells whether the envelope was found.
	RequestFound bool `json:"request_found"`
	// FirstFrame and LastFrame are the store times of the first and last
	// frames.
	FirstFrame string `json:"first_frame,omitempty"`
	LastFrame  string `json:"last_frame,omitempty"`
	// Violations lists every broken invariant: invalid frames (spec §12.4),
	// sequence gaps, repeats, frames after the final one, frames of another
	// request, headers that disagree with the frame. Empty when the
	// request is sound.
	Violations []string `json:"violations,omitempty"`
}

// OK reports whether no violation was found.
func (s *Summary) OK() bool { return len(s.Violations) == 0 }

// publisherHeaders are the headers copied into records.
var publisherHeaders = []string{
	subjects.HeaderMsgID, subjects.HeaderRequestID, subjects.HeaderSequence,
	subjects.HeaderTraceparent, subjects.HeaderTracestate,
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
// when it was read from E2A_AUDIT.
type storedMsg struct {
	stream  string
	seq     uint64
	time    time.Time
	subject string // original subject
	origin  string // "<stream> <seq>" for sourced messages
	header  nats.Header
	data    []byte
}

// frameHead is what the checker needs of a frame that does not validate.
type frameHead struct {
	RequestID string `json:"request_id"`
	Sequence  *int64 `json:"sequence"`
	IsFinal   bool   `json:"is_final"`
}

// checker checks the frames of one request as they come, with
// e2a.SequenceChecker for the ordering invariants and Response.Validate for
// each frame. After a sequence violation it starts a new SequenceChecker
// at the frame that broke it, so that one gap is reported once and the
// frames after it are still checked against each other.
type checker struct {
	requestID string
	seq       e2a.SequenceChecker
	// base is the sequence the current SequenceChecker started from: it
	// sees sequence s as s-base.
	base       int64
	frames     int
	final      *e2a.Response
	afterFinal bool
	first      time.Time
	last       time.Time
	violations []string
}

func newChecker(requestID string) *checker { return &checker{requestID: requestID} }

func (c *checker) violation(format string, a ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, a...))
}

// add checks one stored frame and returns its sequence (-1 when unknown).
func (c *checker) add(m *storedMsg) int64 {
	c.frames++
	if c.first.IsZero() {
		c.first = m.time
	}
	c.last = m.time
	r, err := e2a.ResponseFromJSON(m.data)
	if err != nil {
		c.violation("frame at %s %d: %v", m.stream, m.seq, err)
		var h frameHead
		if json.Unmarshal(m.data, &h) != nil || h.Sequence == nil {
			return -1
		}
		r = &e2a.Response{RequestID: h.RequestID, Sequence: *h.Sequence, IsFinal: h.IsFinal}
	}
	if r.RequestID != c.requestID {
		c.violation("frame %d has request_id %q, stored under request %q", r.Sequence, r.RequestID, c.requestID)
	}
	c.checkHeaders(m, r.Sequence)
	if c.afterFinal || c.final != nil {
		c.violation("frame %d stored after the final frame %d", r.Sequence, c.final.Sequence)
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
		c.final = r
	}
	return r.Sequence
}

func gapOrRepeat(got, want int64) string {
	if got > want {
		return "gap"
	}
	return "repeated or out of order"
}

// checkHeaders compares the headers of a stored frame with its body.
func (c *checker) checkHeaders(m *storedMsg, seq int64) {
	if v := m.header.Get(subjects.HeaderSequence); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n != seq {
			c.violation("frame %d: header %s is %q", seq, subjects.HeaderSequence, v)
		}
	}
	if v := m.header.Get(subjects.HeaderMsgID); v != "" {
		if id, n, err := subjects.ParseFrameMsgID(v); err != nil || n != seq || id != c.requestID {
			c.violation("frame %d: header %s is %q, want %q", seq, subjects.HeaderMsgID, v, subjects.FrameMsgID(c.requestID, seq))
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
		s.Status, s.ResponseKind = c.final.Status, c.final.ResponseKind
		if c.final.ResponseKind == e2a.KindError {
			if eb, err := c.final.Error(); err == nil {
				s.ErrorCode = eb.Code
			}
		}
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

func frameRecord(m *storedMsg, id, pool string, seq int64) Record {
	r := Record{
		Kind: KindFrame, RequestID: id, Pool: pool,
		Stream: m.stream, StreamSeq: m.seq, Time: formatTime(m.time),
		Subject: m.subject, Origin: m.origin, Headers: recordHeaders(m.header),
		Frame: rawJSON(m.data),
	}
	if seq >= 0 {
		r.Sequence = &seq
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
