package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/internal/retryafter"
)

// Sentinel errors. Functions wrap them with detail; test with errors.Is.
var (
	// ErrInvalidOption reports an option value New or NewClient refuses.
	ErrInvalidOption = errors.New("bridge: invalid option")
	// ErrIdleTimeout is the cause of an upstream call whose answer sent
	// nothing for the idle timeout (or whose headers did not come in it).
	ErrIdleTimeout = errors.New("bridge: upstream idle timeout")
	// ErrAnswerTooLarge is the cause of an upstream answer refused for
	// its size: its frames passed WithMaxAnswerBytes, or the body an SDK
	// read passed WithMaxBodyBytes (code upstream_protocol_error, not
	// retryable).
	ErrAnswerTooLarge = errors.New("bridge: upstream answer too large")
	// ErrBadUpstreamURL reports an upstream URL that is not absolute http(s).
	ErrBadUpstreamURL = errors.New("bridge: upstream URL must be an absolute http or https URL")
	// ErrNoToken is the cause of a call not sent for want of a token of
	// its token source (WithTokenSource: the token endpoint refused the
	// client, failed or could not be reached); the call's *Error says
	// which, as Client.Authorize gives it.
	ErrNoToken = errors.New("bridge: no OAuth 2.0 token")
	// ErrSentUnanswered marks a call that failed after its request was
	// sent and before any answer to it came (the idle timeout ran out
	// waiting): the upstream may be acting on it (an A2A agent whose SDK
	// sends a stream's first bytes with its first event works on the
	// message meanwhile), so the Handler does not make the call again, as
	// it does other retryable failures before any frame: each time would
	// start another task. The request ends with the call's error.
	ErrSentUnanswered = errors.New("bridge: upstream call sent, never answered")
	// ErrAwaitingAnswer is the cause of a call whose request was sent
	// whole (HTTP's request with its body written to the connection, on
	// HTTP/1.1 and HTTP/2 alike) and whose answer did not begin within the
	// idle timeout; it wraps ErrIdleTimeout. An idle timeout that ran out
	// before the request was sent (a slow connection) is ErrIdleTimeout
	// alone: nothing reached the upstream, and a retry is safe. A bridge
	// that must not send a message twice marks a call that ended so
	// ErrSentUnanswered.
	ErrAwaitingAnswer = fmt.Errorf("%w after the request was sent", ErrIdleTimeout)
)

// Error codes of the e2a.error frames an upstream failure ends a request with.
const (
	// CodeUnreachable: the upstream could not be connected to (retryable).
	CodeUnreachable = "upstream_unreachable"
	// CodeTimeout: no answer, or no byte of it, within the timeouts (retryable).
	CodeTimeout = "upstream_timeout"
	// CodeRateLimited: the upstream answered 429 (retryable).
	CodeRateLimited = "upstream_rate_limited"
	// CodeUnavailable: the upstream answered 408, 5xx but 501 and 505 (an
	// A2A agent: an internal or server error), failed the call before
	// answering (a reset, an HTTP/2 stream reset or GOAWAY) or closed an
	// answer before its end (retryable).
	CodeUnavailable = "upstream_unavailable"
	// CodeAuth: the upstream refused the bridge's credentials (401, 403).
	CodeAuth = "upstream_auth"
	// CodeRejected: the upstream refused the request (another 4xx, 501 or
	// 505: it will never serve it).
	CodeRejected = "upstream_rejected"
	// CodeProtocol: the upstream's answer is not its protocol (garbage),
	// or is larger than the bridge takes (WithMaxAnswerBytes).
	CodeProtocol = "upstream_protocol_error"
	// CodeFailed: the upstream reported the task failed, in its protocol.
	CodeFailed = "upstream_failed"
	// CodeCannotResume: a request taken over after a worker died cannot be
	// resumed upstream (a v0.3 agent without resubscribe, a task gone).
	CodeCannotResume = "upstream_cannot_resume"
)

