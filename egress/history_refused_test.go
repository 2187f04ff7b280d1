package egress

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Another principal's request looks exactly like an unknown id
// (docs/security.md: "A refused read does the same work as an unknown id
// before its 404"). With a History, an unknown UUIDv7 id is looked up in
// it, so another principal's request that E2A_REQUESTS still holds is
// looked up too (the answer dropped): while the History fails (or is
// slow, or the principal's lookup turns are busy) both answer alike, and
// the 503 names neither the id nor the cause.
func TestHistoryRefusedHotReadLooksLikeUnknown(t *testing.T) {
	t.Run("history failing: status differs", func(t *testing.T) {
		fh := newFakeHistory()
		fh.err = errors.New("E2A_AUDIT: no responders")
		e, srv := historyHTTP(t, fh)
		id := historicRequest(t, e) // u_001's, still in the hot streams
		unknown := uuid.Must(uuid.NewV7()).String()
		for _, p := range []string{"", "/stream", "?wait=true"} {
			theirs := read(t, srv.URL+"/v1/requests/"+id+p, "other")
			none := read(t, srv.URL+"/v1/requests/"+unknown+p, "other")
			if theirs != none {
				t.Errorf("%s as another principal: u_001's request answers\n%+v\nan unknown id\n%+v", p, theirs, none)
			}
		}
	})
	t.Run("same work: a lookup for both", func(t *testing.T) {
		fh := newFakeHistory()
		fh.gate = make(chan struct{})
		close(fh.gate)
		e, srv := historyHTTP(t, fh, WithHistoryLimits(1, time.Minute))
		id := historicRequest(t, e)
		read(t, srv.URL+"/v1/requests/"+id, "other")
		theirs := len(fh.lookups())
		read(t, srv.URL+"/v1/requests/"+uuid.Must(uuid.NewV7()).String(), "other")
		none := len(fh.lookups()) - theirs
		if theirs != none {
			t.Errorf("History lookups: %d for another's request, %d for an unknown id", theirs, none)
		}
	})
}
