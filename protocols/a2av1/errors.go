package a2av1

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// errUnavailable is a temporary failure of the pipeline (the request not
// accepted in time, the server stopping): the SDK's ServerError, which
// its gRPC transport answers INTERNAL; the gRPC binding answers it
// UNAVAILABLE with a RetryInfo (unavailableStatus), the code clients and
// retry policies take as temporary (§3.3.2 System Errors).
var errUnavailable = fmt.Errorf("%w: the pipeline is unavailable; retry later", a2a.ErrServerError)

// sdkError is the error table of A2A v1.0: it maps the pipeline's errors
// (the host's, egress's, the normalizer's) onto the SDK's, whose
// transports write each binding's code (JSON-RPC -32001…, HTTP 404…, gRPC
// NotFound…).
func sdkError(err error) error {
	switch {
	case err == nil:
		return nil
	case isSDKError(err): // the handler's own, already in the SDK's kinds
		return err
	case errors.Is(err, egress.ErrNotFound), errors.Is(err, host.ErrSessionNotFound):
		return a2a.ErrTaskNotFound
	case errors.Is(err, egress.ErrNotCancelable):
		return a2a.ErrTaskNotCancelable
	case errors.Is(err, host.ErrInvalidPool), errors.Is(err, host.ErrUnknownPool), errors.Is(err, host.ErrConflict),
		errors.Is(err, egress.ErrBadRequest): // a resume point that is no event id of the stream
		return fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	case errors.Is(err, host.ErrTooLarge):
		return fmt.Errorf("%w: %v", a2a.ErrInvalidRequest, err)
	case errors.Is(err, host.ErrTaskTerminal):
		return fmt.Errorf("%w: %s", a2a.ErrUnsupportedOperation, strings.TrimPrefix(err.Error(), "ingress: "))
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, host.ErrBackpressure), errors.Is(err, egress.ErrShuttingDown):
		return errUnavailable
	}
	switch normalizer.JSONRPCCode(err) {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidParams:
		return fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	case jsonrpc.CodeMethodNotFound, jsonrpc.CodeA2AUnsupportedOperation:
		return fmt.Errorf("%w: %v", a2a.ErrUnsupportedOperation, err)
	case jsonrpc.CodeA2AContentTypeNotSupported: // a part's media type is not an input mode
		return fmt.Errorf("%w: %v", a2a.ErrUnsupportedContentType, err)
	case jsonrpc.CodeA2APushNotificationNotSupported:
		return fmt.Errorf("%w: %v", a2a.ErrPushNotificationNotSupported, err)
	case jsonrpc.CodeA2AExtendedCardNotConfigured:
		return fmt.Errorf("%w: %v", a2a.ErrExtendedCardNotConfigured, err)
	}
	return fmt.Errorf("%w: the pipeline could not answer; retry later", a2a.ErrServerError)
}

// isSDKError reports whether err is one of the SDK's A2A errors.
func isSDKError(err error) bool {
	for _, c := range rpcCodes {
		if errors.Is(err, c.err) {
			return true
		}
	}
	return false
}

// restRefuse writes a refusal of the gate in the HTTP+JSON binding's error
// shape ({"error":{"code","status","message"}}, google.rpc.Status).
func restRefuse(w http.ResponseWriter, f host.Refusal) {
	status := map[int]string{http.StatusUnauthorized: "UNAUTHENTICATED", http.StatusForbidden: "PERMISSION_DENIED",
		http.StatusTooManyRequests: "RESOURCE_EXHAUSTED", http.StatusServiceUnavailable: "UNAVAILABLE",
		http.StatusMethodNotAllowed: "UNIMPLEMENTED"}[f.Status]
	if status == "" {
		status = "INVALID_ARGUMENT"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": f.Status, "status": status, "message": f.Message}})
}
