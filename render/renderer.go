package render

// Renderer turns the frames of one request into one output format on one
// HTTP response. A driver (package egress's Service.Stream) drives it: Start once the request is known to
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

// NewRenderer builds a renderer on the response it writes to.
type NewRenderer func(o *Output) Renderer

// PassThrough is implemented by the renderers that write frames as stored
// or read only their head (sequence, is_final, response_kind) where they
// can: when PassThrough returns true, the driver opens their readers
// without decoding whole frames, and their Frame decodes a frame itself
// ([Frame.Decoded]) where it needs more.
type PassThrough interface{ PassThrough() bool }

// Primer is implemented by the renderers whose events depend on the
// frames before a resume point: resumed (a resume point after the first
// frame), the driver gives Prime each frame the stream holds before that
// point, in order, before the first frame it renders (its reader meets
// them on its way to the resume point), and writes nothing of them (the
// client has them). An A2A stream's mapper learns from them what the client has
// seen, so that the final frame's result, sent as the answer by a stream
// that saw no text, is not sent again to a client that has the
// streamed text. An error from Prime ends the stream as Frame's does.
type Primer interface{ Prime(f *Frame) error }

// Interruptible is implemented by the renderers whose answer is one
// response the client waits for (a blocking send), not a stream it resumes
// from where it stopped: when the server shuts down before the request's
// final frame, the driver calls Interrupted, once and instead of End, to
// write the answer as it stands (the task as far as its frames go, which
// the client reads again to follow it), where a stream would just end.
type Interruptible interface{ Interrupted() error }
