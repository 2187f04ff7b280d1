package streams

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// The events ConnEvents reports, as its Count and the stages' metric
// e2a_nats_connection_events_total{event} name them.
const (
	// ConnDisconnected: the connection to the server was lost (not
	// closed by the process); the client reconnects.
	ConnDisconnected = "disconnected"
	// ConnReconnected: the client reconnected (to the same server or
	// another of the cluster) and sent its subscriptions again.
	ConnReconnected = "reconnected"
	// ConnLameDuck: the server said it is shutting down (lame duck mode:
	// a rolling restart); the client moves to another server.
	ConnLameDuck = "lame_duck"
	// ConnSlowConsumer: a subscription's pending buffer overflowed and
	// the client dropped messages for it.
	ConnSlowConsumer = "slow_consumer"
	// ConnPermissionDenied: the server refused a publish or a subscription
	// the user is not allowed (a configuration error of the deployment).
	ConnPermissionDenied = "permission_denied"
	// ConnAsyncError: any other error the server or the client reported
	// asynchronously.
	ConnAsyncError = "error"
)

// ConnEventNames lists every event ConnEvents counts.
var ConnEventNames = []string{ConnDisconnected, ConnReconnected, ConnLameDuck, ConnSlowConsumer, ConnPermissionDenied, ConnAsyncError}

// ConnEvents logs what happens to NATS connections as structured lines
// of the process's logger, and counts it. Without it nats.go says nothing
// of a lost or regained connection, and writes an asynchronous error (a
// permissions violation, a slow consumer dropping messages) to stderr as
// a bare text line outside the process's log format. A line names the
// connection (its name), the server (its URL without credentials) and,
// for a subscription's error, the subject; never a message's content.
//
// One ConnEvents may serve several connections. The zero value is not
// usable: use NewConnEvents.
type ConnEvents struct {
	log    *slog.Logger
	counts [6]atomic.Uint64 // by index in ConnEventNames
}

// NewConnEvents returns a ConnEvents writing to log (slog.Default() when
// nil).
func NewConnEvents(log *slog.Logger) *ConnEvents {
	if log == nil {
		log = slog.Default()
	}
	return &ConnEvents{log: log}
}

// Options returns the nats.Options that report a connection's events to
// e: its disconnected, reconnected, closed, lame duck and asynchronous
// error handlers.
func (e *ConnEvents) Options() []nats.Option {
	return []nats.Option{
		nats.DisconnectErrHandler(e.disconnected),
		nats.ReconnectHandler(e.reconnected),
		nats.ClosedHandler(e.closed),
		nats.LameDuckModeHandler(e.lameDuck),
		nats.ErrorHandler(e.asyncError),
	}
}

// Count returns how many times event (one of ConnEventNames) happened on
// the connections of e; 0 for an unknown event.
func (e *ConnEvents) Count(event string) uint64 {
	for i, n := range ConnEventNames {
		if n == event {
			return e.counts[i].Load()
		}
	}
	return 0
}

func (e *ConnEvents) add(event string) {
	for i, n := range ConnEventNames {
		if n == event {
			e.counts[i].Add(1)
			return
		}
	}
}

// disconnected is called when the connection is lost and when the process
// closes it; only the first is news (the close is logged by closed).
func (e *ConnEvents) disconnected(nc *nats.Conn, err error) {
	if err == nil || nc.IsClosed() || nc.IsDraining() {
		return
	}
	e.add(ConnDisconnected)
	e.log.Warn("NATS connection lost; reconnecting", "connection", nc.Opts.Name, "err", err)
}

func (e *ConnEvents) reconnected(nc *nats.Conn) {
	e.add(ConnReconnected)
	e.log.Info("NATS connection restored", "connection", nc.Opts.Name, "server", serverURL(nc),
		"reconnects", nc.Stats().Reconnects)
}

// closed is called once a connection is closed for good: by the process
// (its shutdown: Debug) or by the client giving up (an error: Error).
// LastError is the connection's last error however old: an error the
// connection outlived (outlived) says nothing of why it closed.
func (e *ConnEvents) closed(nc *nats.Conn) {
	if err := nc.LastError(); err != nil && !outlived(err) {
		e.log.Error("NATS connection closed", "connection", nc.Opts.Name, "err", err)
		return
	}
	e.log.Debug("NATS connection closed", "connection", nc.Opts.Name)
}

func (e *ConnEvents) lameDuck(nc *nats.Conn) {
	e.add(ConnLameDuck)
	e.log.Warn("NATS server shutting down (lame duck mode); the connection will move to another server",
		"connection", nc.Opts.Name, "server", serverURL(nc))
}

// outlived reports an error nats.go keeps as the connection's LastError
// (until a reconnect) though the connection goes on: a slow consumer, a
// permissions violation, too many subscriptions, a message's bad header.
// asyncError said it when it happened; a close at shutdown after it is no
// error.
func outlived(err error) bool {
	return errors.Is(err, nats.ErrSlowConsumer) || errors.Is(err, nats.ErrPermissionViolation) ||
		errors.Is(err, nats.ErrMaxSubscriptionsExceeded) || errors.Is(err, nats.ErrBadHeaderMsg)
}

// serverURL is the URL of the server nc is connected to ("" while it is
// not), credentials redacted by RedactURLs: nats.go's ConnectedUrlRedacted
// hides a password but not a token (nats://TOKEN@host).
func serverURL(nc *nats.Conn) string { return RedactURLs(nc.ConnectedUrl()) }

// asyncError reports an error the server or the client raised outside any
// call: a slow consumer (messages dropped; the stages recover what they
// read from a stream, but the count says the process is overloaded), a
// permissions violation (a deployment's users not matching the stages),
// or another.
func (e *ConnEvents) asyncError(nc *nats.Conn, sub *nats.Subscription, err error) {
	args := []any{"connection", nc.Opts.Name, "server", serverURL(nc)}
	if sub != nil {
		args = append(args, "subject", sub.Subject)
	}
	switch {
	case errors.Is(err, nats.ErrSlowConsumer) && sub != nil && subjects.Matches(subjects.AllLive, sub.Subject):
		// A live subscription (e2a.live.<id>: an egress reader's, e2a
		// tail's) is at most once by design: its buffer is bounded and what
		// it drops is read again from E2A_RESPONSES. It overflows whenever
		// its reader's client reads slower than the agent writes (one slow
		// HTTP client), which says nothing of the process keeping up: not
		// counted as slow_consumer, not warned.
		e.log.Debug("NATS live subscription dropped messages; read again from the stream", args...)
	case errors.Is(err, nats.ErrSlowConsumer):
		e.add(ConnSlowConsumer)
		if sub != nil {
			if dropped, derr := sub.Dropped(); derr == nil {
				args = append(args, "dropped", dropped)
			}
		}
		e.log.Warn("NATS subscription too slow: messages dropped", args...)
	case errors.Is(err, nats.ErrPermissionViolation):
		e.add(ConnPermissionDenied)
		e.log.Error("NATS permissions violation", append(args, "err", err)...)
	default:
		e.add(ConnAsyncError)
		e.log.Error("NATS error", append(args, "err", err)...)
	}
}
