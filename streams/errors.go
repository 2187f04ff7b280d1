package streams

import "errors"

var (
	// ErrInvalidConfig is returned by Config.Validate, and by everything that
	// validates a Config first, when a field is out of range.
	ErrInvalidConfig = errors.New("streams: invalid config")

	// ErrInvalidOptions is returned when consumer options or embedded server
	// options are invalid.
	ErrInvalidOptions = errors.New("streams: invalid options")

	// ErrInvalidConnConfig is returned by Connect when a ConnConfig is
	// incomplete or contradictory.
	ErrInvalidConnConfig = errors.New("streams: invalid connection config")

	// ErrDriftNotUpdatable is returned by Apply when an existing stream or
	// bucket differs from its definition in a field the server refuses to
	// update (storage type, retention to or from work queue, removing
	// DenyDelete or DenyPurge, …). The resource is left as it is; its
	// drift is in the Report.
	ErrDriftNotUpdatable = errors.New("streams: drift in a field the server cannot update")

	// ErrNotPermitted is returned by Apply when the server refused this
	// connection's NATS user a create or update the definitions needed (a
	// stage's user may only read the streams: deploy/nats/accounts.conf),
	// typically a stage of a newer build started before `e2a streams
	// apply` of that build ran. Apply sends no further create or update
	// then; the resources it left are in the Report, ActionFailed with
	// their drift.
	ErrNotPermitted = errors.New("streams: this NATS user may not create or update the streams: run `e2a streams apply` of this version as a user that may (admin)")

	// ErrNoMessages is returned by the direct get functions when the stream
	// holds no message matching the request.
	ErrNoMessages = errors.New("streams: no messages")

	// ErrDirectGet is returned by the direct get functions when the server
	// answers with an unexpected status (bad request, stream unavailable, …).
	ErrDirectGet = errors.New("streams: direct get failed")

	// ErrServerNotReady is returned by StartEmbedded when the server did not
	// accept connections or enable JetStream in time.
	ErrServerNotReady = errors.New("streams: embedded server not ready")
)
