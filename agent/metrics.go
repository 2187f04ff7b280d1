package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/obs"
)

// Outcomes counted by e2a_agent_requests_handled_total{pool,outcome}.
const (
	OutcomeSucceeded     = "succeeded"      // final e2a.complete (or another succeeded final)
	OutcomeFailed        = "failed"         // final e2a.error from the handler (Fail or a returned error)
	OutcomePanic         = "panic"          // the handler panicked; final e2a.error handler_panic
	OutcomeCancelled     = "cancelled"      // cancelled by the client; final e2a.error cancelled
	OutcomeDeadline      = "deadline"       // final e2a.error deadline_exceeded
	OutcomeInterrupted   = "interrupted"    // redelivered partial request, handler cannot resume
	OutcomeMaxDeliveries = "max_deliveries" // final e2a.error max_deliveries written at the give-up delivery (or, its backstop, from the advisory)
	OutcomeAlreadyFinal  = "already_final"  // redelivered request already had its final frame: acked
	OutcomeFenced        = "fenced"         // another worker owns the request: this delivery stopped
	OutcomeHandedBack    = "handed_back"    // shutdown: handed back to the pool (Nak)
	OutcomeInvalid       = "invalid"        // undecodable request, or one no final frame can be written for (terminated)
	OutcomeLost          = "lost"           // frames could not be written (connection or stream down)
)

type metrics struct {
	inFlight     *prometheus.GaugeVec
	handled      *prometheus.CounterVec
	frames       *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	redeliveries *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	s := obs.NewMetricSet(r, obs.Shared) // several workers may share a registry
	m := &metrics{
		inFlight: s.GaugeVec("e2a_agent_in_flight", "Requests being handled by this process.", "pool"),
		handled:  s.CounterVec("e2a_agent_requests_handled_total", "Request deliveries finished, by outcome.", "pool", "outcome"),
		frames:   s.CounterVec("e2a_agent_frames_published_total", "Response frames published (acknowledged by the stream).", "pool"),
		duration: s.HistogramVec("e2a_agent_handler_duration_seconds", "Time from pick-up to the end of a request's handling.",
			prometheus.ExponentialBuckets(0.0005, 2.5, 14), "pool"),
		redeliveries: s.CounterVec("e2a_agent_redeliveries_total", "Requests picked up again after an earlier delivery.", "pool"),
	}
	return m, s.Err()
}
