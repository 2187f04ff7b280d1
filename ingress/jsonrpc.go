package ingress

import (
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// The JSON-RPC front doors (/a2a, /acp, stdio) decode, answer batches and
// write with package jsonrpc; these are its names as ingress uses them.
type (
	// Request is one JSON-RPC 2.0 request or notification.
	Request = jsonrpc.Request
	// Error is a JSON-RPC 2.0 error object; it implements error.
	Error = jsonrpc.Error
	// Response is a JSON-RPC 2.0 response.
	Response = jsonrpc.Response
)
