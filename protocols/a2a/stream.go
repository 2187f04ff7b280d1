package a2a

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	a2av1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/render"
)

// Output formats of A2A v0.3's renderers (egress.Formats, the label of
// egress's metrics).
const (
	// StreamFormat is message/stream's and tasks/resubscribe's SSE.
	StreamFormat = egress.FormatA2ASSE
	// SendFormat is message/send's JSON answer.
	SendFormat = egress.FormatA2AJSON
)

// now is the clock of the status-update a stream opens with when the call
// gives no submitted time; tests fix it.
var now = time.Now

// fastText enables the text fast path (textEvent); the differential test
// turns it off to get the reference bytes.
var fastText = true

var (
	_ render.Renderer    = (*stream)(nil)
	_ render.PassThrough = (*stream)(nil)
)

// A resumed stream learns from the frames before its resume point
// (StreamBase.Prime).
var _ render.Primer = (*stream)(nil)

// stream renders message/stream and tasks/resubscribe: SSE whose data: is
// a JSON-RPC response object with an A2A event as result. The SSE id of
// the last event of each frame is the frame's sequence (after IDPrefix
// in a stream of several turns, serveTurns), so Last-Event-ID resumes
// after it.
type stream struct {
	StreamBase
	p      a2amap.Params
	from   int64
	keep   func(a2av1.Event) (a2av1.Event, bool) // EventFilter(p), made at the first event
	evs    []a2av1.Event                         // a frame's events for the client, reused
	finals []bool                                // their v0.3 final flags (Mapper.Final)
	rpcID  []byte                                // the JSON-RPC id as encoded, for textEvent
	// more: a later turn of the task follows in the stream (serveTurns,
	// or later found one): the final status is not final, its state the
	// one the task then has (submitted: the later turn's, not begun), and
	// the end is flushed.
	more bool
	// later, when set, is the turn the task's record lists after this one
	// ("" when none: host.Tasks.LaterTurn), read at the final frame when
	// nothing is known to follow (more): a terminal or interrupted state
	// that a later turn takes back is not written (a terminal state is
	// final; an interrupted one's answer is recorded already).
	// nextTurn is the turn it found, which the stream goes on with
	// (serveStream).
	later    func() string
	nextTurn string
	// next: the stream goes on from an earlier turn's (serveTurns): its
	// head is written.
	next bool
	// working: the working status-update a later turn of a resubscription
	// opens with (next) is still to be written, with its first frame and
	// at its time (openingTime): stamped when the turn's renderer
	// started, it came before events of older times.
	working bool
	// ended: the final frame was rendered, and the stream did not end
	// with an error.
	ended bool
	// opened: Start ran (the head is written unless next); done: the
	// stream ended without an error (after its final frame, or at once
	// when that frame is before the resume point).
	opened, done bool
}

// NewStream returns the A2A v0.3 SSE renderer (format [StreamFormat]) of
// requestID from sequence from (the resume point; p.Resubscribe for
// tasks/resubscribe): a submitted status-update first (p.Submitted, else
// now; written with the first frame, and not at all when that frame is
// the agent's Message), or a working one for a resubscription (at
// p.Submitted, the turn's stored time, else now; a later turn's with its
// first frame, at that frame's time), none when resuming; then
// each frame's events as a2amap.Mapper maps them (A2A v1.0, converted to
// v0.3 one by one: a2amap.V03Event), without the parts the client must
// not get (p.AcceptedOutputModes, p.Interaction); an error ends the
// stream as a JSON-RPC error ([Error]).
func NewStream(o *render.Output, requestID string, p a2amap.Params, from int64) render.Renderer {
	return newStream(o, requestID, p, from)
}

func newStream(o *render.Output, requestID string, p a2amap.Params, from int64) *stream {
	return &stream{StreamBase: StreamBase{Out: o, Mapper: a2amap.NewStreamMapper(requestID, p, from)}, p: p, from: from}
}

func (r *stream) Start() error {
	r.opened = true
	if !r.next {
		render.SSEHead(r.Out, 0)
		if err := render.SSEComment(r.Out, "ok"); err != nil {
			return err
		}
	}
	if r.from > 0 {
		return nil
	}
	if r.p.Resubscribe {
		// A resubscribed stream opens with the task's state too (working;
		// the replayed frames then move it on), never with a later event,
		// at once (a client waits for it) and at the turn's stored time
		// (p.Submitted; stamped when the client resubscribed, it came
		// before events of older times). A later turn in a stream already
		// open writes it with its first frame, at that frame's time.
		if r.next {
			r.working = true
			return nil
		}
		ts := r.p.SubmittedTime(now)
		return r.statusEvent(a2av1.TaskStateWorking, &ts)
	}
	r.Opening = true
	return nil
}

// submitted writes the submitted status-update a message/stream opens
// with (StreamBase.Events).
func (r *stream) submitted() error {
	ts := r.p.SubmittedTime(now)
	return r.statusEvent(a2av1.TaskStateSubmitted, &ts)
}

