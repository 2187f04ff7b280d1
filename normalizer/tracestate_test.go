package normalizer_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
)

// W3C Trace Context: "There can be a maximum of 32 list-members in a
// list." The normalizer's tracestate check enforced only the 512-character
// length and printable ASCII, so a tracestate of 40 short members was kept
// in the envelope and forwarded (NATS headers, frames, the bridge's
// upstream call), where a conforming parser (OpenTelemetry's
// trace.ParseTraceState) rejects the whole header. e2a.CleanTracestate
// now bounds and parses the list-members.
func TestTracestateOver32MembersDropped(t *testing.T) {
	members := make([]string, 40)
	for i := range members {
		members[i] = fmt.Sprintf("v%02d=1", i)
	}
	ts := strings.Join(members, ",") // 239 characters: under the 512 limit
	n := normalizer.New(normalizer.Config{Routes: normalizer.Routes{Default: "demo"}})
	res, err := n.FromE2A(normalizer.Input{
		Body: []byte(`{"request_id":"ts-1","params":{"text":"x"}}`),
		Header: http.Header{
			"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			"Tracestate":  {ts},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Envelope.Trace
	if tr == nil {
		t.Fatal("the valid traceparent was dropped")
	}
	if got := strings.Count(tr.Tracestate, ",") + 1; tr.Tracestate != "" && got > 32 {
		t.Fatalf("envelope tracestate keeps %d list-members (W3C allows 32): %q", got, tr.Tracestate)
	}
}
