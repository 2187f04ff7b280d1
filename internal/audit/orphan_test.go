package audit_test

import (
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// Frames stored without an envelope are a request the audit cannot show:
// replay reports a violation (e2a replay exits 1), from the hot streams and
// from E2A_AUDIT alike. It reported such a request complete and sound, as
// if nothing were missing. An envelope without frames stays a sound
// no_frames request (one still queued, or never answered: DESIGN). With
// --pool, a request whose envelope that pool does not hold is not found
// (its frames are no pool's), not a violation: the envelope may be another
// pool's.
func TestReplayFlagsFramesWithoutEnvelope(t *testing.T) {
	js, nc := server(t)
	for i := int64(0); i <= 2; i++ {
		publishFrame(t, js, "orphan", i, frame("orphan", i, i == 2))
	}
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "queued", Method: "chat"})
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "demo-1"}, 1)
	waitAudit(t, js, 7)
	a := mustAuditor(t, nc)
	for _, src := range []audit.Source{audit.SourceAuto, audit.SourceHot, audit.SourceAudit} {
		recs, st := collect(t, a, audit.Query{RequestIDs: []string{"orphan", "queued"}, Source: src})
		s := summaries(recs)["orphan"]
		if s == nil || s.RequestFound || s.Frames != 3 || s.OK() || !strings.Contains(strings.Join(s.Violations, "; "), "envelope") {
			t.Errorf("%s: frames without their envelope: %+v, want a violation naming the missing envelope", src, s)
		}
		if q := summaries(recs)["queued"]; q == nil || q.State != audit.StateNoFrames || !q.OK() || !q.RequestFound {
			t.Errorf("%s: envelope without frames: %+v, want a sound no_frames", src, q)
		}
		if st.Violations != 1 {
			t.Errorf("%s: stats %+v, want 1 request with violations", src, st)
		}
		recs, st = collect(t, a, audit.Query{RequestIDs: []string{"demo-1", "orphan"}, Pool: "other", Source: src})
		for _, id := range []string{"demo-1", "orphan"} {
			if s := summaries(recs)[id]; s == nil || s.State != audit.StateNotFound || !s.OK() || count(recs, audit.KindFrame, id) != 0 {
				t.Errorf("%s --pool other: %s: %+v, want not found (no envelope of pool other), no frames", src, id, s)
			}
		}
		if st.NotFound != 2 || st.Violations != 0 {
			t.Errorf("%s --pool other: stats %+v, want 2 not found, no violation", src, st)
		}
	}
}
