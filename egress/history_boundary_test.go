package egress

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// A request at the hot/audit boundary (its envelope and first frames aged
// out of the hot streams, its last frames still there) is answered from
// the History, as the hot streams answered it whole, to its owner and to a
// principal that sees every request (the audit role; every reader with
// authentication off). That one read the hot remainder alone: an
// invalid-frame error ("stored sequence 2 where 0 was expected"), 502 on
// the streams, where the History holds the whole request.
func TestHistoryAtTheHotBoundaryForEveryReader(t *testing.T) {
	fh := newFakeHistory()
	e, srv := historyHTTP(t, fh)
	id := historicRequest(t, e) // frames 0, 1, then a burst 2-4
	base := srv.URL + "/v1/requests/" + id
	reads := []testkit.Read{testkit.ReadAPIReads[0], testkit.ReadAPIReads[5], testkit.ReadAPIReads[7]}
	hot := map[string]testkit.Answer{}
	for _, c := range reads {
		hot[c.Name] = read(t, base+c.Path, "owner", c.Hdr...)
	}
	fh.reqs[id] = storedHistoric(t, e, id)
	// The envelope, then frames 0 and 1, age out; the burst is still hot.
	natstest.Purge(t, e.js, streams.RequestsStream)
	natstest.PurgeBelowLast(t, e.js, streams.ResponsesStream)
	for _, key := range []string{"owner", "audit"} {
		for _, c := range reads {
			if got := read(t, base+c.Path, key, c.Hdr...); got != hot[c.Name] {
				t.Errorf("%s as %s at the hot/audit boundary:\n%+v\nwant (as the hot streams answered)\n%+v", c.Name, key, got, hot[c.Name])
			}
		}
	}
}
