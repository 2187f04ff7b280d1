package egress

import (
	"net/http"
	"time"

	"github.com/e2a-pipeline/pipeline/render"
)

// The renderer toolkit moved to package render (issue 39). These names
// keep code written against egress's compiling while the work in flight
// beside the move lands; new code uses package render. They go once
// nothing uses them.

type (
	// Deprecated: use render.Frame.
	Frame = render.Frame
	// Deprecated: use render.Renderer.
	Renderer = render.Renderer
	// Deprecated: use render.Output.
	Output = render.Output
	// Deprecated: use render.NewRenderer.
	NewRenderer = render.NewRenderer
	// Deprecated: use render.PassThrough.
	PassThrough = render.PassThrough
	// Deprecated: use render.TextChunk.
	TextChunk = render.TextChunk
)

// Deprecated: use render.MaxScratch.
const MaxScratch = render.MaxScratch

// Deprecated: use render.NewOutput.
func NewOutput(w http.ResponseWriter, writeTimeout time.Duration) *render.Output {
	return render.NewOutput(w, writeTimeout)
}

// Deprecated: use render.HeadFrame.
func HeadFrame(raw []byte, streamSeq uint64) (*render.Frame, error) {
	return render.HeadFrame(raw, streamSeq)
}

// Deprecated: use render.SeqID.
func SeqID(f *render.Frame) string { return render.SeqID(f) }

// Deprecated: use render.FrameEvents.
func FrameEvents[E any](f *render.Frame, evs []E, write func(id string, ev E) error) error {
	return render.FrameEvents(f, evs, write)
}

// Deprecated: use render.SSEHead.
func SSEHead(o *render.Output, retry time.Duration) { render.SSEHead(o, retry) }

// Deprecated: use render.SSEComment.
func SSEComment(o *render.Output, text string) error { return render.SSEComment(o, text) }

// Deprecated: use render.SSEEvent.
func SSEEvent(o *render.Output, id, event string, data []byte) error {
	return render.SSEEvent(o, id, event, data)
}

// Deprecated: use render.SSEEventJSON.
func SSEEventJSON(o *render.Output, id, event string, v any) error {
	return render.SSEEventJSON(o, id, event, v)
}

// Deprecated: use render.SSEEndEvent.
func SSEEndEvent(o *render.Output, event string, v any) error { return render.SSEEndEvent(o, event, v) }

// Deprecated: use render.NDJSONHead.
func NDJSONHead(o *render.Output) { render.NDJSONHead(o) }

// Deprecated: use render.WriteLine.
func WriteLine(o *render.Output, b []byte) error { return render.WriteLine(o, b) }

// Deprecated: use render.WriteLineJSON.
func WriteLineJSON(o *render.Output, v any) error { return render.WriteLineJSON(o, v) }

// Deprecated: use render.KeepScratch.
func KeepScratch(b []byte) []byte { return render.KeepScratch(b) }

// Deprecated: use render.ReadTextChunk.
func ReadTextChunk(f *render.Frame) (render.TextChunk, bool) { return render.ReadTextChunk(f) }

// Deprecated: use render.ReadPlainText.
func ReadPlainText(f *render.Frame) (render.TextChunk, bool) { return render.ReadPlainText(f) }