// Error is an upstream failure: the e2a.error code, message and
// retryability it ends a request with, the HTTP status when there was one,
// and how long the upstream asked to wait before a retry.
type Error struct {
	Code       string
	Message    string
	Retryable  bool
	Status     int           // the upstream's HTTP status (0: none)
	RetryAfter time.Duration // the upstream's Retry-After (0: none)
	Err        error         // the cause, if any
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("bridge: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
	}
	return fmt.Sprintf("bridge: %s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// AgentError is the *agent.Error the runtime writes for e.
func (e *Error) AgentError() *agent.Error {
	return &agent.Error{Code: e.Code, Message: e.Message, Retryable: e.Retryable}
}

// Errorf returns an *Error of code (retryable as given).
func Errorf(code string, retryable bool, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Retryable: retryable}
}

// maxErrorBody bounds what is read of an upstream's error answer.
const maxErrorBody = 2 << 10

// MaxErrorMessage is the most characters of an *Error's message the
// Handler writes into a request's e2a.error frame and its log line: the
// rest is cut (Clip, after the upstream's credentials are scrubbed from
// the whole). A bridge quotes an upstream's words in its errors, and
// some of them come whole from an SDK: an A2A agent's error message
// (a JSON-RPC error object, an HTTP+JSON google.rpc.Status, a gRPC
// status), which a2a-go reads with the answer, up to the body bound
// (WithMaxBodyBytes) on JSON-RPC.
const MaxErrorMessage = 1000

// Clip is the start of an upstream's words s for a message: at most n
// characters (an invalid byte counts as one), with "…" when cut. scrub
// (when not nil: the upstream's Scrubber) is applied to the whole of s
// before it is cut: a credential cut in two is no longer found by a scrub,
// so a bridge quoting an upstream's words cuts them with Clip (the
// Handler's own scrub of the message comes too late for a cut made
// before it).
func Clip(s string, n int, scrub func(string) string) string {
	if scrub != nil {
		s = scrub(s)
	}
	for i := 0; i < len(s); n-- {
		if n == 0 {
			return s[:i] + "…"
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s
}

// FromResponse is the *Error of an upstream's non-2xx HTTP answer: 429 →
// rate limited, 408 and 5xx but 501 and 505 → unavailable (all
// retryable), 401/403 → auth, any other (501 Not Implemented and 505 among
// them) → rejected. The message holds the status and the start of the
// body (at most 200 characters, one line). It reads and closes the body.
func FromResponse(resp *http.Response) *Error { return fromResponse(resp, Credentials{}) }

// fromResponse is FromResponse, with creds taken out of the body before it
// is quoted: all of what was read is scrubbed before it is cut, and when
// the body was longer than what is read, a start of a credential at the
// end of what was read is taken out too (creds.scrubCut).
func fromResponse(resp *http.Response, creds Credentials) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	_ = resp.Body.Close()
	// A JSON error page may echo a credential with its '/' escaped
	// (PHP's json_encode writes \/), which a scan of the text misses:
	// the slashes are unescaped first, and a whole page's JSON strings
	// are scrubbed decoded too (scrubJSON), as frames are.
	var body string
	if len(b) > maxErrorBody {
		body = creds.scrubCut(strings.ReplaceAll(string(b[:maxErrorBody]), `\/`, "/"))
	} else {
		out, _ := scrubJSON([]byte(strings.ReplaceAll(string(b), `\/`, "/")), creds.scrub)
		body = string(out)
	}
	msg := Clip(strings.Join(strings.Fields(body), " "), 200, nil)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e := StatusError(resp.StatusCode, "upstream answered "+strconv.Itoa(resp.StatusCode)+": "+msg)
	e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

// StatusError is the *Error of an upstream's answer of HTTP status s that
// is not a success, with message, its code as FromResponse gives it.
func StatusError(s int, message string) *Error {
	e := &Error{Status: s, Message: message}
	switch {
	case s == http.StatusTooManyRequests:
		e.Code, e.Retryable = CodeRateLimited, true
	case s == http.StatusNotImplemented || s == http.StatusHTTPVersionNotSupported:
		// The upstream will never serve this call (llama.cpp's server
		// answers 501 for a feature it lacks): retrying cannot help.
		e.Code = CodeRejected
	case s == http.StatusRequestTimeout || s >= 500:
		e.Code, e.Retryable = CodeUnavailable, true
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e.Code = CodeAuth
	default:
		e.Code = CodeRejected
	}
	return e
}

// retryAfter reads a Retry-After value (internal/retryafter: seconds or an
// HTTP date); 0 when absent or unreadable, bounded to 5 minutes.
func retryAfter(v string, now time.Time) time.Duration {
	d, _ := retryafter.Parse(v, now)
	return min(d, 5*time.Minute)
}

// Classify returns err as an *Error: itself when it is one (or wraps one),
// and otherwise by what it is: an idle timeout or a deadline
// (context.DeadlineExceeded: a dial or call timeout) → timeout; a
// refused or failed connection, a DNS failure → unreachable; an answer cut
// short (unexpected EOF, reset, and any transport failure while reading
// the body of a 2xx answer Client.Do returned: an HTTP/2 stream reset,
// GOAWAY, a lost connection) → unavailable; anything else → protocol
// error. A nil err, a cancelled context (context.Canceled) and the agent
// runtime's own errors (an *agent.Error such as frame_too_large, a Writer
// fenced or closed) are returned as they are. Classify cannot tell the
// request's own deadline from a timeout of the client's (both are
// context.DeadlineExceeded): the Handler, which holds the request's
// context, returns the request's own end (its cancel, deadline or
// shutdown, which the runtime ends) as it is, before classifying.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var be *Error
	if errors.As(err, &be) {
		return be
	}
	if errors.Is(err, context.Canceled) || isRuntimeError(err) {
		return err
	}
	switch {
	case errors.Is(err, ErrIdleTimeout), errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeTimeout, Message: "upstream did not answer in time", Retryable: true, Err: err}
	case isDialError(err):
		return &Error{Code: CodeUnreachable, Message: "upstream unreachable: " + errMessage(err), Retryable: true, Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF):
		return &Error{Code: CodeUnavailable, Message: "upstream closed the answer before its end", Retryable: true, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Code: CodeTimeout, Message: "upstream did not answer in time", Retryable: true, Err: err}
	}
	var body *bodyError
	if errors.As(err, &body) {
		return &Error{Code: CodeUnavailable, Message: "upstream cut the answer short: " + errMessage(body.err), Retryable: true, Err: err}
	}
	return &Error{Code: CodeProtocol, Message: "upstream answer not understood: " + errMessage(err), Err: err}
}

// classifyCall is Classify for a call that failed before its answer's
// headers came: a transport failure that cut the call short (an HTTP/2
// stream reset or GOAWAY, a connection lost or reset, in net/http's
// unexported types: cutShort) is upstream_unavailable and retryable, like
// a reset HTTP/1.1 connection, since nothing was answered; anything else
// Classify calls a protocol error stays one (a malformed answer, plain
// HTTP to an https URL, a TLS certificate refused): retrying cannot help.
func classifyCall(err error) error {
	c := Classify(err)
	var be *Error
	if !errors.As(c, &be) || be.Code != CodeProtocol || !cutShort(err) {
		return c
	}
	return &Error{Code: CodeUnavailable, Message: "upstream cut the call short: " + errMessage(err), Retryable: true, Err: err}
}

// cutShort reports a transport failure that ended a call before its
// answer without saying anything of the upstream's answer: net/http's
// HTTP/2 stream and connection errors and a connection reset or closed
// under it (their types are unexported: their messages are matched). A
// malformed answer ("malformed MIME header", "malformed HTTP response")
// is not one.
func cutShort(err error) bool {
	s := err.Error()
	if strings.Contains(s, "malformed") {
		return false
	}
	for _, m := range []string{"stream error:", "GOAWAY", "client connection lost", "connection reset", "broken pipe",
		"server closed idle connection", "client connection force closed"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// bodyError is a transport failure while reading the body of a 2xx
// answer (Client.Do's bodyReader): the answer was cut short, whatever the
// transport calls it (HTTP/1.1 a reset or an unexpected EOF, HTTP/2 a
// stream error, GOAWAY or a lost connection, in net/http's unexported
// types).
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// isRuntimeError reports an error of the agent runtime rather than of the
// upstream: an *agent.Error (frame_too_large among them) or a Writer's
// refusal (fenced, final written, closed). The runtime ends the request
// for those itself; classifying one as an upstream error would mislabel
// it (a frame too large would become upstream_protocol_error).
func isRuntimeError(err error) bool {
	var ae *agent.Error
	return errors.As(err, &ae) || errors.Is(err, agent.ErrFenced) || errors.Is(err, agent.ErrFinalWritten) ||
		errors.Is(err, agent.ErrWriterClosed)
}

// isDialError reports a failure to reach the upstream at all.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

// errMessage is err's message with the request URL named by its scheme
// and host only, as Upstream.Name names it (Go's url.Error prints the
// URL: its path may hold a token, a webhook's, and its query a key), and
// without any other URL's query.
func errMessage(err error) string {
	s := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) && ue.URL != "" {
		s = strings.ReplaceAll(s, ue.URL, urlOrigin(ue.URL))
	}
	if i := strings.IndexByte(s, '?'); i >= 0 {
		if j := strings.IndexAny(s[i:], "\": "); j > 0 {
			s = s[:i] + s[i+j:]
		} else {
			s = s[:i]
		}
	}
	return s
}

// urlOrigin is the scheme and host of the URL raw ("the upstream" when it
// has none).
func urlOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "the upstream"
	}
	return u.Scheme + "://" + u.Host
}
