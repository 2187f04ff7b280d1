package archive

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/obs"
)

// metrics are the archiver's series (e2a_archive_*).
type metrics struct {
	batches, records, bytesIn, bytesOut prometheus.Counter
	missed, skipped, conflicts, corrupt prometheus.Counter
	lastTime, stalled                   prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	s := obs.NewMetricSet(r, obs.Shared)
	m := &metrics{
		batches:  s.Counter("e2a_archive_batches_total", "Batches stored in E2A_ARCHIVE."),
		records:  s.Counter("e2a_archive_records_total", "E2A_AUDIT messages stored in E2A_ARCHIVE batches."),
		bytesIn:  s.Counter("e2a_archive_bytes_in_total", "Bytes of the archived records before compression."),
		bytesOut: s.Counter("e2a_archive_bytes_out_total", "Bytes of the stored batches (compressed)."),
		missed: s.Counter("e2a_archive_missed_total", "E2A_AUDIT messages dropped by its limits before they were archived "+
			"(the archiver was down or behind for longer than E2A_AUDIT keeps them)."),
		skipped: s.Counter("e2a_archive_skipped_total", "E2A_AUDIT messages too large to fit a batch under max_payload, "+
			"left in E2A_AUDIT only."),
		conflicts: s.Counter("e2a_archive_conflicts_total", "Batches refused because another archiver stored first."),
		corrupt: s.Counter("e2a_archive_corrupt_batches_total", "Corrupt last batches of E2A_ARCHIVE (their headers do not read) "+
			"that the archiver wrote past, archiving again from E2A_AUDIT what they may have held."),
		stalled: s.GaugeVec("e2a_archive_stalled_seconds", "How long the archiver has failed without storing a batch or "+
			"catching up with E2A_AUDIT, once that is longer than its stall delay (WithStallAfter, 1 min by default); 0 otherwise.").WithLabelValues(),
		lastTime: s.GaugeVec("e2a_archive_last_record_timestamp_seconds",
			"E2A_AUDIT store time of the newest archived message (Unix seconds).").WithLabelValues(),
	}
	return m, s.Err()
}
