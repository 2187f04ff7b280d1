package ingress

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
)

// writeJSON writes v with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorBody is the JSON error shape of the E2A HTTP API:
// {"error":{"code":"...","message":"...","retryable":false}} (egress's,
// which protocols/e2a writes for POST /v1/requests).
type ErrorBody = egress.APIError

// ErrorDetail is the inside of an ErrorBody.
type ErrorDetail = egress.APIErrorBody

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
