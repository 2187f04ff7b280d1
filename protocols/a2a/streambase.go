package a2a

import (
	a2av1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/render"
)

// StreamBase is what A2A's SSE stream renderers share, v0.3's
// (NewStream) and v1.0's (protocols/a2av1's NewStream and
// NewRESTStream): the Output, the mapper of the request's frames, the
// buffer of the event being assembled, and the first steps of each
// frame ([StreamBase.Events]). A renderer embeds it.
type StreamBase struct {
	Out    *render.Output
	Mapper *a2amap.Mapper
	// Buf is the event being assembled, reused once it is written
	// (render.KeepScratch).
	Buf []byte
	// Opening: the submitted status-update a stream opens with is still
	// to be written; a renderer's Start sets it.
	Opening bool
	// IDPrefix precedes each event id (render.SeqID), when set: a
	// multi-turn stream's ids name their turn ("<requestID>:<seq>").
	IDPrefix string
}

// SetIDPrefix sets IDPrefix (ServeFollowed: a later turn's events).
func (s *StreamBase) SetIDPrefix(p string) { s.IDPrefix = p }

// ID is the SSE event id of frame f: render.SeqID, after IDPrefix.
func (s *StreamBase) ID(f *render.Frame) string {
	if s.IDPrefix == "" {
		return render.SeqID(f)
	}
	return s.IDPrefix + render.SeqID(f)
}

// Events is the start of a renderer's Frame. A plain text chunk, the bulk
// of a streamed answer, comes with its event already made from the
// frame's bytes by the version's fast path (text true, b the event): it is
// written as it is, and Events returns no events. Any other frame is
// decoded and mapped to its A2A v1.0 events (a2amap.Mapper.Events), which
// the renderer filters and writes in its version. Before the first
// frame's events, submitted writes the submitted status-update the stream
// opens with, unless that frame is the agent's direct answer, a Message
// (e2a.Response.Reply): that stream is the one message event, no task
// (A2A §3.1.2). (The fast path is called by the renderer, not from here:
// a frame handed to a function value would escape to the heap.)
func (s *StreamBase) Events(f *render.Frame, b []byte, text bool, submitted func() error) ([]a2av1.Event, error) {
	if text {
		if err := s.open(false, submitted); err != nil {
			return nil, err
		}
		err := render.SSEEvent(s.Out, s.ID(f), "", b)
		s.Buf = render.KeepScratch(b)
		return nil, err
	}
	resp, err := f.Decoded()
	if err != nil {
		return nil, err
	}
	if s.Opening {
		if err := s.open(s.Mapper.Replied(resp), submitted); err != nil {
			return nil, err
		}
	}
	return s.Mapper.Events(resp)
}

// Prime is render.Primer: a frame before the resume point of a resumed
// stream, which the client has, given to the mapper for what it learns
// (the content seen, the artifacts the client has), its events left
// unwritten. A frame that does not decode is skipped, as the mapper skips
// an unreadable frame.
func (s *StreamBase) Prime(f *render.Frame) error { return primeMapper(s.Mapper, f) }

// primeMapper gives m a frame before a resumed stream's resume point
// (render.Primer), its events left unwritten; a frame that does not
// decode is skipped, as the mapper skips an unreadable frame.
func primeMapper(m *a2amap.Mapper, f *render.Frame) error {
	resp, err := f.Decoded()
	if err != nil {
		return nil
	}
	_, _ = m.Events(resp)
	return nil
}

// open writes the submitted status-update with submitted while the
// stream is opening, unless the first frame is a Message (reply).
func (s *StreamBase) open(reply bool, submitted func() error) error {
	if !s.Opening {
		return nil
	}
	s.Opening = false
	if reply {
		return nil
	}
	return submitted()
}
