package host

import (
	"bytes"
	"net/http"
)

// Recorder is an http.ResponseWriter that keeps an answer in memory: its
// status (the first WriteHeader; 200 at the first Write without one), its
// header and its body. Production code does not import
// net/http/httptest; the conformance driver renders into one, and A2A
// v1.0's binding keeps the SDK's answer to a notification in one.
type Recorder struct {
	header http.Header
	// Status is the answer's status (0 before anything was written).
	Status int
	// Body is what was written.
	Body bytes.Buffer
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{header: http.Header{}} }

// Header is the answer's header.
func (r *Recorder) Header() http.Header { return r.header }

// WriteHeader keeps the first status written.
func (r *Recorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
}

// Write keeps b, the status 200 when none was written.
func (r *Recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.Body.Write(b)
}

// Flush does nothing: everything is kept.
func (r *Recorder) Flush() {}

// CopyTo writes the answer kept to w: its header, status (200 when none)
// and body.
func (r *Recorder) CopyTo(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(max(r.Status, http.StatusOK))
	_, _ = w.Write(r.Body.Bytes())
}
