package a2a

import (
	"errors"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// AgentVaultError maps an error of egress to an AgentVault JSON-RPC
// error: unknown → -32001, already final → -32004, bad request → -32602,
// anything else → -32000.
func AgentVaultError(err error) *jsonrpc.Error {
	_, code := egress.Classify(err)
	d := egress.ErrorData{Code: code}
	switch {
	case errors.Is(err, egress.ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeAVTaskNotFound, Message: "Task Not Found", Data: d}
	case errors.Is(err, egress.ErrNotCancelable):
		return &jsonrpc.Error{Code: jsonrpc.CodeAVInvalidState, Message: "Invalid State: task already final", Data: d}
	case errors.Is(err, egress.ErrBadRequest):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: d}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeAVServerError, Message: err.Error(), Data: d}
}