// statusEvent writes the status-update (not final) a stream opens with.
func (r *stream) statusEvent(state a2av1.TaskState, ts *time.Time) error {
	return r.event("", r.Mapper.StatusUpdate(state, ts, nil), false)
}

// event writes the A2A v1.0 event ev in v0.3 (final: a status-update's
// flag): a status-update without message or metadata straight from its
// members (appendStatusUpdate), any other converted (a2amap.V03Event).
func (r *stream) event(id string, ev a2av1.Event, final bool) error {
	if su, ok := ev.(*a2av1.TaskStatusUpdateEvent); ok && fastText && su.Status.Message == nil && len(su.Metadata) == 0 {
		old := a2a.TaskStatusUpdateEvent{TaskID: a2a.TaskID(su.TaskID), ContextID: su.ContextID, Final: final,
			Status: a2a.TaskStatus{State: a2av0.FromV1TaskState(su.Status.State), Timestamp: su.Status.Timestamp}}
		if done, err := r.statusFast(id, &old); done {
			return err
		}
	}
	old, err := a2amap.V03Event(ev, final)
	if err != nil {
		return err
	}
	return r.resultEvent(id, old)
}

func (r *stream) Frame(f *render.Frame) error {
	if r.working {
		r.working = false
		if err := r.statusEvent(a2av1.TaskStateWorking, openingTime(f)); err != nil {
			return err
		}
	}
	r.ended = r.ended || f.IsFinal()
	b, text := r.textEvent(f)
	evs, err := r.Events(f, b, text, r.submitted)
	if err != nil || len(evs) == 0 {
		return err
	}
	if r.keep == nil {
		r.keep = EventFilter(r.p)
	}
	if r.later != nil && !r.more && f.IsFinal() && endsTask(evs) {
		r.nextTurn = r.later()
		r.more = r.nextTurn != ""
	}
	out, finals := r.evs[:0], r.finals[:0]
	for _, ev := range evs {
		su, final := ev.(*a2av1.TaskStatusUpdateEvent)
		if final && r.more && TakenBack(su.Status.State) {
			// The task goes on with the later turn, submitted (an
			// interrupted turn's question kept as the status message).
			c := *su
			c.Status.State = a2av1.TaskStateSubmitted
			su, ev = &c, &c
		}
		final = final && !r.more && r.Mapper.Final(su)
		if ev, ok := r.keep(ev); ok {
			out, finals = append(out, ev), append(finals, final)
		}
	}
	r.evs, r.finals = out, finals
	// Nothing left of the frame: nothing for this client.
	i := 0
	return render.FrameEvents(f, out, func(id string, ev a2av1.Event) error {
		i++
		if id != "" && r.IDPrefix != "" {
			id = r.IDPrefix + id
		}
		return r.event(id, ev, finals[i-1])
	})
}

// openingTime is the time of the working status-update a later turn of a
// resubscription opens with: its first frame's, as the frame stores it (a2amap.FrameTime;
// the turn's later events carry their frames' times too), else now. The
// frame is decoded for it (once per stream; a text chunk's is otherwise
// not).
func openingTime(f *render.Frame) *time.Time {
	if resp, err := f.Decoded(); err == nil {
		if ts := a2amap.FrameTime(resp); ts != nil {
			return ts
		}
	}
	ts := now().UTC()
	return &ts
}

// endsTask reports whether evs (a final frame's) hold a turn's end that
// a later turn takes back (TakenBack).
func endsTask(evs []a2av1.Event) bool {
	for _, ev := range evs {
		if su, ok := ev.(*a2av1.TaskStatusUpdateEvent); ok && TakenBack(su.Status.State) {
			return true
		}
	}
	return false
}

// TakenBack reports whether s, a turn's final status, is one that a
// later turn of the task, recorded already, takes back: terminal, or
// interrupted (input-required, auth-required: the later turn is its
// answer). A stream of the turn (v0.3, v1.0, AgentVault) writes it in the
// state the task then has, submitted (the later turn's, not begun), with
// its status message, and goes on with that turn.
func TakenBack(s a2av1.TaskState) bool { return s.Terminal() || a2amap.Interrupted(s) }

func (r *stream) Heartbeat() error { return render.SSEComment(r.Out, "keep-alive") }

func (r *stream) End(err error) error {
	if r.working {
		// No frame came: the opening status before the end, stamped now.
		r.working = false
		ts := now().UTC()
		if werr := r.statusEvent(a2av1.TaskStateWorking, &ts); werr != nil {
			return werr
		}
	}
	r.done = err == nil
	if err == nil && r.more {
		if !r.opened {
			return nil // nothing written: the next turn opens the stream
		}
		// The next turn may be long in coming: this one's end goes out
		// now.
		return r.Out.Flush()
	}
	if err == nil {
		return nil
	}
	r.ended, r.nextTurn = false, "" // nothing follows an error
	return render.SSEEndEvent(r.Out, "", jsonrpc.ErrorResponse(r.p.JSONRPCID, Error(err)))
}

