package agent

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes counted by e2a_agent_requests_handled_total{pool,outcome}.
const (
	OutcomeSucceeded     = "succeeded"      // final e2a.complete (or another succeeded final)
	OutcomeFailed        = "failed"         // final e2a.error from the handler (Fail or a returned error)
	OutcomePanic         = "panic"          // the handler panicked; final e2a.error handler_panic
	OutcomeCancelled     = "cancelled"      // cancelled by the client; final e2a.error cancelled
	OutcomeDeadline      = "deadline"       // final e2a.error deadline_exceeded
	OutcomeInterrupted   = "interrupted"    // redelivered partial request, handler cannot resume
	OutcomeMaxDeliveries = "max_deliveries" // final e2a.error max_deliveries written from the advisory
	OutcomeAlreadyFinal  = "already_final"  // redelivered request already had its final frame: acked
	OutcomeFenced        = "fenced"         // another worker owns the request: this delivery stopped
	OutcomeHandedBack    = "handed_back"    // shutdown: handed back to the pool (Nak)
	OutcomeInvalid       = "invalid"        // undecodable request
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
	m := &metrics{
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "e2a_agent_in_flight",
			Help: "Requests being handled by this process.",
		}, []string{"pool"}),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "e2a_agent_requests_handled_total",
			Help: "Request deliveries finished, by outcome.",
		}, []string{"pool", "outcome"}),
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "e2a_agent_frames_published_total",
			Help: "Response frames published (acknowledged by the stream).",
		}, []string{"pool"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "e2a_agent_handler_duration_seconds",
			Help:    "Time from pick-up to the end of a request's handling.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"pool"}),
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "e2a_agent_redeliveries_total",
			Help: "Requests picked up again after an earlier delivery.",
		}, []string{"pool"}),
	}
	if r == nil {
		return m, nil
	}
	var err error
	m.inFlight = register(r, m.inFlight, &err)
	m.handled = register(r, m.handled, &err)
	m.frames = register(r, m.frames, &err)
	m.duration = register(r, m.duration, &err)
	m.redeliveries = register(r, m.redeliveries, &err)
	return m, err
}

// register registers c on r, or returns the collector already registered
// under the same description (several workers sharing a registry).
func register[C prometheus.Collector](r prometheus.Registerer, c C, errp *error) C {
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		if *errp == nil {
			*errp = err
		}
	}
	return c
}
