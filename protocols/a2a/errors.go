package a2a

import (
	"context"
	"errors"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// Error maps an error of egress to an A2A JSON-RPC error (A2A's error
// table): unknown request → -32001 TaskNotFound (a task whose history
// aged out too: ErrHistoryAgedOut, data code frames_expired), already final → -32002
// TaskNotCancelable, bad resume point → -32602, anything else → -32603;
// data is the pipeline code (egress.ErrorData).
func Error(err error) *jsonrpc.Error {
	_, code := egress.Classify(err)
	d := egress.ErrorData{Code: code}
	switch {
	case errors.Is(err, ErrHistoryAgedOut):
		return &jsonrpc.Error{Code: jsonrpc.CodeA2ATaskNotFound, Message: "Task not found: " + egress.ClientMessage(err),
			Data: egress.ErrorData{Code: egress.CodeFramesExpired}}
	case errors.Is(err, egress.ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeA2ATaskNotFound, Message: "Task not found", Data: d}
	case errors.Is(err, egress.ErrNotCancelable):
		return &jsonrpc.Error{Code: jsonrpc.CodeA2ATaskNotCancelable, Message: "Task cannot be canceled", Data: d}
	case errors.Is(err, egress.ErrBadRequest):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: egress.ClientMessage(err), Data: d}
	case errors.Is(err, context.Canceled):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "request cancelled", Data: d}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: egress.ClientMessage(err), Data: d}
}
