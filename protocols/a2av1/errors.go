package a2av1

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/errordetails"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// unavailableRetry is how long a client is told to wait before it retries
// a temporary failure of the pipeline (errUnavailable): gRPC's RetryInfo
// (unavailableStatus), the HTTP+JSON binding's Retry-After and RetryInfo,
// JSON-RPC's RetryInfo.
const unavailableRetry = time.Second

// retryInfoType is the @type of a google.rpc.RetryInfo detail (ProtoJSON
// Any).
const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// errTemporary is the SDK's ServerError of a temporary failure (unavailable):
// restCodes answers it 503 UNAVAILABLE where the SDK's transport says 500
// INTERNAL; its ErrorInfo reason stays SERVER_ERROR, the only one a2a-go/v2's
// clients read back as ServerError.
var errTemporary = fmt.Errorf("%w (temporary)", a2a.ErrServerError)

// errUnavailable is a temporary failure of the pipeline (the request not
// accepted in time, the server stopping), A2A v1.0 §3.3.2's System Error
// a client may retry: the SDK's ServerError carrying a google.rpc.RetryInfo
// (unavailable), which every binding writes beside the ErrorInfo: JSON-RPC
// -32000 with both in error.data, HTTP+JSON 503 UNAVAILABLE with Retry-After
// (restCodes, writeREST, specStatusWriter), gRPC UNAVAILABLE with the
// RetryInfo (unavailableStatus; the SDK's transport said INTERNAL, a
// permanent failure to clients and retry policies). Shared: never modified.
var errUnavailable error = unavailable(a2a.ErrServerError.Error()+": the pipeline is unavailable; retry later", unavailableRetry)

// unavailable is a temporary failure with message msg, to be retried after
// retry: an a2a.Error whose typed details (the RetryInfo) the SDK's
// transports and Error, restError write among the answer's details.
func unavailable(msg string, retry time.Duration) *a2a.Error {
	return &a2a.Error{Err: errTemporary, Message: msg, TypedDetails: []*errordetails.Typed{retryInfo(retry)}}
}

// retryInfo is a google.rpc.RetryInfo detail of delay d (ProtoJSON: a
// Duration is seconds with an s suffix), in the whole seconds every
// protocol says a wait in (host.WaitSeconds: Retry-After's).
func retryInfo(d time.Duration) *errordetails.Typed {
	return errordetails.NewTyped(retryInfoType, map[string]any{"retryDelay": strconv.FormatInt(host.WaitSeconds(d), 10) + "s"})
}

// errorDetails are the details of the A2A error err with ErrorInfo reason
// reason, as the SDK's transports write them: an a2a.Error's details (its
// Details as a google.protobuf.Struct, its typed details but an ErrorInfo),
// then the ErrorInfo with A2A's domain and the time.
func errorDetails(err error, reason string) []*errordetails.Typed {
	var out []*errordetails.Typed
	var ae *a2a.Error
	if errors.As(err, &ae) {
		if len(ae.Details) > 0 {
			out = append(out, errordetails.NewFromStruct(ae.Details))
		}
		for _, d := range ae.TypedDetails {
			if d.TypeURL != errordetails.ErrorInfoType {
				out = append(out, d)
			}
		}
	}
	return append(out, errordetails.NewErrorInfo(reason, a2a.ProtocolDomain,
		map[string]string{"timestamp": now().UTC().Format(time.RFC3339)}))
}

// retryAfter is the Retry-After header value of details: the delay of
// their google.rpc.RetryInfo in whole seconds (host.WaitSeconds); "" without
// one.
func retryAfter(details []*errordetails.Typed) string {
	for _, d := range details {
		if d == nil || d.TypeURL != retryInfoType {
			continue
		}
		s, _ := d.Value["retryDelay"].(string)
		delay, err := time.ParseDuration(s)
		if err != nil || delay <= 0 {
			return ""
		}
		return strconv.FormatInt(host.WaitSeconds(delay), 10)
	}
	return ""
}

