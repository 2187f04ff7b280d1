package agent

import (
	"math"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// builtHeaderBound is headerBound as it was: the headers built, and
// measured by nats.go.
func builtHeaderBound(wr *writer) int {
	h := nats.Header{}
	if headerSafe(wr.requestID) {
		h.Set(subjects.HeaderRequestID, wr.requestID)
	}
	if wr.trace != nil {
		if headerSafe(wr.trace.Traceparent) {
			h.Set(subjects.HeaderTraceparent, wr.trace.Traceparent)
		}
		if headerSafe(wr.trace.Tracestate) {
			h.Set(subjects.HeaderTracestate, wr.trace.Tracestate)
		}
	}
	h.Set(subjects.HeaderSequence, strconv.FormatInt(math.MaxInt64, 10))
	h.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(math.MaxUint64, 10))
	h.Set(subjects.HeaderFrames, strconv.Itoa(e2a.MaxBurstFrames))
	return int(streams.MessageSize(&nats.Msg{Header: h}))
}

// TestHeaderBoundCounted: a frame's headers at their longest are counted
// without building them (7 allocations per request before, none now), to
// the byte nats.go's measure of them built gives, whatever the request id
// and trace context hold (headers left out, values nats.go trims).
func TestHeaderBoundCounted(t *testing.T) {
	ids := []string{"r1", "", " padded ", "a\tb", "line\nfeed", "01a23d70-7d0c-7a89-acc8-0b2ee082a3ca", "ünï", "x\u00a0"}
	traces := []*e2a.TraceContext{nil, {}, {Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Tracestate: "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7"},
		{Traceparent: " x", Tracestate: "y\r\n"}}
	for _, id := range ids {
		for _, tc := range traces {
			wr := &writer{requestID: id, trace: tc}
			if got, want := wr.headerBound(), builtHeaderBound(wr); got != want {
				t.Errorf("request %q, trace %+v: header bound %d, want %d", id, tc, got, want)
			}
		}
	}
	wr := &writer{requestID: "01a23d70-7d0c-7a89-acc8-0b2ee082a3ca", trace: traces[3]}
	if n := testing.AllocsPerRun(100, func() { _ = wr.headerBound() }); n > 0 {
		t.Errorf("headerBound: %v allocations, want none", n)
	}
}
