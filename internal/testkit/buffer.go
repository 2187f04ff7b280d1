package testkit

import (
	"bytes"
	"net/http"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers (a logger's
// handlers, a process's output) and a reading test.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// DiscardResponseWriter is an http.ResponseWriter that keeps nothing: for
// tests that count what writing a response allocates.
type DiscardResponseWriter struct{ H http.Header }

// Header returns the headers (a new map when H is nil).
func (d *DiscardResponseWriter) Header() http.Header {
	if d.H == nil {
		d.H = http.Header{}
	}
	return d.H
}

// Write discards p.
func (d *DiscardResponseWriter) Write(p []byte) (int, error) { return len(p), nil }

// WriteHeader does nothing.
func (d *DiscardResponseWriter) WriteHeader(int) {}