// sdkError is the error table of A2A v1.0: it maps the pipeline's errors
// (the host's, egress's, the normalizer's) onto the SDK's, whose
// transports write each binding's code (JSON-RPC -32001…, HTTP 404…, gRPC
// NotFound…) and its text as the message (asSDK: what a client reads).
func sdkError(err error) error {
	switch {
	case err == nil:
		return nil
	case isSDKError(err): // the handler's own, already in the SDK's kinds
		return err
	case errors.Is(err, a2aproto.ErrHistoryAgedOut): // nothing of the task can be read: no retry helps
		return asSDK(a2a.ErrTaskNotFound, err)
	case errors.Is(err, egress.ErrNotFound), errors.Is(err, host.ErrSessionNotFound):
		return a2a.ErrTaskNotFound
	case errors.Is(err, egress.ErrNotCancelable):
		return a2a.ErrTaskNotCancelable
	case errors.Is(err, host.ErrInvalidPool), errors.Is(err, host.ErrUnknownPool), errors.Is(err, host.ErrConflict),
		errors.Is(err, egress.ErrBadRequest): // a resume point that is no event id of the stream
		return asSDK(a2a.ErrInvalidParams, err)
	case errors.Is(err, host.ErrTooLarge):
		return asSDK(a2a.ErrInvalidRequest, err)
	case errors.Is(err, host.ErrTaskTerminal):
		return asSDK(a2a.ErrUnsupportedOperation, err)
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		// The caller's deadline (gRPC's grpc-timeout): the server's timer
		// may fire before the client's on a loaded machine, and its answer
		// is then DEADLINE_EXCEEDED (HTTP 504) as the client's own would be
		// (was UNAVAILABLE, "retry later": TestA2AV1GRPCDeadlineKeepsTask
		// failed so in CI on 700e7e2).
		return err
	case errors.Is(err, host.ErrBackpressure), errors.Is(err, egress.ErrShuttingDown),
		errors.Is(err, nats.ErrTimeout): // a read the NATS server left unanswered (egress: unavailable)
		return errUnavailable
	}
	switch normalizer.JSONRPCCode(err) {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidParams:
		return asSDK(a2a.ErrInvalidParams, err)
	case jsonrpc.CodeMethodNotFound, jsonrpc.CodeA2AUnsupportedOperation:
		return asSDK(a2a.ErrUnsupportedOperation, err)
	case jsonrpc.CodeA2AContentTypeNotSupported: // a part's media type is not an input mode
		return asSDK(a2a.ErrUnsupportedContentType, err)
	case jsonrpc.CodeA2APushNotificationNotSupported:
		return asSDK(a2a.ErrPushNotificationNotSupported, err)
	case jsonrpc.CodeA2AExtendedCardNotConfigured:
		return asSDK(a2a.ErrExtendedCardNotConfigured, err)
	}
	return fmt.Errorf("%w: the pipeline could not answer; retry later", a2a.ErrServerError)
}

// asSDK is err as the SDK's error kind: its text the kind's, then what a
// client reads of err (egress.ClientMessage: no package prefix of the
// pipeline's), the kind not said twice ("invalid params:
// message.parts must not be empty", not "invalid params: normalizer a2a
// \"message/send\": invalid params: …"). Logs keep err.Error().
func asSDK(kind, err error) error {
	return fmt.Errorf("%w: %s", kind, strings.TrimPrefix(egress.ClientMessage(err), kind.Error()+": "))
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
// shape ({"error":{"code","status","message"}}, google.rpc.Status); a 503
// (the gate's limiter unavailable) as errUnavailable is written
// (refusalUnavailable).
func restRefuse(w http.ResponseWriter, f host.Refusal) {
	if e, ok := refusalUnavailable(f); ok {
		writeREST(w, restError(e))
		return
	}
	status := map[int]string{http.StatusUnauthorized: "UNAUTHENTICATED", http.StatusForbidden: "PERMISSION_DENIED",
		http.StatusTooManyRequests: "RESOURCE_EXHAUSTED", http.StatusServiceUnavailable: "UNAVAILABLE",
		http.StatusMethodNotAllowed: "UNIMPLEMENTED", http.StatusNotFound: "NOT_FOUND"}[f.Status]
	if status == "" {
		status = "INVALID_ARGUMENT"
	}
	f.SetRetryAfter(w.Header()) // unless the gate set one
	e := map[string]any{"code": f.Status, "status": status, "message": f.Message}
	if d := typedDetails(f); d != nil {
		// Its data and wait, as the JSON-RPC and gRPC bindings carry them
		// (a rate limit's 429 had only its Retry-After header).
		e["details"] = d
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}

// refusalUnavailable is a refusal 503 of the gate (a fail-closed rate
// limiter unavailable: a temporary failure) as the temporary failure the
// bindings answer (unavailable): its message, its wait (unavailableRetry
// when it names none), its data a google.protobuf.Struct detail; ok is
// false for any other refusal.
func refusalUnavailable(f host.Refusal) (e *a2a.Error, ok bool) {
	if f.Status != http.StatusServiceUnavailable {
		return nil, false
	}
	e = unavailable(f.Message, cmp.Or(f.RetryAfter, unavailableRetry))
	if f.Data != nil {
		var m map[string]any
		if b, err := json.Marshal(f.Data); err == nil && json.Unmarshal(b, &m) == nil && len(m) > 0 {
			e.Details = m
		}
	}
	return e, true
}

// writeREST writes st, an HTTP+JSON error answer, with its status and, when
// its details carry a google.rpc.RetryInfo, Retry-After (§3.3.2: the HTTP
// retry guidance, which proxies and HTTP clients' retry policies read).
func writeREST(w http.ResponseWriter, st restStatus) {
	if ra := retryAfter(st.Error.Details); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st.Error.Code)
	_ = json.NewEncoder(w).Encode(st)
}
