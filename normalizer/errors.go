package normalizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// Sentinel errors. Every error an adapter returns is an [*Error] wrapping
// exactly one of them; test with errors.Is and map with [JSONRPCCode],
// [HTTPStatus] and [A2ECode] to the caller's own error shape.
var (
	// ErrParse: the body is not well-formed JSON (or JSONL), is not valid
	// UTF-8, or nests deeper than e2a.MaxNesting. JSON-RPC -32700, HTTP 400.
	ErrParse = errors.New("parse error")
	// ErrInvalidRequest: well-formed JSON that is not a valid request of the
	// protocol (not an object, a batch, jsonrpc not "2.0", no method, an id
	// that is neither string, number nor null, params neither an object nor
	// an array, a malformed A2E message or E2A envelope). JSON-RPC -32600,
	// HTTP 400.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrMethodNotFound: the method (or ACP export target) is unknown to the
	// protocol. JSON-RPC -32601, HTTP 404.
	ErrMethodNotFound = errors.New("method not found")
	// ErrInvalidParams: the method is known but its params are wrong
	// (missing task id, part without content, workflow structure errors …),
	// or a request, task, context or session id is refused by the request-id
	// grammar (then the error also wraps subjects.ErrInvalidID).
	// JSON-RPC -32602, HTTP 400 (422 for workflow structure errors).
	ErrInvalidParams = errors.New("invalid params")
	// ErrUnsupportedOperation: a method the protocol defines but the
	// pipeline does not offer through the normalizer (A2A push notification
	// config, authenticated extended card). JSON-RPC -32004 (A2A
	// UnsupportedOperation), HTTP 501.
	ErrUnsupportedOperation = errors.New("unsupported operation")
	// ErrPushNotificationNotSupported: an A2A tasks/pushNotificationConfig/*
	// method (the pipeline declares pushNotifications false). It is an
	// ErrUnsupportedOperation; JSON-RPC -32003 (A2A
	// PushNotificationNotSupported), HTTP 501.
	ErrPushNotificationNotSupported = fmt.Errorf("push notifications not supported: %w", ErrUnsupportedOperation)
	// ErrExtendedCardNotConfigured: agent/getAuthenticatedExtendedCard when
	// no extended card is configured. It is an ErrUnsupportedOperation;
	// JSON-RPC -32007 (A2A AuthenticatedExtendedCardNotConfigured), HTTP 501.
	ErrExtendedCardNotConfigured = fmt.Errorf("authenticated extended card not configured: %w", ErrUnsupportedOperation)
	// ErrContentTypeNotSupported: a part whose media type the agent card's
	// input modes do not accept. JSON-RPC -32005 (A2A
	// ContentTypeNotSupported), HTTP 415.
	ErrContentTypeNotSupported = errors.New("content type not supported")
)

// Error is the error every adapter returns. It wraps one sentinel (Kind) and
// carries what the front door needs to answer in the protocol's own shape:
// the JSON-RPC id when one could be read (so that the error response echoes
// it), the A2E req_id, and the per-line errors of a workflow.
type Error struct {
	Kind     error  // one of the sentinels above
	Protocol string // source protocol (e2a.Source*)
	Method   string // the method or A2E type, when known
	// JSONRPCID is the request's id in canonical form; nil when the request
	// had none, its id was null, or it could not be read (answer with null).
	JSONRPCID json.RawMessage
	// ReqID is the A2E message id (the req_id a response must carry).
	ReqID string
	// Msg is a human-readable description (never a secret).
	Msg string
	// Lines lists the structural errors of an A2E workflow, one per problem.
	Lines []LineError
	// Cause is the error behind Kind, when there is one worth testing for:
	// a refused id wraps subjects.ErrInvalidID (and subjects.ErrIDTooLong).
	Cause error
}

