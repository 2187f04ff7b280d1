package ingress

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	requests     *prometheus.CounterVec
	publish      prometheus.Histogram
	authFailures *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "e2a_ingress_requests_total",
			Help: "Requests answered by ingress, by protocol, method and HTTP status code.",
		}, []string{"protocol", "method", "code"}),
		publish: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "e2a_ingress_publish_seconds",
			Help:    "Time from publish to PubAck for accepted requests.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "e2a_ingress_auth_failures_total",
			Help: "Requests refused by authentication or authorization, by protocol.",
		}, []string{"protocol"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "e2a_ingress_rate_limited_total",
			Help: "Requests refused by the per-principal rate limit, by protocol.",
		}, []string{"protocol"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.publish, m.authFailures, m.rateLimited} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
