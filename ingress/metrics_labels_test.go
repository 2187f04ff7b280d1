package ingress_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestAcceptedProtocolLabelBounded: the protocol label of
// e2a_ingress_accepted_total takes only the documented values (e2a, a2a,
// agentvault, acp, a2e, agent_request, a2e.workflow), whatever provenance a
// raw E2A envelope carries: the client's source_protocol or
// details.ingress_protocol made one series per value sent, so one
// principal could grow the registry without bound.
func TestAcceptedProtocolLabelBounded(t *testing.T) {
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	url := frontDoor(t, nc, withAPIKey(t), ingress.WithRegisterer(reg))
	bodies := []string{
		`{"params":{"text":"x"},"provenance":{"source_protocol":"client-made-%d"}}`,
		`{"params":{"text":"x"},"provenance":{"source_protocol":"e2a","details":{"ingress_protocol":"client-made-%d"}}}`,
		`{"params":{"text":"x"},"provenance":{"details":{"ingress_protocol":{"n":%d}}}}`,
	}
	for i, b := range bodies {
		resp, body := do(t, "POST", url+"/v1/requests?agent=demo", fmt.Sprintf(b, i), "X-Api-Key", testKey)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	documented := []string{"e2a", "a2a", "agentvault", "acp", "a2e", "agent_request", "a2e.workflow"}
	var total float64
	for _, mf := range mfs {
		if mf.GetName() != "e2a_ingress_accepted_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue()
			for _, l := range m.GetLabel() {
				if l.GetName() == "protocol" && !slices.Contains(documented, l.GetValue()) {
					t.Errorf("e2a_ingress_accepted_total{protocol=%q}: a value the client chose", l.GetValue())
				}
			}
		}
	}
	if total != float64(len(bodies)) {
		t.Errorf("accepted counted %v times, want %d", total, len(bodies))
	}
}

// TestRPCBodyRefusalCounted: a JSON-RPC call refused for its body (over
// the size limit) is an answer of ingress, counted in
// e2a_ingress_requests_total as on every endpoint: /acp counted it, but
// /a2a, whose body is read first to divert A2A v1.0 calls, answered 413
// and counted nothing.
func TestRPCBodyRefusalCounted(t *testing.T) {
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	url := frontDoor(t, nc, ingress.WithMaxBodyBytes(64), ingress.WithRegisterer(reg))
	big := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"text":"` + strings.Repeat("x", 128) + `"}}`
	for _, door := range []string{"acp", "a2a"} {
		resp, body := do(t, "POST", url+"/"+door, big, "Content-Type", "application/json")
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: %d %s, want 413", door, resp.StatusCode, body)
		}
		if n := requestsCounted(t, reg, door, "?", "413"); n != 1 {
			t.Errorf("%s: the 413 counted %v times in e2a_ingress_requests_total{method=\"?\"}, want once", door, n)
		}
	}
}
