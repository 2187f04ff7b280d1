package a2aupstream

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// The protocol bindings a Server speaks, as the agent card names them.
const (
	JSONRPC  = a2a.TransportProtocolJSONRPC
	HTTPJSON = a2a.TransportProtocolHTTPJSON
	GRPC     = a2a.TransportProtocolGRPC
)

// Options choose what one Server is.
type Options struct {
	// Binding is the one protocol binding served and declared in the card
	// (its only, so preferred, interface): JSONRPC (the default when
	// empty), HTTPJSON or GRPC.
	Binding a2a.TransportProtocol

	// NoStreaming declares capabilities.streaming false in the card and
	// refuses SendStreamingMessage and SubscribeToTask with the
	// protocol's unsupported-operation error, so a client must use
	// SendMessage (with returnImmediately, or blocking) and poll GetTask.
	NoStreaming bool

	// V03 serves A2A v0.3 instead of v1.0 (a2a-go/v2's server-side compat
	// layer a2acompat/a2av0, and a2agrpc/v0 for gRPC) with a v0.3 agent
	// card (url, preferredTransport, protocolVersion 0.3.0; no
	// supportedInterfaces): what a v0.3-only agent publishes.
	V03 bool

	// Bearer, when set, is the token every A2A call must carry
	// ("Authorization: Bearer <token>", as an HTTP header or gRPC
	// metadata); the card declares a bearer security scheme. A call
	// without it is refused with the protocol's unauthenticated error and
	// recorded with Call.Refused. The card itself stays public.
	Bearer string

	// Token, when set, checks every A2A call's headers (or gRPC
	// metadata) as its authorization server does a bearer token
	// (oauthtest.Server.ValidHeader): a call it refuses is refused like a
	// missing Bearer. The card declares a bearer scheme.
	Token func(http.Header) bool

	// OAuthTokenURL, with Token, makes the card declare an oauth2
	// security scheme ("oauth") whose client-credentials flow asks for
	// tokens there, required with OAuthScopes, instead of a bearer scheme
	// (v1.0 cards).
	OAuthTokenURL string
	OAuthScopes   []string

	// Headers are further headers (or gRPC metadata) every A2A call must
	// carry with exactly these values, refused like a missing bearer.
	Headers map[string]string

	// TLS, when set, serves the card, the HTTP bindings and gRPC over TLS
	// with it (a client certificate asked for, if it says so): the card's
	// URL and interfaces are then https (gRPC: TLS on its host:port).
	TLS *tls.Config

	// SlowInterval is the time between two chunks of the "slow:"
	// scenario (default 50 ms); SlowChunks bounds how many it sends
	// before completing on its own (default 1200, a minute at 50 ms).
	SlowInterval time.Duration
	SlowChunks   int

	// Fault makes the server misbehave from the start (see Fault and
	// Server.SetFault).
	Fault Fault

	// Wire frames the JSON-RPC binding's answers and the card as another
	// language's A2A SDK does (WirePython); a2a-go's own by default.
	Wire Wire

	// Logger receives a2a-go's server logs (default: discarded).
	Logger *slog.Logger
}

func (o *Options) normalize() error {
	switch o.Binding {
	case "":
		o.Binding = JSONRPC
	case JSONRPC, HTTPJSON, GRPC:
	default:
		return fmt.Errorf("%w: binding %q (want %s, %s or %s)", ErrInvalidOption, o.Binding, JSONRPC, HTTPJSON, GRPC)
	}
	if o.SlowInterval < 0 || o.SlowChunks < 0 {
		return fmt.Errorf("%w: negative slow interval or chunk count", ErrInvalidOption)
	}
	if o.SlowInterval == 0 {
		o.SlowInterval = 50 * time.Millisecond
	}
	if o.SlowChunks == 0 {
		o.SlowChunks = 1200
	}
	for k := range o.Headers {
		if k == "" || http.CanonicalHeaderKey(k) == "Authorization" {
			return fmt.Errorf("%w: required header %q (use Bearer for Authorization)", ErrInvalidOption, k)
		}
	}
	if !o.Wire.valid() {
		return fmt.Errorf("%w: wire %q", ErrInvalidOption, o.Wire)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o.Fault.validate(o.Binding)
}

// FaultKind is how a faulty server misbehaves.
type FaultKind int

// The ways a server can misbehave on an A2A call.
const (
	// NoFault serves every call.
	NoFault FaultKind = iota
	// FaultStatus answers with Fault.Status (503, 429…) and Fault.RetryAfter
	// as the Retry-After header; on gRPC the matching code (429 →
	// ResourceExhausted, 503 → Unavailable, 401 → Unauthenticated, other
	// 5xx → Internal or Unavailable).
	FaultStatus
	// FaultHang accepts the call and never answers, until the caller gives
	// up or the server closes.
	FaultHang
	// FaultGarbage answers 200 with bytes that are not the protocol: an
	// event stream whose data is not JSON when the caller accepts
	// text/event-stream, else a body that is not JSON. HTTP bindings only.
	FaultGarbage
	// FaultCloseMidEvent serves the call, but drops the connection in the
	// middle of the server-sent event after Fault.AfterEvents whole ones
	// (by default the second: the first gets through whole) or in the
	// middle of a JSON answer. On gRPC a stream ends with
	// codes.Unavailable after AfterEvents events (by default its first),
	// as a dropped connection does, and a unary call fails with it.
	FaultCloseMidEvent
)

// Fault is a misbehaviour of the server's A2A endpoint.
type Fault struct {
	Kind       FaultKind
	Status     int    // FaultStatus: the HTTP status (default 503)
	RetryAfter string // FaultStatus: the Retry-After header value, if any
	// Times is how many calls misbehave before the server serves normally
	// again; 0 means every call until the fault is changed.
	Times int
	// OnCard applies the fault to the agent card's URL too (by default
	// the card is always served, so a client can start).
	OnCard bool
	// AfterEvents is, for FaultCloseMidEvent, how many events of a
	// stream get through whole before the cut (0 means 1): a cut after
	// the answer has begun.
	AfterEvents int
}

func (f *Fault) validate(b a2a.TransportProtocol) error {
	switch f.Kind {
	case NoFault, FaultHang, FaultCloseMidEvent:
	case FaultStatus:
		if f.Status == 0 {
			f.Status = http.StatusServiceUnavailable
		}
		if f.Status < 400 || f.Status > 599 {
			return fmt.Errorf("%w: fault status %d is not an HTTP error status", ErrInvalidOption, f.Status)
		}
	case FaultGarbage:
		if b == GRPC {
			return fmt.Errorf("%w: a garbage answer has no gRPC form", ErrInvalidOption)
		}
	default:
		return fmt.Errorf("%w: fault kind %d", ErrInvalidOption, f.Kind)
	}
	if f.Times < 0 {
		return fmt.Errorf("%w: negative fault count %d", ErrInvalidOption, f.Times)
	}
	if f.AfterEvents < 0 || (f.AfterEvents > 0 && f.Kind != FaultCloseMidEvent) {
		return fmt.Errorf("%w: events before the cut %d (a non-negative count, for FaultCloseMidEvent only)", ErrInvalidOption, f.AfterEvents)
	}
	return nil
}

// cutAfter is how many events of a stream FaultCloseMidEvent lets through
// whole.
func (f Fault) cutAfter() int { return max(f.AfterEvents, 1) }
