package acp

import (
	"errors"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// errData is the data member of the pipeline's ACP errors.
type errData struct {
	Code string `json:"code"`
}

// Error maps an error of egress to an ACP JSON-RPC error: bad request →
// -32602, anything else → -32603 with the pipeline code in data.
func Error(err error) *jsonrpc.Error {
	_, code := egress.Classify(err)
	if errors.Is(err, egress.ErrBadRequest) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: errData{Code: code}}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error(), Data: errData{Code: code}}
}
