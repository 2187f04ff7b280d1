package e2a

import (
	"encoding/json"
	"net/http"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// Name is the protocol's name in the registry and in metric labels.
const Name = "e2a"

// Path is the endpoint of the front door: POST only.
const Path = "/v1/requests"

// HeaderWarning carries Accepted.Warning on every answer of an accepted
// request (streamed ones included): the pool has no live worker right now.
const HeaderWarning = "E2A-Warning"

// AcceptedBody is the body of a 202 answer to POST /v1/requests.
type AcceptedBody struct {
	RequestID string `json:"request_id"`
	Pool      string `json:"pool"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Warning says the pool has no live worker right now.
	Warning string            `json:"warning,omitempty"`
	Links   map[string]string `json:"links"`
}

// Links are the links of an accepted request: itself (GET, the JSON view)
// and its stream.
func Links(requestID string) map[string]string {
	p := Path + "/" + egress.PathSegment(requestID)
	return map[string]string{"self": p, "stream": p + "/stream"}
}

// Error codes of a refused POST /v1/requests (besides the gate's:
// unauthenticated, forbidden, rate_limited, too_many_streams; and the
// host's too_many_turns, host.TooManyTurns).
const (
	CodeInvalidRequest   = "invalid_request"
	CodeInvalidRequestID = "invalid_request_id"
	CodeInvalidAgent     = "invalid_agent"
	CodeUnknownAgent     = "unknown_agent"
	CodeConflict         = "conflict"
	CodeTaskTerminal     = "task_terminal" // 409: the task_id names an A2A task that has finished
	CodeBodyTooLarge     = "body_too_large"
	CodeReadError        = "read_error"
	CodeClientClosed     = "client_closed"
	CodeUnavailable      = egress.CodeUnavailable
)

// WriteError writes the E2A error body {"error":{code,message,retryable}}
// with status; a retryable error carries Retry-After (1 s) unless one is
// set.
func WriteError(w http.ResponseWriter, status int, code, msg string, retryable bool) {
	if retryable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, egress.APIError{Error: egress.APIErrorBody{Code: code, Message: msg, Retryable: retryable}})
}

// Refuse writes a refusal of the gate (or of the stream slots) in the E2A
// error shape, its wait as Retry-After unless w already has one (the
// gate's): WriteError's 1 s only when the refusal knows no wait.
func Refuse(w http.ResponseWriter, f host.Refusal) {
	f.SetRetryAfter(w.Header())
	WriteError(w, f.Status, f.Code, f.Message, f.Retryable)
}

var _ host.Refuse = Refuse

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
