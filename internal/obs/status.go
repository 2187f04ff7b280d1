package obs

import "net/http"

// StatusWriter is an http.ResponseWriter that records the status code of
// its answer, for a request's metric, log line or span: Code is 0 until the
// header or a body is written, then the code written (http.StatusOK for a
// body written without WriteHeader; a later WriteHeader does not change
// it). Flush (and FlushError, its error) reaches the writer under it, and
// Unwrap lets http.ResponseController reach the rest.
type StatusWriter struct {
	http.ResponseWriter
	Code int
}

// WriteHeader records code (unless a code is recorded) and writes it.
func (s *StatusWriter) WriteHeader(code int) {
	if s.Code == 0 {
		s.Code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write records http.StatusOK (unless a code is recorded) and writes b.
func (s *StatusWriter) Write(b []byte) (int, error) {
	if s.Code == 0 {
		s.Code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush flushes the writer under s when it can.
func (s *StatusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// FlushError is Flush returning the error of the writer under s, as
// http.ResponseController's Flush asks for it: a write deadline that
// passed (a client that stopped reading, which egress counts and cuts off
// as a slow client) or a connection gone. Through Flush alone the error
// was lost: the stream saw only its request's context canceled, a client
// gone.
func (s *StatusWriter) FlushError() error {
	return http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap returns the writer under s.
func (s *StatusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

var _ http.Flusher = (*StatusWriter)(nil)
