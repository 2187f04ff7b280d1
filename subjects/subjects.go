package subjects

import (
	"fmt"
	"strings"
)

// Subject prefixes and wildcard filters.
const (
	prefixReq  = "e2a.req."
	prefixResp = "e2a.resp."
	prefixLive = "e2a.live."
	prefixCtl  = "e2a.ctl."

	// AllRequests matches every request subject, as a filter (readers of
	// E2A_REQUESTS and their durable consumers keep it).
	AllRequests = "e2a.req.>"
	// RequestSubjects are the subjects stream E2A_REQUESTS takes, and what
	// its audit source copies: e2a.req.<pool>.<request_id>, one token each.
	// A publish on fewer or more tokens (a request id with a dot not
	// encoded: Request does) is refused by the server at once; with
	// e2a.req.> it was stored and acknowledged, and no pool read it.
	RequestSubjects = "e2a.req.*.*"
	// AllResponses matches every response subject; it is the subject of stream
	// E2A_RESPONSES and the source of its RePublish.
	AllResponses = "e2a.resp.>"
	// AllLive matches every live subject; it is the destination of the
	// RePublish of E2A_RESPONSES.
	AllLive = "e2a.live.>"
	// AllControl matches every control subject; it is the subject of stream
	// E2A_CONTROL.
	AllControl = "e2a.ctl.>"
)

// Kind tells which family a parsed subject belongs to.
type Kind int

// Kinds of E2A subjects.
const (
	KindUnknown Kind = iota
	KindRequest
	KindResponse
	KindLive
	KindControl
)

// String returns the subject family token of k ("req", "resp", "live",
// "ctl") or "unknown".
func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "req"
	case KindResponse:
		return "resp"
	case KindLive:
		return "live"
	case KindControl:
		return "ctl"
	default:
		return "unknown"
	}
}

// Subject is a parsed E2A subject.
type Subject struct {
	Kind Kind
	// Agent is the agent pool; set for KindRequest only.
	Agent string
	// RequestID is the decoded request id.
	RequestID string
}

// Request returns e2a.req.<agent>.<token>, the subject a request for agent
// pool agent is published on.
//
// It returns ErrInvalidPool when agent is not a valid pool name and
// ErrIDTooLong when requestID is too long.
func Request(agent, requestID string) (string, error) {
	if err := ValidatePool(agent); err != nil {
		return "", err
	}
	tok, err := EncodeID(requestID)
	if err != nil {
		return "", err
	}
	return prefixReq + agent + "." + tok, nil
}

// Response returns e2a.resp.<token>, the subject of the response frames of
// a request.
//
// It returns ErrIDTooLong when requestID is too long.
func Response(requestID string) (string, error) { return withID(prefixResp, requestID) }

// ResponseLease returns e2a.resp.<token>.lease, the subject in
// E2A_RESPONSES whose last stream sequence fences the frames a worker writes
// in batches: a redelivered worker stores a lease message there before its
// first frame, and every batched frame expects the lease its worker holds
// (0, none, for a first delivery), so the frames of an older delivery are
// refused from then on. It is no response subject (ParseResponse refuses
// it) and is not republished.
//
// It returns ErrIDTooLong when requestID is too long.
func ResponseLease(requestID string) (string, error) {
	s, err := withID(prefixResp, requestID)
	if err != nil {
		return "", err
	}
	return s + leaseSuffix, nil
}

// leaseSuffix ends a ResponseLease subject.
const leaseSuffix = ".lease"

// AllResponseFrames matches every response subject and no lease: the source
// of E2A_RESPONSES's RePublish.
const AllResponseFrames = "e2a.resp.*"

// LiveOfFrames is the RePublish destination for AllResponseFrames.
const LiveOfFrames = "e2a.live.{{wildcard(1)}}"

// Live returns e2a.live.<token>, the subject the server republishes the
// response frames of a request on.
//
// It returns ErrIDTooLong when requestID is too long.
func Live(requestID string) (string, error) { return withID(prefixLive, requestID) }

// Control returns e2a.ctl.<token>, the subject of control messages (cancel)
// for a request.
//
// It returns ErrIDTooLong when requestID is too long.
func Control(requestID string) (string, error) { return withID(prefixCtl, requestID) }

func withID(prefix, requestID string) (string, error) {
	tok, err := EncodeID(requestID)
	if err != nil {
		return "", err
	}
	return prefix + tok, nil
}

