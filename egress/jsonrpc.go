package egress

import (
	"context"
	"errors"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// errData is the data member of pipeline JSON-RPC errors.
type errData struct {
	Code      string `json:"code"`
	Retryable *bool  `json:"retryable,omitempty"`
}

// A2AError maps an error of this package to an A2A JSON-RPC error:
// unknown request → -32001 TaskNotFound, already final → -32002
// TaskNotCancelable, bad resume point → -32602, anything else → -32603.
func A2AError(err error) *jsonrpc.Error {
	_, code := Classify(err)
	d := errData{Code: code}
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

// AgentVaultError maps an error of this package to an AgentVault JSON-RPC
// error: unknown → -32001, already final → -32004, bad request → -32602,
// anything else → -32000.
func AgentVaultError(err error) *jsonrpc.Error {
	_, code := Classify(err)
	d := errData{Code: code}
	switch {
	case errors.Is(err, ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeAVTaskNotFound, Message: "Task Not Found", Data: d}
	case errors.Is(err, ErrNotCancelable):
		return &jsonrpc.Error{Code: jsonrpc.CodeAVInvalidState, Message: "Invalid State: task already final", Data: d}
	case errors.Is(err, ErrBadRequest):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: d}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeAVServerError, Message: err.Error(), Data: d}
}
