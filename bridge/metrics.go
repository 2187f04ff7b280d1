package bridge

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/obs"
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
	s := obs.NewMetricSet(r, obs.Shared) // the bridges of a process share the series
	m := &metrics{
		calls: s.CounterVec("e2a_bridge_calls_total",
			"Upstream calls by pool, upstream and outcome (ok, an upstream_* error code, cancelled; the cancel of a cancel turn or of a request cancelled at its takeover: cancel_ and its outcome).",
			"pool", "upstream", "outcome"),
		retries:  s.CounterVec("e2a_bridge_retries_total", "Upstream calls retried before any frame was written.", "pool", "upstream"),
		duration: s.HistogramVec("e2a_bridge_call_duration_seconds", "Upstream call latency, retries included.", latencyBuckets, "pool", "upstream"),
		ttft: s.HistogramVec("e2a_bridge_first_frame_seconds", "Time from the start of an upstream call to its first frame (TTFT).",
			latencyBuckets, "pool", "upstream"),
		inFlight: s.GaugeVec("e2a_bridge_in_flight", "Upstream calls in flight in this process.", "pool", "upstream"),
	}
	return m, s.Err()
}
