package egress

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// CutSlow returns w and r for a handler that writes its answer itself (an
// SDK's stream or JSON answer; a Service's renderers write to a
// render.Output, which has the write timeout): once a Write or Flush of
// the writer returned has waited timeout for the client to take its
// bytes, r's context ends with the cause ErrSlowClient (a read under it
// counted with CountedAs is counted slow_client) and the connection's
// write deadline is set in the past, so that the waiting write, and any
// later one, fails. Without it such a handler waited in its write for as
// long as a client that stopped reading kept its connection, holding its
// read, its live subscription and its stream slot. Call done once the
// handler returned. timeout ≤ 0 returns w and r as they are.
func CutSlow(w http.ResponseWriter, r *http.Request, timeout time.Duration) (cw http.ResponseWriter, cr *http.Request, done func()) {
	if timeout <= 0 {
		return w, r, func() {}
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	s := &slowCut{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
	var once sync.Once
	s.timer = time.AfterFunc(time.Hour, func() {
		once.Do(func() {
			// The cause first: the failed write ends the request's
			// context too, as a client gone.
			cancel(ErrSlowClient)
			_ = s.rc.SetWriteDeadline(longAgo)
		})
	})
	s.timer.Stop()
	return s, r.WithContext(ctx), func() {
		s.timer.Stop()
		cancel(nil)
	}
}

// longAgo is a write deadline that has passed.
var longAgo = time.Unix(1, 0)

// slowCut is CutSlow's writer: timer runs while a write or flush waits,
// up to timeout.
type slowCut struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timer   *time.Timer
	timeout time.Duration
}

func (s *slowCut) Write(b []byte) (int, error) {
	s.timer.Reset(s.timeout)
	defer s.timer.Stop()
	return s.ResponseWriter.Write(b)
}

// FlushError flushes, timed as a write is, and returns the flush's error
// (http.ResponseController asks for it).
func (s *slowCut) FlushError() error {
	s.timer.Reset(s.timeout)
	defer s.timer.Stop()
	return s.rc.Flush()
}

// Flush is FlushError for a handler that asks for an http.Flusher.
func (s *slowCut) Flush() { _ = s.FlushError() }

// Unwrap lets http.ResponseController reach the writer under it.
func (s *slowCut) Unwrap() http.ResponseWriter { return s.ResponseWriter }
