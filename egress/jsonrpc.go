package egress

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
)

// JSONRPCResponse is a JSON-RPC 2.0 response object: exactly one of
// Result and Error is written (result null when Result is nil), and ID nil
// is written as null. It is the one response type of the module; ingress
// aliases it.
type JSONRPCResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *JSONRPCError   `json:"error,omitempty"`
}

var jsonNull = json.RawMessage("null")

// MarshalJSON writes "result" (null when Result is nil) unless Error is set,
// and "id" null when ID is nil, as the specification requires.
func (r JSONRPCResponse) MarshalJSON() ([]byte, error) {
	id := r.ID
	if len(id) == 0 {
		id = jsonNull
	}
	if r.Error != nil {
		return json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *JSONRPCError   `json:"error"`
		}{"2.0", id, r.Error})
	}
	return json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, r.Result})
}

// JSONRPCNotification is a JSON-RPC 2.0 notification (no id).
type JSONRPCNotification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// JSONRPCError is the error member of a JSON-RPC response. It implements
// error.
type JSONRPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *JSONRPCError) Error() string {
	return "jsonrpc " + strconv.Itoa(e.Code) + ": " + e.Message
}

// JSON-RPC 2.0 error codes.
const (
	JSONRPCParseError     = -32700
	JSONRPCInvalidRequest = -32600
	JSONRPCMethodNotFound = -32601
	JSONRPCInvalidParams  = -32602
	JSONRPCInternalError  = -32603
)

// A2A v0.3 error codes.
const (
	A2ATaskNotFound                 = -32001
	A2ATaskNotCancelable            = -32002
	A2APushNotificationNotSupported = -32003
	A2AUnsupportedOperation         = -32004
	A2AContentTypeNotSupported      = -32005
	A2AInvalidAgentResponse         = -32006
	A2AExtendedCardNotConfigured    = -32007
)

// AgentVault profile error codes.
const (
	AgentVaultServerError   = -32000
	AgentVaultTaskNotFound  = -32001
	AgentVaultAuthError     = -32002
	AgentVaultAuthorization = -32003
	AgentVaultInvalidState  = -32004
)

func rpcResult(id json.RawMessage, result any) JSONRPCResponse {
	return JSONRPCResponse{JSONRPC: "2.0", ID: rpcID(id), Result: result}
}

func rpcError(id json.RawMessage, e *JSONRPCError) JSONRPCResponse {
	return JSONRPCResponse{JSONRPC: "2.0", ID: rpcID(id), Error: e}
}

func rpcID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// errData is the data member of pipeline JSON-RPC errors.
type errData struct {
	Code      string `json:"code"`
	Retryable *bool  `json:"retryable,omitempty"`
}

// A2AError maps an error of this package to an A2A JSON-RPC error:
// unknown request → -32001 TaskNotFound, already final → -32002
// TaskNotCancelable, bad resume point → -32602, anything else → -32603.
func A2AError(err error) *JSONRPCError {
	_, code := Classify(err)
	d := errData{Code: code}
	switch {
	case errors.Is(err, ErrNotFound):
		return &JSONRPCError{Code: A2ATaskNotFound, Message: "Task not found", Data: d}
	case errors.Is(err, ErrNotCancelable):
		return &JSONRPCError{Code: A2ATaskNotCancelable, Message: "Task cannot be canceled", Data: d}
	case errors.Is(err, ErrBadRequest):
		return &JSONRPCError{Code: JSONRPCInvalidParams, Message: err.Error(), Data: d}
	case errors.Is(err, context.Canceled):
		return &JSONRPCError{Code: JSONRPCInternalError, Message: "request cancelled", Data: d}
	}
	return &JSONRPCError{Code: JSONRPCInternalError, Message: err.Error(), Data: d}
}

// AgentVaultError maps an error of this package to an AgentVault JSON-RPC
// error: unknown → -32001, already final → -32004, bad request → -32602,
// anything else → -32000.
func AgentVaultError(err error) *JSONRPCError {
	_, code := Classify(err)
	d := errData{Code: code}
	switch {
	case errors.Is(err, ErrNotFound):
		return &JSONRPCError{Code: AgentVaultTaskNotFound, Message: "Task Not Found", Data: d}
	case errors.Is(err, ErrNotCancelable):
		return &JSONRPCError{Code: AgentVaultInvalidState, Message: "Invalid State: task already final", Data: d}
	case errors.Is(err, ErrBadRequest):
		return &JSONRPCError{Code: JSONRPCInvalidParams, Message: err.Error(), Data: d}
	}
	return &JSONRPCError{Code: AgentVaultServerError, Message: err.Error(), Data: d}
}

// ACPError maps an error of this package to an ACP JSON-RPC error:
// bad request → -32602, anything else → -32603 with the pipeline code in
// data.
func ACPError(err error) *JSONRPCError {
	_, code := Classify(err)
	if errors.Is(err, ErrBadRequest) {
		return &JSONRPCError{Code: JSONRPCInvalidParams, Message: err.Error(), Data: errData{Code: code}}
	}
	return &JSONRPCError{Code: JSONRPCInternalError, Message: err.Error(), Data: errData{Code: code}}
}
