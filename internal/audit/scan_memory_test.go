package audit_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// kindsOf returns the kinds of id's records, in order.
func kindsOf(recs []audit.Record, id string) []string {
	var out []string
	for _, r := range recs {
		if r.RequestID == id {
			out = append(out, r.Kind)
		}
	}
	return out
}

// TestReplayScanHoldsOnlyRequestsInFlight: a scan of E2A_AUDIT held every
// request it met, envelope and frames, until it had read its whole range:
// `e2a replay --pool X --source audit` over 90 days held the pool's
// history; and it kept the id of every frame met before its request. Here
// requests are stored a hundred at a time, their envelopes copied before
// their final frames, or after them (sourcing does not order the two), so
// at most a hundred are in flight; the scan holds no more, remembers no
// more finished ones than its window nor more ids than twice the frames
// met early, and reports each request as it finishes, its records
// together.
func TestReplayScanHoldsOnlyRequestsInFlight(t *testing.T) {
	const n, inFlight, window = 2000, 100, 50
	js, nc := server(t)
	a := mustAuditor(t, nc)
	peakOpen, peakFinished, peakEarly := -1, -1, -1
	audit.SetScanWindow(a, window, func(open, finished, early int) { peakOpen, peakFinished, peakEarly = open, finished, early })
	id := func(i int) string { return fmt.Sprintf("r-%04d", i) }
	var stored uint64
	var finished []string
	for from := 0; from < n; from += inFlight {
		envelopesFirst := from%(2*inFlight) == 0
		requests := func() {
			for i := from; i < from+inFlight; i++ {
				natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: id(i)})
			}
			stored += inFlight
			waitAudit(t, js, stored)
		}
		if envelopesFirst {
			requests()
		}
		for i := from + inFlight - 1; i >= from; i-- {
			publishFrame(t, js, id(i), 0, frame(id(i), 0, true))
		}
		stored += inFlight
		waitAudit(t, js, stored)
		if !envelopesFirst {
			requests() // each finishes as its envelope is met
		}
		for i := range inFlight {
			if envelopesFirst {
				i = inFlight - 1 - i // finished as their final frames are met
			}
			finished = append(finished, id(from+i))
		}
	}

	recs, st := collect(t, a, audit.Query{Pool: "demo", Source: audit.SourceAudit})
	if st.Requests != n || st.Complete != n || st.Frames != n || st.Violations != 0 {
		t.Fatalf("stats %+v", st)
	}
	if peakOpen < 1 || peakOpen > inFlight || peakFinished > window || peakEarly > 2*inFlight {
		t.Fatalf("the scan held %d requests at once (%d in flight at most), remembered %d finished ones (window %d) and %d ids of early frames",
			peakOpen, inFlight, peakFinished, window, peakEarly)
	}
	t.Logf("held at most %d open requests, %d finished, %d ids of early frames", peakOpen, peakFinished, peakEarly)
	var order []string
	for i := 0; i+2 < len(recs); i += 3 {
		r := recs[i : i+3]
		if r[0].Kind != audit.KindRequest || r[1].Kind != audit.KindFrame || r[2].Kind != audit.KindSummary ||
			r[1].RequestID != r[0].RequestID || r[2].RequestID != r[0].RequestID || !r[2].Summary.OK() {
			t.Fatalf("records %d..%d: %+v", i, i+2, r)
		}
		order = append(order, r[0].RequestID)
	}
	if len(recs) != 3*n || !slices.Equal(order, finished) {
		t.Fatalf("%d records; requests in the order %v..., want the order they finished %v...", len(recs), order[:min(5, len(order))], finished[:5])
	}
}

// TestReplayScanReportsFramesAfterTheFinalOne: a scan reports a request
// when its final frame is read; a frame of it stored after that one, while
// fewer requests than the scan's window have finished since, is reported
// with a further summary (the first one counted, its violation too); one
// stored later is not (documented: the scan no longer knows the request).
func TestReplayScanReportsFramesAfterTheFinalOne(t *testing.T) {
	js, nc := server(t)
	a := mustAuditor(t, nc)
	audit.SetScanWindow(a, 2, nil)
	var stored uint64
	wait := func() { stored++; waitAudit(t, js, stored) }
	request := func(id string) { natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: id}); wait() }
	final := func(id string) { publishFrame(t, js, id, 0, frame(id, 0, true)); wait() }
	late := func(id string) { publishFrame(t, js, id, 1, frame(id, 1, false)); wait() }

	request("late")
	final("late")
	late("late")
	request("gone")
	final("gone")
	for _, id := range []string{"x1", "x2", "x3"} {
		request(id)
		final(id)
	}
	late("gone")

	recs, st := collect(t, a, audit.Query{Pool: "demo", Source: audit.SourceAudit})
	if st.Requests != 5 || st.Complete != 5 || st.Violations != 1 || st.Frames != 6 {
		t.Fatalf("stats %+v", st)
	}
	want := []string{audit.KindRequest, audit.KindFrame, audit.KindSummary, audit.KindFrame, audit.KindSummary}
	if got := kindsOf(recs, "late"); !slices.Equal(got, want) {
		t.Fatalf("late: records %v, want %v", got, want)
	}
	var sums []*audit.Summary
	for _, r := range recs {
		if r.RequestID == "late" && r.Kind == audit.KindSummary {
			sums = append(sums, r.Summary)
		}
	}
	if !sums[0].OK() || sums[0].Frames != 1 || sums[1].Frames != 2 || sums[1].State != audit.StateComplete ||
		len(sums[1].Violations) != 1 || !strings.Contains(sums[1].Violations[0], "frame 1 stored after the final frame 0") {
		t.Fatalf("late: summaries %+v, %+v", sums[0], sums[1])
	}
	if got := kindsOf(recs, "gone"); !slices.Equal(got, want[:3]) || !summaries(recs)["gone"].OK() {
		t.Fatalf("gone: records %v, want %v and no violation", got, want[:3])
	}
}
