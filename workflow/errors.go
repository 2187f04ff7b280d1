package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Error types of spec §8.
const (
	ValidationError = "ValidationError"
	PermissionError = "PermissionError"
	ExecutionError  = "ExecutionError"
	TimeoutError    = "TimeoutError"
	DataError       = "DataError"
)

// Error is an execution error in the spec's format. It never holds a
// credential value: messages and details are built from references and
// redacted response text.
type Error struct {
	Type        string         `json:"type"`
	Message     string         `json:"message"`
	OperationID string         `json:"operationId,omitempty"`
	Details     map[string]any `json:"details,omitempty"`
	Suggestions []string       `json:"suggestions,omitempty"`
	// Retryable tells whether running the same workflow again may succeed
	// (a transient failure); it travels as the e2a.error frame's retryable.
	Retryable bool `json:"retryable"`
	// RetryAfter is a server's Retry-After, when it sent one.
	RetryAfter time.Duration `json:"-"`
	// limit: one of the executor's limits refused to go on (MaxSteps,
	// MaxLoopIterations, MaxDataBytes): the execution ends, even with
	// Options.ContinueOnError.
	limit bool
}

func (e *Error) Error() string {
	if e.OperationID != "" {
		return fmt.Sprintf("%s: operation %q: %s", e.Type, e.OperationID, e.Message)
	}
	return e.Type + ": " + e.Message
}

// Code is the e2a.error code for the error type, e.g. "execution_error".
func (e *Error) Code() string {
	switch e.Type {
	case ValidationError:
		return "validation_error"
	case PermissionError:
		return "permission_error"
	case TimeoutError:
		return "timeout_error"
	case DataError:
		return "data_error"
	}
	return "execution_error"
}

// Body returns the spec's error response: {"error": {...}}.
func (e *Error) Body() map[string]any {
	return map[string]any{"error": e}
}

func (e *Error) withDetail(k string, v any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[k] = v
	return e
}

func newError(typ, format string, a ...any) *Error {
	return &Error{Type: typ, Message: fmt.Sprintf(format, a...)}
}

func permissionError(format string, a ...any) *Error {
	e := newError(PermissionError, format, a...)
	e.Suggestions = []string{"Query /api/v1/capabilities for the APIs and credentials this agent may use"}
	return e
}

func dataError(format string, a ...any) *Error {
	e := newError(DataError, format, a...)
	e.Suggestions = []string{"Check that the path exists and holds the expected type (array, object, …)"}
	return e
}

// errorJSON is the spec format, used in frames and REST answers.
func (e *Error) MarshalJSON() ([]byte, error) {
	type plain Error
	return json.Marshal((*plain)(e))
}

// Vault encryption errors (see [Keyring]).
var (
	// ErrVaultKey reports a vault key that is not 32 bytes of base64, or a
	// sealed credential that no configured key opens.
	ErrVaultKey = errors.New("workflow: vault key")
	// ErrPlaintextCredential reports a credential stored in plaintext (a
	// credentials file or E2A_WORKFLOW_CREDENTIAL_*) while vault keys are
	// configured: every stored value must then be sealed.
	ErrPlaintextCredential = errors.New("workflow: plaintext credential while vault keys are configured")
)
