package egress

import (
	"net/http"

	"github.com/e2a-pipeline/pipeline/tenant"
)

// ReadGate is what the front door applies to the callers of the read API
// (the endpoints Register mounts) besides their authentication
// (WithAuthorizer): the principal's rate limit, its concurrent stream
// slots, and the challenge of a 401. Ingress installs its own
// (SetReadGate), so that a read counts as a call of any other endpoint
// does, and a stream or a wait as any other streamed answer.
type ReadGate interface {
	// Admit charges the call to p's rate limit. On refusal it answers w
	// itself (429, or 503 when the limiter is unavailable) and returns
	// false.
	Admit(w http.ResponseWriter, r *http.Request, p tenant.Principal) bool
	// StreamSlot takes one of p's concurrent stream slots for a streamed
	// answer (a stream, a wait) until release is called. On refusal it
	// answers w itself (429 too_many_streams, Retry-After) and returns
	// ok=false.
	StreamSlot(w http.ResponseWriter, p tenant.Principal) (release func(), ok bool)
	// Challenge adds to h the WWW-Authenticate challenges of a 401 whose
	// cause is err, the authorizer's error.
	Challenge(h http.Header, err error)
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

// unauthenticated answers 401 to a reader the authorizer refused with err:
// the front door's WWW-Authenticate challenges (RFC 9110 §15.5.2: a 401
// carries one; without a ReadGate the Service knows no scheme to name),
// and the E2A error body.
func (s *Service) unauthenticated(w http.ResponseWriter, err error) {
	if g := s.readGate(); g != nil {
		g.Challenge(w.Header(), err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"error":{"code":"unauthenticated","message":"missing or invalid credentials","retryable":false}}` + "\n"))
}
