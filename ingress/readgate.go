package ingress

import (
	"errors"
	"net/http"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// readGate is the Server's egress.ReadGate, which New installs on its
// egress.Service: egress's read API (GET /v1/requests/{id}, its stream)
// counts against the principal's rate limit as every endpoint does, a
// read stream or wait takes one of its stream slots as every streamed
// answer does, and an authentication failure is answered as the front
// doors answer it (401 with their challenges, 403 forbidden).
type readGate struct{ s *Server }

var _ egress.ReadGate = readGate{}

// Admit charges one request to p's rate limit, then refuses a query
// parameter given twice with different values (?from=1&from=5: the read
// API read the first, an ambiguous resume point) and a query that is no
// URL-encoded form (?from=%zz: read as no resume point) as the front
// doors do (requestRefusal, 400 invalid_request); a refusal is answered
// in the E2A error shape.
func (g readGate) Admit(w http.ResponseWriter, r *http.Request, p tenant.Principal) bool {
	f, canceled := g.s.rateLimit(r.Context(), principalOf(p), e2aproto.Name, 1, w.Header(), false, nil)
	if f == nil && !canceled {
		pr, _ := g.s.opts.protocols.Lookup(e2aproto.Name)
		f = requestRefusal(r, w.Header(), pr, false)
	}
	if f != nil {
		e2aproto.Refuse(w, *f)
	}
	return f == nil && !canceled
}

// StreamSlot takes one of p's stream slots; a refusal is answered in the
// E2A error shape.
func (g readGate) StreamSlot(w http.ResponseWriter, p tenant.Principal) (func(), bool) {
	return g.s.acquireStream(w, principalOf(p), e2aproto.Refuse)
}

// Refuse answers a reader the authorizer refused with err as the front
// doors answer the same error (authRefusal): 401 with the server's
// challenges, 403 forbidden for a valid credential that may not be used,
// 429 for a client over the failure limit. An error that is none of those
// is an authorizer that could not decide (an identity provider unreachable,
// its deadline passed): no verdict on the caller, answered 503
// "unavailable", retryable, with Retry-After, as the doors answer their
// rate limiter down, and without the error's text (logged instead).
// Without authentication it is egress's own 401, with no challenge. A
// refusal is counted in e2a_ingress_auth_failures_total under e2a, as the
// gate counts a door's.
func (g readGate) Refuse(w http.ResponseWriter, err error) bool {
	if g.s.opts.auth == nil {
		return false
	}
	g.s.metrics.authFailures.WithLabelValues(e2aproto.Name).Inc()
	if !authVerdict(err) {
		g.s.opts.log.Warn("read API: the authorizer could not decide", "err", err)
		e2aproto.Refuse(w, failure{Status: http.StatusServiceUnavailable, Code: "unavailable",
			Message: "authentication unavailable; retry later", Retryable: true, RPCCode: jsonrpc.CodeInternalError,
			RetryAfter: time.Second})
		return true
	}
	e2aproto.Refuse(w, g.s.authRefusal(w.Header(), err))
	return true
}

// authVerdict reports whether err, an authorizer's, is a verdict on the
// caller's credential (unauthenticated, forbidden, throttled) rather than
// a failure to reach one.
func authVerdict(err error) bool {
	return errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrForbidden) || errors.Is(err, ErrAuthThrottled)
}

// principalOf is the principal p as the rate limit and the stream slots
// key it (its user id).
func principalOf(p tenant.Principal) Principal {
	return Principal{UserID: p.ID, Roles: p.Roles, Open: p.Open}
}