// PassThrough: the stream reads whole frames only where textEvent does
// not apply (Frame decodes them then).
func (*stream) PassThrough() bool { return fastText }

// textEvent renders the event of a plain text chunk, the bulk of a
// streamed answer, straight from the frame's bytes (render.ReadTextChunk)
// into the JSON-RPC response bytes: exactly the bytes json.Marshal gives
// for the TaskArtifactUpdateEvent that a2amap.Mapper.Events builds for it,
// in v0.3 (TestA2AFastTextMatches), with one partial decode of the frame and without
// the event, its maps or the reflection encode. ok is false for any other
// frame, which takes the general path; nothing is changed then. A text
// part is never filtered out, so the part filters do not apply.
func (r *stream) textEvent(f *render.Frame) (out []byte, ok bool) {
	if !fastText {
		return nil, false
	}
	u, ok := ReadTextUpdate(r.Mapper, f)
	if !ok {
		return nil, false
	}
	if r.rpcID == nil {
		r.rpcID = encodedRPCID(r.p.JSONRPCID)
	}
	// The constant parts take 250 bytes; escapes may need more.
	b := slices.Grow(r.Buf[:0], 320+len(r.rpcID)+u.Len())
	r.Buf = nil
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, r.rpcID...)
	b = append(b, `,"result":{"kind":"artifact-update",`...)
	b = u.AppendMembers(b, false)
	b = append(b, '}')
	return b, true
}

// resultEvent writes the SSE event (id as given) whose data is the
// JSON-RPC response with result ev: the bytes json.Marshal writes for
// jsonrpc.ResultResponse(r.p.JSONRPCID, ev) (TestResultEventMatches), with
// ev encoded, compacted and checked once instead of once more inside the
// response's own encoding.
func (r *stream) resultEvent(id string, ev any) error {
	if r.rpcID == nil {
		r.rpcID = encodedRPCID(r.p.JSONRPCID)
	}
	head := len(r.rpcID) + 36
	if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
		if done, err := r.statusFast(id, su); done {
			return err
		}
	}
	res, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	b := make([]byte, 0, len(res)+head)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, r.rpcID...)
	b = append(b, `,"result":`...)
	b = append(b, res...)
	b = append(b, '}')
	return render.SSEEvent(r.Out, id, "", b)
}

// statusFast writes the SSE event of resultEvent for su, a status without
// message or metadata (submitted, working, completed), as json.Marshal
// writes it (appendStatusUpdate); done is false, nothing written, for any
// other status or with the fast paths off.
func (r *stream) statusFast(id string, su *a2a.TaskStatusUpdateEvent) (done bool, err error) {
	if !fastText {
		return false, nil
	}
	if r.rpcID == nil {
		r.rpcID = encodedRPCID(r.p.JSONRPCID)
	}
	b := slices.Grow(r.Buf[:0], len(r.rpcID)+196+len(su.TaskID)+len(su.ContextID)+len(su.Status.State))
	r.Buf = nil
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, r.rpcID...)
	b = append(b, `,"result":`...)
	b, ok := appendStatusUpdate(b, su)
	if !ok {
		r.Buf = b[:0]
		return false, nil
	}
	b = append(b, '}')
	err = render.SSEEvent(r.Out, id, "", b)
	r.Buf = render.KeepScratch(b)
	return true, err
}

// appendStatusUpdate appends ev as json.Marshal writes it, when its status
// has no message, it has no metadata and its timestamp, if any, is in UTC
// within the years time.Time.MarshalJSON writes (0–9999); false otherwise,
// b unchanged then.
func appendStatusUpdate(b []byte, ev *a2a.TaskStatusUpdateEvent) ([]byte, bool) {
	ts := ev.Status.Timestamp
	if ev.Status.Message != nil || len(ev.Metadata) != 0 || ts != nil && (ts.Location() != time.UTC || ts.Year() < 0 || ts.Year() > 9999) {
		return b, false
	}
	b = append(b, `{"kind":"status-update","contextId":`...)
	b = jsonstr.Append(b, ev.ContextID)
	if ev.Final {
		b = append(b, `,"final":true`...)
	} else {
		b = append(b, `,"final":false`...)
	}
	b = append(b, `,"status":{"state":`...)
	b = jsonstr.Append(b, string(ev.Status.State))
	if ts != nil {
		b = append(b, `,"timestamp":"`...)
		b = ts.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, `},"taskId":`...)
	b = jsonstr.Append(b, string(ev.TaskID))
	return append(b, '}'), true
}

// encodedRPCID is a JSON-RPC id as json.Marshal writes a RawMessage
// (compacted, HTML-escaped), null when absent.
func encodedRPCID(id json.RawMessage) []byte {
	if len(id) == 0 {
		return []byte("null")
	}
	var buf bytes.Buffer
	if json.Compact(&buf, id) != nil {
		return []byte("null")
	}
	out, err := json.Marshal(json.RawMessage(buf.Bytes()))
	if err != nil {
		return []byte("null")
	}
	return out
}
