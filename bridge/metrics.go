package bridge

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the bridge's metrics, labelled by pool and upstream.
type metrics struct {
	calls    *prometheus.CounterVec
	retries  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ttft     *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e2a_bridge_calls_total",
			Help: "Upstream calls by pool, upstream and outcome (ok, an upstream_* error code, cancelled; a cancel turn's call: cancel_ and its outcome)."},
			[]string{"pool", "upstream", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e2a_bridge_retries_total",
			Help: "Upstream calls retried before any frame was written."}, []string{"pool", "upstream"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "e2a_bridge_call_duration_seconds",
			Help: "Upstream call latency, retries included.", Buckets: latencyBuckets}, []string{"pool", "upstream"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "e2a_bridge_first_frame_seconds",
			Help: "Time from the start of an upstream call to its first frame (TTFT).", Buckets: latencyBuckets},
			[]string{"pool", "upstream"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "e2a_bridge_in_flight",
			Help: "Upstream calls in flight in this process."}, []string{"pool", "upstream"}),
	}
	if r == nil {
		return m, nil
	}
	var err error
	m.calls = reuse(r, m.calls, &err)
	m.retries = reuse(r, m.retries, &err)
	m.duration = reuse(r, m.duration, &err)
	m.ttft = reuse(r, m.ttft, &err)
	m.inFlight = reuse(r, m.inFlight, &err)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// reuse registers c with r, or returns the collector another bridge of the
// process registered under the same name first; another failure is kept in
// *errp.
func reuse[C prometheus.Collector](r prometheus.Registerer, c C, errp *error) C {
	err := r.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if ex, ok := are.ExistingCollector.(C); ok {
			return ex
		}
	}
	if *errp == nil {
		*errp = err
	}
	return c
}
