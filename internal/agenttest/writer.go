package agenttest

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// Writer is an agent.Writer that checks each frame as the runtime's writer
// does (e2a.Response.Validate: §12.2's status rules and the kind's body;
// an error wrapping e2a.ErrInvalidResponse, the frame not taken) and keeps
// the frames it took, built for Env (e2a.ResponseFor; request id "q" when
// Env is nil) from sequence Stored on. Frames written after the final one
// are counted ([Writer.AfterFinal]): a caller must never write them. Set
// the fields before the first write; the methods are safe for concurrent
// use.
type Writer struct {
	// Env is the request the frames answer.
	Env *e2a.Envelope
	// Stored is how many frames the request held before this writer:
	// ResumeAfter is Stored-1 (0, the zero value: a new request).
	Stored int64

	mu         sync.Mutex
	frames     []*e2a.Response
	final      bool
	afterFinal int
	metadata   map[string]any
}

var _ agent.Writer = (*Writer)(nil)

// Write checks and takes one frame.
func (w *Writer) Write(kind, status string, body any, final bool) error {
	raw, ok := body.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		raw = b
	}
	r := e2a.Response{ProtocolVersion: e2a.ProtocolVersion, RequestID: "q"}
	if w.Env != nil {
		r = e2a.ResponseFor(w.Env)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.final {
		w.afterFinal++
	}
	r.Sequence = w.Stored + int64(len(w.frames))
	r.ResponseID = fmt.Sprintf("%s-%d", r.RequestID, r.Sequence)
	r.Timestamp = e2a.Now()
	r.ResponseKind, r.Status, r.IsFinal, r.Body = kind, status, final, raw
	r.Provenance = e2a.Provenance{SourceProtocol: e2a.SourceE2A, Converter: "agent"}
	if err := r.Validate(); err != nil {
		return err
	}
	w.frames, w.final = append(w.frames, &r), final
	return nil
}

// Chunk writes an e2a.chunk.
func (w *Writer) Chunk(deltaKind string, delta any) error {
	return w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: deltaKind, Delta: delta}, false)
}

// Complete writes the final e2a.complete.
func (w *Writer) Complete(result any) error {
	return w.Write(e2a.KindComplete, e2a.StatusSucceeded, e2a.CompleteBody{Result: result}, true)
}

// Fail writes the final e2a.error.
func (w *Writer) Fail(code, message string, retryable bool) error {
	return w.Write(e2a.KindError, e2a.StatusFailed, e2a.ErrorBody{Code: code, Message: message, Retryable: retryable}, true)
}

// SetMetadata keeps m.
func (w *Writer) SetMetadata(m map[string]any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.metadata = m
	return nil
}

// ResumeAfter is Stored-1.
func (w *Writer) ResumeAfter() int64 { return w.Stored - 1 }

// Sync has nothing to wait for (each frame is taken before its write
// returns); after the final frame it reports agent.ErrFinalWritten, as the
// runtime's writer does.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.final {
		return agent.ErrFinalWritten
	}
	return nil
}

// Frames returns the frames taken, in order.
func (w *Writer) Frames() []*e2a.Response {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*e2a.Response(nil), w.frames...)
}

// Kinds returns the response kinds of the frames taken, in order.
func (w *Writer) Kinds() []string {
	var out []string
	for _, f := range w.Frames() {
		out = append(out, f.ResponseKind)
	}
	return out
}

// Final reports whether the last frame taken was final.
func (w *Writer) Final() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.final
}

// AfterFinal counts the writes after the final frame.
func (w *Writer) AfterFinal() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.afterFinal
}

// Metadata is the last metadata set.
func (w *Writer) Metadata() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.metadata
}