// RequestAnyPool returns e2a.req.*.<token>: the filter matching the
// request subject of requestID whatever its agent pool (to find a request's
// envelope without knowing its pool).
//
// It returns ErrIDTooLong when requestID is too long.
func RequestAnyPool(requestID string) (string, error) { return withID(prefixReq+"*.", requestID) }

// RequestFilter returns e2a.req.<agent>.>, the filter subject of the
// consumer of agent pool agent.
//
// It returns ErrInvalidPool when agent is not a valid pool name.
func RequestFilter(agent string) (string, error) {
	if err := ValidatePool(agent); err != nil {
		return "", err
	}
	return prefixReq + agent + ".>", nil
}

// RequestPool returns the agent pool of a request subject
// e2a.req.<agent>.<token>, whatever its token (ParseRequest also decodes
// the token: a request published on a token that does not decode still
// names its pool).
//
// It returns ErrNotE2ASubject when subject is not of that shape and
// ErrInvalidPool when the agent token is not a valid pool name.
func RequestPool(subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, prefixReq)
	if !ok {
		return "", notE2A(subject, KindRequest)
	}
	agent, tok, ok := strings.Cut(rest, ".")
	if !ok || strings.IndexByte(tok, '.') >= 0 {
		return "", notE2A(subject, KindRequest)
	}
	if err := ValidatePool(agent); err != nil {
		return "", err
	}
	return agent, nil
}

// ParseRequest returns the agent pool and the request id of a request
// subject e2a.req.<agent>.<token>.
//
// It returns ErrNotE2ASubject when subject is not of that shape,
// ErrInvalidPool when the agent token is not a valid pool name, and
// ErrInvalidToken or ErrIDTooLong when the id token does not decode.
func ParseRequest(subject string) (agent, requestID string, err error) {
	agent, err = RequestPool(subject)
	if err != nil {
		return "", "", err
	}
	id, err := DecodeID(subject[len(prefixReq)+len(agent)+1:])
	if err != nil {
		return "", "", err
	}
	return agent, id, nil
}

// ParseResponse returns the request id of a response subject
// e2a.resp.<token>.
//
// It returns ErrNotE2ASubject when subject is not of that shape, and
// ErrInvalidToken or ErrIDTooLong when the id token does not decode.
func ParseResponse(subject string) (string, error) { return parseID(subject, prefixResp, KindResponse) }

// ParseLive returns the request id of a live subject e2a.live.<token>.
//
// It returns ErrNotE2ASubject when subject is not of that shape, and
// ErrInvalidToken or ErrIDTooLong when the id token does not decode.
func ParseLive(subject string) (string, error) { return parseID(subject, prefixLive, KindLive) }

// ParseControl returns the request id of a control subject e2a.ctl.<token>.
//
// It returns ErrNotE2ASubject when subject is not of that shape, and
// ErrInvalidToken or ErrIDTooLong when the id token does not decode.
func ParseControl(subject string) (string, error) { return parseID(subject, prefixCtl, KindControl) }

func parseID(subject, prefix string, k Kind) (string, error) {
	tok, ok := strings.CutPrefix(subject, prefix)
	if !ok || strings.IndexByte(tok, '.') >= 0 {
		return "", notE2A(subject, k)
	}
	return DecodeID(tok)
}

// Parse parses any request, response, live or control subject.
//
// It returns the errors of ParseRequest, ParseResponse, ParseLive and
// ParseControl; ErrNotE2ASubject when subject is of none of these kinds.
func Parse(subject string) (Subject, error) {
	var (
		s   Subject
		err error
	)
	switch {
	case strings.HasPrefix(subject, prefixReq):
		s.Kind = KindRequest
		s.Agent, s.RequestID, err = ParseRequest(subject)
	case strings.HasPrefix(subject, prefixResp):
		s.Kind = KindResponse
		s.RequestID, err = ParseResponse(subject)
	case strings.HasPrefix(subject, prefixLive):
		s.Kind = KindLive
		s.RequestID, err = ParseLive(subject)
	case strings.HasPrefix(subject, prefixCtl):
		s.Kind = KindControl
		s.RequestID, err = ParseControl(subject)
	default:
		return Subject{}, notE2A(subject, KindUnknown)
	}
	if err != nil {
		return Subject{}, err
	}
	return s, nil
}

func notE2A(subject string, k Kind) error {
	if k == KindUnknown {
		return fmt.Errorf("%w: %.120q", ErrNotE2ASubject, subject)
	}
	return fmt.Errorf("%w: %.120q is not a %s subject", ErrNotE2ASubject, subject, k)
}
