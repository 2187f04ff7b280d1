package obs

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Registration says what a [MetricSet] does with a collector whose
// description is already registered.
type Registration int

const (
	// Exclusive refuses it: the stage owns its series, one per registry
	// (ingress, egress).
	Exclusive Registration = iota
	// Shared reuses the collector registered first, so that several
	// instances on one registry (agent workers, bridges, push replicas)
	// count into the same series.
	Shared
)

// MetricSet makes a stage's collectors and registers each as it is made,
// so that a stage declares its metrics in one composite literal:
//
//	s := obs.NewMetricSet(reg, obs.Shared)
//	m := &metrics{
//		inFlight: s.GaugeVec("e2a_agent_in_flight", "Requests being handled by this process.", "pool"),
//		…
//	}
//	return m, s.Err()
//
// The first registration error is kept (see Err) and nothing is
// registered after it. A nil Registerer makes the collectors without
// registering them.
type MetricSet struct {
	r    prometheus.Registerer
	mode Registration
	err  error
}

// NewMetricSet returns a MetricSet registering on r (nil: none).
func NewMetricSet(r prometheus.Registerer, mode Registration) *MetricSet {
	return &MetricSet{r: r, mode: mode}
}

// Err returns the first registration error, or nil.
func (s *MetricSet) Err() error { return s.err }

// Counter makes and registers a counter without labels.
func (s *MetricSet) Counter(name, help string) prometheus.Counter {
	return register(s, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// CounterVec makes and registers a counter with the given labels.
func (s *MetricSet) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(s, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// GaugeVec makes and registers a gauge with the given labels.
func (s *MetricSet) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(s, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// Histogram makes and registers a histogram without labels.
func (s *MetricSet) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return register(s, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

// HistogramVec makes and registers a histogram with the given labels.
func (s *MetricSet) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(s, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

// register registers c on s's Registerer and returns it, or, in Shared
// mode, the collector of the same description registered before; an error
// is kept in s.err.
func register[C prometheus.Collector](s *MetricSet, c C) C {
	if s.r == nil || s.err != nil {
		return c
	}
	err := s.r.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if s.mode == Shared && errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	s.err = err
	return c
}
