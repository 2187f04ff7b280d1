package ingress_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestWorkflowFromRegistry: the workflow API is the routes of the
// registry's a2e.workflow entry, mounted in the protocols' loop: served
// with WithWorkflow and counted in e2a_ingress_requests_total under
// a2e.workflow; not served without an executor, nor by a registry
// without the entry (404 both).
func TestWorkflowFromRegistry(t *testing.T) {
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	exec := workflow.New(workflow.Options{})
	url := frontDoor(t, nc, ingress.WithWorkflow(exec), ingress.WithRegisterer(reg))
	if resp, b := do(t, "GET", url+"/api/v1/capabilities", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("capabilities: %d %s", resp.StatusCode, b)
	}
	if n := requestsCounted(t, reg, "a2e.workflow", "GET /api/v1/capabilities", "200"); n != 1 {
		t.Errorf("counted %v times under a2e.workflow", n)
	}

	var ps []protocols.Protocol
	for _, p := range protocols.All() {
		if p.Name != protocols.Workflow {
			ps = append(ps, p)
		}
	}
	without, err := protocols.New(ps...)
	if err != nil {
		t.Fatal(err)
	}
	for name, u := range map[string]string{
		"no executor":       frontDoor(t, nc),
		"no registry entry": frontDoor(t, nc, ingress.WithWorkflow(exec), ingress.WithProtocols(without)),
	} {
		if resp, b := do(t, "GET", u+"/api/v1/capabilities", ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
	}
}

// requestsCounted is e2a_ingress_requests_total{protocol, method, code}
// in reg.
func requestsCounted(t *testing.T, reg *prometheus.Registry, protocol, method, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "e2a_ingress_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["protocol"] == protocol && labels["method"] == method && labels["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestWorkflowProtocolLabelOne: the workflow API's series name its
// protocol as the registry does, a2e.workflow, in
// e2a_ingress_accepted_total as in e2a_ingress_requests_total (and the
// auth failures and rate-limit refusals): accepted_total said "workflow",
// so one protocol was two label values and a panel joining them by
// protocol missed it.
func TestWorkflowProtocolLabelOne(t *testing.T) {
	reg := prometheus.NewRegistry()
	exec := workflow.New(workflow.Options{})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithWorkflow(exec), ingress.WithWorkflowRateLimits(ingress.RateLimits{}),
		ingress.WithRegisterer(reg)))
	p.Pool(workflow.Pool, exec)
	const body = `{"workflow":"{\"type\":\"operationUpdate\",\"operationId\":\"wait\",\"operation\":{\"Wait\":{\"duration\":1}}}\n{\"type\":\"beginExecution\",\"executionId\":\"exec-l\",\"operationOrder\":[\"wait\"]}"}`
	resp, b := do(t, "POST", p.URL+"/api/v1/workflows/execute", body, "Content-Type", "application/json")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("execute: %d %s", resp.StatusCode, b)
	}
	if n := requestsCounted(t, reg, protocols.Workflow, "POST /api/v1/workflows/execute", "200"); n != 1 {
		t.Errorf("requests_total counted %v times under %s", n, protocols.Workflow)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "e2a_ingress_accepted_total" {
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	if len(got) != 1 || got[protocols.Workflow] != 1 {
		t.Errorf("e2a_ingress_accepted_total by protocol %v, want {%s: 1}", got, protocols.Workflow)
	}
}
