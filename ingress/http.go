package ingress

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/obs"
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

// statusRecorder is the answer's status (obs.StatusWriter) and the request
// it published, for the request's metric and log line.
type statusRecorder struct {
	obs.StatusWriter
	requestID string // the request published, for the log line
}

func logRequest(log *slog.Logger, r *http.Request, code int, start time.Time, requestID string) {
	log.LogAttrs(r.Context(), slog.LevelDebug, "http",
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("code", code), slog.Duration("dur", time.Since(start)),
		slog.String("request_id", requestID))
}
