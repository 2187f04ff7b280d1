package push

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/obs"
)

// metrics are the stage's series (e2a_push_*).
type metrics struct {
	delivered, retried, failed, dead prometheus.Counter
	deadPurged, gone                 prometheus.Counter
	rendered, skipped                prometheus.Counter
	lag                              prometheus.Histogram
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	s := obs.NewMetricSet(r, obs.Shared) // replicas sharing a registry share the series
	m := &metrics{
		delivered: s.Counter("e2a_push_delivered_total", "Task updates a webhook accepted (2xx)."),
		retried:   s.Counter("e2a_push_retried_total", "Failed deliveries to be retried after a backoff."),
		failed:    s.Counter("e2a_push_failed_total", "Failed delivery attempts (transient and permanent)."),
		dead:      s.Counter("e2a_push_dead_lettered_total", "Task updates moved to the dead-letter stream E2A_PUSH_DEAD."),
		deadPurged: s.Counter("e2a_push_dead_purged_total", "Dead letters removed from E2A_PUSH_DEAD to keep their "+
			"principal within its share of the stream (WithDeadShare, E2A_PUSH_DEAD_SHARE), oldest first."),
		gone: s.Counter("e2a_push_gone_total", "Push configs deleted because their webhook answered 410 Gone "+
			"(the receiver ended the subscription): nothing more is sent to them."),
		rendered: s.Counter("e2a_push_rendered_total", "Stored response messages rendered into task updates; "+
			"a message is rendered once per replica, again only when it left the replica's cache."),
		skipped: s.Counter("e2a_push_skipped_total", "Task updates (or a parked config's backlog left) skipped for a "+
			"config, neither delivered nor dead-lettered, because its delivery state cannot be written (over the "+
			"server's max_payload) or its parked backlog has too many gaps."),
		lag: s.Histogram("e2a_push_lag_seconds", "From a task update's frame to its webhook accepting it.",
			[]float64{0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 300, 1800, 3600, 21600, 86400}),
	}
	return m, s.Err()
}
