package ingress

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"
)

// writeJSON writes v with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorBody is the JSON error shape of the E2A HTTP API:
// {"error":{"code":"...","message":"...","retryable":false}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an ErrorBody.
type ErrorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

func writeError(w http.ResponseWriter, status int, code, msg string, retryable bool) {
	if retryable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg, Retryable: retryable}})
}

type statusRecorder struct {
	http.ResponseWriter
	code      int
	requestID string // the request published, for the log line
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func logRequest(log *slog.Logger, r *http.Request, code int, start time.Time, requestID string) {
	log.LogAttrs(r.Context(), slog.LevelDebug, "http",
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("code", code), slog.Duration("dur", time.Since(start)),
		slog.String("request_id", requestID))
}
