package push

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the stage's series (e2a_push_*).
type metrics struct {
	delivered, retried, failed, dead prometheus.Counter
	lag                              prometheus.Histogram
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "e2a_push_delivered_total",
			Help: "Task updates a webhook accepted (2xx)."}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{Name: "e2a_push_retried_total",
			Help: "Failed deliveries to be retried after a backoff."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "e2a_push_failed_total",
			Help: "Failed delivery attempts (transient and permanent)."}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{Name: "e2a_push_dead_lettered_total",
			Help: "Task updates moved to the dead-letter stream E2A_PUSH_DEAD."}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "e2a_push_lag_seconds",
			Help:    "From a task update's frame to its webhook accepting it.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 300, 1800, 3600, 21600, 86400}}),
	}
	if r == nil {
		return m, nil
	}
	for _, c := range []struct {
		dst *prometheus.Counter
	}{{&m.delivered}, {&m.retried}, {&m.failed}, {&m.dead}} {
		got, err := register(r, *c.dst)
		if err != nil {
			return nil, err
		}
		*c.dst = got.(prometheus.Counter)
	}
	got, err := register(r, m.lag)
	if err != nil {
		return nil, err
	}
	m.lag = got.(prometheus.Histogram)
	return m, nil
}

// register registers c, or returns the collector registered before
// (replicas sharing a registry share the series).
func register(r prometheus.Registerer, c prometheus.Collector) (prometheus.Collector, error) {
	err := r.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		return are.ExistingCollector, nil
	}
	return c, err
}
