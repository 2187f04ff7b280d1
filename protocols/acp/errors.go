package acp

import (
	"errors"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// Error maps an error of egress to an ACP JSON-RPC error: bad request →
// -32602, anything else → -32603 with the pipeline code in data.
func Error(err error) *jsonrpc.Error {
	_, code := egress.Classify(err)
	if errors.Is(err, egress.ErrBadRequest) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: egress.ClientMessage(err), Data: egress.ErrorData{Code: code}}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: egress.ClientMessage(err), Data: egress.ErrorData{Code: code}}
}
