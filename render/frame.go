package render

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// Frame is one response frame as a reader (package egress) delivers it to
// a renderer.
type Frame struct {
	// Response is the decoded frame. Readers that decode frames always
	// fill it; the readers opened for a [PassThrough] renderer leave it
	// nil and decode it only on demand (Frame.Decoded).
	Response *e2a.Response
	// Raw is the frame exactly as stored in E2A_RESPONSES, so that E2A
	// renderers pass it through without re-encoding: the message's payload,
	// or the frame's own line of a burst (a message holding several frames,
	// e2a.SplitBurst), never more than the frame. It is shared, and the
	// strings the fast paths read from it ([ReadTextChunk]) share its bytes:
	// nothing may modify it.
	Raw []byte
	// StreamSeq is the sequence in E2A_RESPONSES of the message holding the
	// frame: the frames of a burst share it.
	StreamSeq uint64

	// The few fields read without decoding the whole frame (a frame made
	// by Head.Frame has Response nil): see Sequence, IsFinal, Kind and
	// Decoded.
	seq   int64
	final bool
	rkind string
	text  textHead // what the head scan read for the text fast paths
}

// NoSequence is the Sequence of a [Head] whose frame has no sequence
// member.
const NoSequence = math.MinInt64

// Head is the part of a frame a reader needs to deliver it and the E2A
// pass-through renderers need to write it, read with what the text fast
// paths read of the frame, in one pass over its bytes: decoding only this
// costs a fraction of decoding the whole [e2a.Response] (no maps, no body).
// A reader reuses one Head from one frame to the next.
type Head struct {
	Sequence     int64  `json:"sequence"` // NoSequence when the frame has none
	IsFinal      bool   `json:"is_final"`
	ResponseKind string `json:"response_kind"`

	text textHead
}

// Decode decodes the head of data into h. data is checked to be valid JSON
// as a whole (a broken frame is still an invalid frame) in the same pass
// that reads its top-level members (jsonstr.ValidMembers); any shape the
// scan does not handle (escaped or differently cased keys, null or
// non-integer values, not an object) is left to encoding/json, so that the
// result is always what json.Unmarshal gives. This is several times
// cheaper than json.Unmarshal into the three fields, which walks the whole
// frame twice through the reflective decoder.
func (h *Head) Decode(data []byte) error {
	*h = Head{Sequence: NoSequence, text: textHead{ok: true}}
	if !jsonstr.ValidMembers(data, h.member) {
		*h = Head{Sequence: NoSequence}
		return json.Unmarshal(data, h)
	}
	return nil
}

// Frame returns the frame data, stored at streamSeq, whose head h holds
// (h.Decode(data) was called last), with Response nil: what a reader
// delivers to a [PassThrough] renderer. A frame without a sequence member
// has sequence 0, as when decoding the whole frame.
func (h *Head) Frame(data []byte, streamSeq uint64) Frame {
	seq := h.Sequence
	if seq == NoSequence {
		seq = 0
	}
	return Frame{Raw: data, StreamSeq: streamSeq, seq: seq, final: h.IsFinal, rkind: h.ResponseKind, text: h.text}
}

// member reads one top-level member of a valid frame; false: a shape it
// leaves to encoding/json.
func (h *Head) member(key, val []byte) bool {
	h.text.member(key, val)
	switch string(key) {
	case "sequence":
		n, err := strconv.ParseInt(string(val), 10, 64)
		if err != nil {
			return false
		}
		h.Sequence = n
	case "is_final":
		return scanBool(val, &h.IsFinal)
	case "response_kind":
		// A string with escapes or invalid UTF-8 (which
		// encoding/json reads as U+FFFD) is left to encoding/json.
		kind, ok := plainString(val)
		if !ok {
			return false
		}
		h.ResponseKind = kind
	default:
		// encoding/json matches keys without regard to case.
		if foldsTo(key, frameHeadKeys) {
			return false
		}
	}
	return true
}

// frameHeadKeys are the members Head reads.
var frameHeadKeys = []string{"sequence", "is_final", "response_kind"}

// HeadFrame returns the [Frame] a reader delivers to a [PassThrough]
// renderer for raw, a frame as stored at streamSeq in E2A_RESPONSES: only
// its head read, Response nil until [Frame.Decoded]. Renderers' tests
// drive their fast paths with it (a decoded frame is a Frame with
// Response set).
func HeadFrame(raw []byte, streamSeq uint64) (*Frame, error) {
	var head Head
	if err := head.Decode(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidFrame, err)
	}
	f := head.Frame(raw, streamSeq)
	return &f, nil
}

// Decoded returns the decoded frame, decoding Raw on first use when the
// reader did not.
func (f *Frame) Decoded() (*e2a.Response, error) {
	if f.Response == nil {
		resp, err := e2a.UnmarshalResponse(f.Raw)
		if err != nil {
			return nil, fmt.Errorf("%w: stream sequence %d: %v", ErrInvalidFrame, f.StreamSeq, err)
		}
		f.Response = resp
	}
	return f.Response, nil
}

// WithRaw returns a frame of raw, f rewritten (its secrets redacted, say)
// without changing its head: f's sequence, finality, kind and stream
// sequence, Response nil. Nothing the head scan read of f is kept: those
// are views of f's bytes.
func (f *Frame) WithRaw(raw []byte) *Frame {
	return &Frame{Raw: raw, StreamSeq: f.StreamSeq, seq: f.Sequence(), final: f.IsFinal(), rkind: f.Kind()}
}

// Sequence is f's E2A sequence, read from its head: f need not be decoded.
func (f *Frame) Sequence() int64 {
	if f.Response != nil {
		return f.Response.Sequence
	}
	return f.seq
}

// IsFinal reports whether f is its request's final frame, read from its
// head: f need not be decoded.
func (f *Frame) IsFinal() bool {
	if f.Response != nil {
		return f.Response.IsFinal
	}
	return f.final
}

// Kind is f's response_kind, read from its head: f need not be decoded.
func (f *Frame) Kind() string {
	if f.Response != nil {
		return f.Response.ResponseKind
	}
	return f.rkind
}

// SeqID is the SSE event id of a frame: its sequence, in decimal (what a
// client resumes from with Last-Event-ID).
func SeqID(f *Frame) string { return strconv.FormatInt(f.Sequence(), 10) }

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
