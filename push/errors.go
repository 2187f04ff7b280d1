package push

import (
	"context"
	"errors"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

var (
	// ErrInvalidOption is returned by Run, NewStore, Redeliver and ListDead
	// when an option is out of range or a required argument is missing.
	ErrInvalidOption = errors.New("push: invalid option")

	// ErrInvalidConfig is returned by Store.Create for a config that is not
	// acceptable apart from its URL: no task id, an id or token too long, an
	// id "." or ".." (a dot segment no HTTP+JSON path can name), an
	// authentication scheme other than Bearer or Basic with credentials
	// (credentials without a scheme too), a scheme that is no RFC 9110
	// token. The A2A layers answer it with InvalidParams (-32602).
	ErrInvalidConfig = errors.New("push: invalid push notification config")

	// ErrURLRefused is returned by Store.Create when the webhook URL breaks
	// the URL rules: not https (unless its host is allow-listed), user
	// information in the URL, no host, a host that does not resolve, or an
	// address that is loopback, private, link-local, metadata, multicast
	// or unspecified (the workflow executor's SSRF rules) unless allow-
	// listed. The A2A layers answer it with InvalidParams (-32602); the
	// message names the rule, never the credentials.
	ErrURLRefused = errors.New("push: webhook URL refused")

	// ErrLimit is returned by Store.Create when the task already has
	// MaxPerTask configs, its configs would take more bytes than 8 KiB a
	// config on average (at least 40 KiB), or the principal has
	// MaxTasksPerPrincipal tasks with configs. The A2A layers answer it with InvalidParams (-32602, HTTP
	// 400, gRPC INVALID_ARGUMENT): A2A defines no quota error, and a
	// resource-exhausted answer (429) would say "retry soon", which this
	// limit does not clear by itself.
	ErrLimit = errors.New("push: push notification config limit reached")

	// ErrNotFound is returned by Store.Get and Store.Delete when the
	// principal has no such config: the same whether it does not exist or
	// is another principal's (the A2A layers answer TaskNotFound's code
	// with NotFoundMessage).
	ErrNotFound = errors.New("push: push notification config not found")

	// ErrInvalidPageToken is returned by Store.List for a page token it did
	// not issue (InvalidParams in A2A).
	ErrInvalidPageToken = errors.New("push: invalid page token")

	// ErrUnavailable wraps a failure of the store (NATS) itself; the A2A
	// layers answer it as an internal or unavailable error.
	ErrUnavailable = errors.New("push: store unavailable")
)

// Kind is the class of a Store error an A2A layer answers: each
// generation maps it to its own error, so which store error is the
// caller's fault and which hides a config is decided here once.
type Kind int

const (
	// KindInternal: the store failed (ErrUnavailable, anything unknown):
	// an internal error, without the cause's text.
	KindInternal Kind = iota
	// KindInvalidParams: ErrInvalidConfig, ErrURLRefused,
	// ErrInvalidPageToken, ErrLimit (InvalidParams, -32602, the error's
	// text as message: it names the rule, never a credential).
	KindInvalidParams
	// KindNotFound: ErrNotFound (TaskNotFound's code, -32001, HTTP 404,
	// gRPC NOT_FOUND, as A2A v1.0 §3.1.8 answers a config that does not
	// exist, with NotFoundMessage: another principal's config is answered
	// as no config).
	KindNotFound
	// KindCanceled: the caller's context ended; answered as the context's
	// error.
	KindCanceled
)

// KindOf classifies an error of the Store.
func KindOf(err error) Kind {
	switch {
	case errors.Is(err, ErrInvalidConfig), errors.Is(err, ErrURLRefused),
		errors.Is(err, ErrInvalidPageToken), errors.Is(err, ErrLimit):
		return KindInvalidParams
	case errors.Is(err, ErrNotFound):
		return KindNotFound
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return KindCanceled
	}
	return KindInternal
}

// NotFoundMessage is the message of ErrNotFound for config id as the A2A
// layers answer it: the config named (cut by jsonrpc.QuoteForMessage), not
// the task, which the layer found the caller's before asking the store
// ("task not found: push notification config not found" told a client
// that its task was gone when only a deleted config was).
func NotFoundMessage(id string) string {
	return "push notification config " + jsonrpc.QuoteForMessage(id) + " not found"
}