// LineError is one structural error of an A2E workflow (JSONL): Line is
// 1-based and counts every line of the input, blank ones included.
type LineError struct {
	Line    int    `json:"line"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (e *LineError) String() string {
	if e.Field != "" {
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Message)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Message)
}

// Error is the error's text for logs and the Go error chain: the package,
// protocol and method, then [Error.ClientMessage].
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("normalizer")
	if e.Protocol != "" {
		b.WriteString(" ")
		b.WriteString(e.Protocol)
	}
	if e.Method != "" {
		b.WriteString(" ")
		b.WriteString(echo(e.Method))
	}
	b.WriteString(": ")
	e.describe(&b, false)
	return b.String()
}

// ClientMessage is what the client that sent the request reads in the
// error answer of its protocol: the kind of error and what was wrong,
// without the pipeline's package prefix ("method not found: \"foo/bar\":
// not an A2A v0.3 method", "invalid params: prompt must be an array of
// content blocks"). An unknown method is named (the client may have sent
// several calls); any other method is the call the client made.
func (e *Error) ClientMessage() string {
	var b strings.Builder
	e.describe(&b, true)
	return b.String()
}

// describe writes the kind, then (named) the unknown method, the message
// and the workflow's first lines.
func (e *Error) describe(b *strings.Builder, named bool) {
	b.WriteString(e.Kind.Error())
	if named && e.Method != "" && errors.Is(e.Kind, ErrMethodNotFound) {
		b.WriteString(": ")
		b.WriteString(echo(e.Method))
	}
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	for i, l := range e.Lines {
		if i == 3 {
			fmt.Fprintf(b, "; … %d more", len(e.Lines)-3)
			break
		}
		b.WriteString("; ")
		b.WriteString(l.String())
	}
}

// Unwrap returns the sentinel, and the Cause when set.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind}
}

// JSONRPCCode maps an error to its JSON-RPC 2.0 error code (A2A codes for
// A2A-specific sentinels); -32603 (internal error) for anything else.
func JSONRPCCode(err error) int {
	switch {
	case errors.Is(err, ErrParse):
		return jsonrpc.CodeParseError
	case errors.Is(err, ErrInvalidRequest):
		return jsonrpc.CodeInvalidRequest
	case errors.Is(err, ErrMethodNotFound):
		return jsonrpc.CodeMethodNotFound
	case errors.Is(err, ErrInvalidParams):
		return jsonrpc.CodeInvalidParams
	case errors.Is(err, ErrPushNotificationNotSupported):
		return jsonrpc.CodeA2APushNotificationNotSupported
	case errors.Is(err, ErrExtendedCardNotConfigured):
		return jsonrpc.CodeA2AExtendedCardNotConfigured
	case errors.Is(err, ErrContentTypeNotSupported):
		return jsonrpc.CodeA2AContentTypeNotSupported
	case errors.Is(err, ErrUnsupportedOperation):
		return jsonrpc.CodeA2AUnsupportedOperation
	}
	return jsonrpc.CodeInternalError
}

// HTTPStatus maps an error to the HTTP status of a REST answer (E2A
// /v1/requests, A2E workflow REST); 500 for anything else. JSON-RPC
// transports answer 200 with a JSON-RPC error object instead.
func HTTPStatus(err error) int {
	var ne *Error
	switch {
	case errors.Is(err, ErrParse), errors.Is(err, ErrInvalidRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrMethodNotFound):
		return http.StatusNotFound
	case errors.As(err, &ne) && len(ne.Lines) > 0:
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrInvalidParams):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnsupportedOperation):
		return http.StatusNotImplemented
	case errors.Is(err, ErrContentTypeNotSupported):
		return http.StatusUnsupportedMediaType
	}
	return http.StatusInternalServerError
}

// A2E error codes used by [A2ECode] (A2EErrorCode values).
const (
	A2ECodeParseError      = "parse_error"
	A2ECodeInvalidRequest  = "invalid_request"
	A2ECodeUnknownMethod   = "unknown_method"
	A2ECodeInvalidParams   = "invalid_params"
	A2ECodeValidationError = "validation_error"
	A2ECodeUnsupported     = "unsupported"
	A2ECodeInternal        = "internal_error"
)

// A2ECode maps an error to the code of an A2E `error` message (never
// retryable: the same input fails the same way). Workflow structure errors
// are "validation_error" (the A2E workflow ValidationError).
func A2ECode(err error) string {
	var ne *Error
	switch {
	case errors.Is(err, ErrParse):
		return A2ECodeParseError
	case errors.Is(err, ErrInvalidRequest):
		return A2ECodeInvalidRequest
	case errors.Is(err, ErrMethodNotFound):
		return A2ECodeUnknownMethod
	case errors.As(err, &ne) && len(ne.Lines) > 0:
		return A2ECodeValidationError
	case errors.Is(err, ErrInvalidParams):
		return A2ECodeInvalidParams
	case errors.Is(err, ErrUnsupportedOperation), errors.Is(err, ErrContentTypeNotSupported):
		return A2ECodeUnsupported
	}
	return A2ECodeInternal
}

// ErrorJSONRPCID returns the JSON-RPC id an error response must carry: the
// request's id when it could be read, JSON null otherwise.
func ErrorJSONRPCID(err error) json.RawMessage {
	var ne *Error
	if errors.As(err, &ne) && len(ne.JSONRPCID) > 0 {
		return ne.JSONRPCID
	}
	return json.RawMessage("null")
}

// maxEcho is how many runes of a client's value an error message quotes.
const maxEcho = 64

// echo is the one way an error message quotes a value the client sent (a
// method, a role, a media type, a part kind, an id, a workflow key …):
// Go-quoted, so that control, format and invalid bytes are escaped, and
// cut after maxEcho runes with an ellipsis after the closing quote, so
// that a huge value never comes back whole in an answer or a log line.
func echo(s string) string {
	n := 0
	for i := range s { // a rune at a time; an invalid byte counts as one
		if n == maxEcho {
			return strconv.Quote(s[:i]) + "…"
		}
		n++
	}
	return strconv.Quote(s)
}

func newErr(kind error, protocol, format string, a ...any) *Error {
	return &Error{Kind: kind, Protocol: protocol, Msg: fmt.Sprintf(format, a...)}
}

// otherPackages are the prefixes of the errors of the packages whose
// errors an adapter words for the client ([detail]).
var otherPackages = []string{"e2a: ", "subjects: ", "json: "}

// detail is the text of err, an error of another package (e2a, subjects,
// encoding/json), as a client reads it in [Error.Msg]: without those
// packages' prefixes, at the start or after a colon ("e2a: invalid
// envelope: …" is "invalid envelope: …"), the Go error chain keeping them.
func detail(err error) string {
	s := err.Error()
	for _, p := range otherPackages {
		s = strings.TrimPrefix(s, p)
		s = strings.ReplaceAll(s, ": "+p, ": ")
	}
	return s
}
