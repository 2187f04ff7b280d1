package egress

import (
	"net/http"

	"github.com/e2a-pipeline/pipeline/tenant"
)

// ReadGate is what the front door applies to the callers of the read API
// (the endpoints Register mounts) besides their authentication
// (WithAuthorizer): the principal's rate limit, its concurrent stream
// slots, and the answer to a refused credential (401 with the challenge,
// 403). Ingress installs its own (SetReadGate), so that a read counts as
// a call of any other endpoint does, a stream or a wait as any other
// streamed answer, and a credential is refused as on the POST.
type ReadGate interface {
	// Admit charges the call to p's rate limit and checks what every
	// door checks of a request (a query that is no URL-encoded form, a
	// query parameter given twice with different values). On refusal it answers w itself (429, or 503 when
	// the limiter is unavailable, 400) and returns false.
	Admit(w http.ResponseWriter, r *http.Request, p tenant.Principal) bool
	// StreamSlot takes one of p's concurrent stream slots for a streamed
	// answer (a stream, a wait) until release is called. On refusal it
	// answers w itself (429 too_many_streams, Retry-After) and returns
	// ok=false.
	StreamSlot(w http.ResponseWriter, p tenant.Principal) (release func(), ok bool)
	// Refuse answers a reader the authorizer (WithAuthorizer) refused with
	// err as the front door answers the same error on its endpoints: 401
	// with its WWW-Authenticate challenges, 403 for a credential that is
	// valid but may not be used. It returns false, with nothing written,
	// when it leaves the answer to the Service (its 401).
	Refuse(w http.ResponseWriter, err error) bool
}

// SetReadGate installs g on the read API (nil removes it). Ingress calls
// it as it is built over the Service (ingress.New), before anything is
// served.
func (s *Service) SetReadGate(g ReadGate) {
	if g == nil {
		s.gate.Store(nil)
		return
	}
	s.gate.Store(&g)
}

// readGate returns the installed ReadGate, nil when none is.
func (s *Service) readGate() ReadGate {
	if g := s.gate.Load(); g != nil {
		return *g
	}
	return nil
}

// admit charges a read of principal p to its rate limit (ReadGate.Admit);
// on refusal the answer is written.
func (s *Service) admit(w http.ResponseWriter, r *http.Request, p tenant.Principal) bool {
	g := s.readGate()
	return g == nil || g.Admit(w, r, p)
}

// streamSlot takes one of p's stream slots for a streamed answer of the
// read API (ReadGate.StreamSlot); on refusal the answer is written.
func (s *Service) streamSlot(w http.ResponseWriter, p tenant.Principal) (release func(), ok bool) {
	g := s.readGate()
	if g == nil {
		return func() {}, true
	}
	return g.StreamSlot(w, p)
}

// refuseCredential answers a reader the authorizer refused with err: as
// the front door answers the same error (ReadGate.Refuse: 401 with its
// WWW-Authenticate challenges, RFC 9110 §15.5.2, or 403 forbidden), else
// 401 in the E2A error body (without a ReadGate the Service knows no
// scheme to name in a challenge, nor which error is a forbidden one).
func (s *Service) refuseCredential(w http.ResponseWriter, err error) {
	if g := s.readGate(); g != nil && g.Refuse(w, err) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"error":{"code":"unauthenticated","message":"missing or invalid credentials","retryable":false}}` + "\n"))
}
