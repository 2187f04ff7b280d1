package egress

import (
	"context"
	"errors"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// ErrorData is the data member of the pipeline's JSON-RPC errors: the
// pipeline code of the error ([Classify]).
type ErrorData struct {
	Code      string `json:"code"`
	Retryable *bool  `json:"retryable,omitempty"`
}

// A2AError maps an error of this package to an A2A JSON-RPC error:
// unknown request → -32001 TaskNotFound, already final → -32002
// TaskNotCancelable, bad resume point → -32602, anything else → -32603.
func A2AError(err error) *jsonrpc.Error {
	_, code := Classify(err)
	d := ErrorData{Code: code}
	switch {
	case errors.Is(err, ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeA2ATaskNotFound, Message: "Task not found", Data: d}
	case errors.Is(err, ErrNotCancelable):
		return &jsonrpc.Error{Code: jsonrpc.CodeA2ATaskNotCancelable, Message: "Task cannot be canceled", Data: d}
	case errors.Is(err, ErrBadRequest):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: d}
	case errors.Is(err, context.Canceled):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "request cancelled", Data: d}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error(), Data: d}
}
