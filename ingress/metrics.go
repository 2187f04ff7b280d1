package ingress

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

type metrics struct {
	requests     *prometheus.CounterVec
	accepted     *prometheus.CounterVec
	publish      prometheus.Histogram
	authFailures *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec
	turnsRefused *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	s := obs.NewMetricSet(reg, obs.Exclusive)
	m := &metrics{
		requests: s.CounterVec("e2a_ingress_requests_total",
			"Requests answered by ingress, by protocol, method and HTTP status code.", "protocol", "method", "code"),
		accepted: s.CounterVec("e2a_ingress_accepted_total",
			"Requests durably accepted (PubAck, not a duplicate), whatever the answer mode (202, SSE, NDJSON, wait, JSON-RPC, A2E, workflow API), by protocol: e2a, a2a, agentvault, acp, a2e, agent_request or workflow.",
			"protocol"),
		publish: s.Histogram("e2a_ingress_publish_seconds", "Time from publish to PubAck for accepted requests.",
			[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}),
		authFailures: s.CounterVec("e2a_ingress_auth_failures_total",
			"Requests refused by authentication or authorization, by protocol.", "protocol"),
		rateLimited: s.CounterVec("e2a_ingress_rate_limited_total",
			"Requests refused by the per-principal rate limit, by protocol.", "protocol"),
		turnsRefused: s.CounterVec("e2a_ingress_turns_refused_total",
			"Turns of a task or ACP session refused because as many of its turns wait behind its running turn as E2A_MAX_WAITING_TURNS allows (ErrTooManyTurns), by protocol as e2a_ingress_accepted_total.",
			"protocol"),
	}
	return m, s.Err()
}

// acceptedProtocol is the protocol label of e2a_ingress_accepted_total for
// an accepted envelope: "a2e.workflow" (normalizer.ProtocolWorkflow, the
// registry's name of the protocol) for a workflow execution, else the finer
// ingress origin (provenance.details.ingress_protocol: agentvault, a2e,
// agent_request), else the source protocol (e2a, a2a, acp). Only those
// values: a raw E2A envelope keeps the provenance its client wrote, and
// any other value would be a series per string a client sends.
func acceptedProtocol(env *e2a.Envelope) string {
	if strings.HasPrefix(env.Method, "a2e.workflow.") {
		// The workflow protocol's one name in every series
		// (e2a_ingress_requests_total, auth failures, rate limits).
		return normalizer.ProtocolWorkflow
	}
	if env.Provenance == nil {
		return e2a.SourceE2A
	}
	switch p, _ := env.Provenance.Details[e2a.DetailIngressProtocol].(string); p {
	case e2a.SourceAgentVault, e2a.SourceA2E, e2a.SourceLegacy:
		return p
	}
	switch p := env.Provenance.SourceProtocol; p {
	case e2a.SourceA2A, e2a.SourceACP:
		return p
	}
	return e2a.SourceE2A
}
