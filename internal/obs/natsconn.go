package obs

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/streams"
)

// natsConnEvents is the collector of e2a_nats_connection_events_total.
type natsConnEvents struct {
	ev   *streams.ConnEvents
	desc *prometheus.Desc
}

// NATSConnEvents returns the collector of
// e2a_nats_connection_events_total{event}: the events of the process's
// NATS connections that ev counted (streams.ConnEventNames: disconnected,
// reconnected, lame_duck, slow_consumer, permission_denied, error), every
// event present from the start at 0 so that a rate or an alert needs no
// absent() guard.
func NATSConnEvents(ev *streams.ConnEvents) prometheus.Collector {
	return &natsConnEvents{ev: ev, desc: prometheus.NewDesc("e2a_nats_connection_events_total",
		"Events of the process's NATS connections: disconnected, reconnected, lame_duck (the server restarting), "+
			"slow_consumer (a subscription dropped messages), permission_denied, error.", []string{"event"}, nil)}
}

func (c *natsConnEvents) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *natsConnEvents) Collect(ch chan<- prometheus.Metric) {
	for _, name := range streams.ConnEventNames {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.ev.Count(name)), name)
	}
}
