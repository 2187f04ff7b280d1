package audit_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/audit"
)

// A corrupt archive batch stops no read that does not need it: a scan
// (--pool, a time range) and a list of ids report every request the
// archive still reads, the ones after the batch too, and then fail naming
// the batch. Before, a scan crossing it reported nothing at all (not even
// the requests before it: the scan reports once it has read its range),
// and a list of ids ended at the first id it held.
func TestReplayGoesOnPastACorruptArchiveBatch(t *testing.T) {
	t.Parallel()
	nc, before, lost, after, bad := corruptArchive(t)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	queries := map[string]audit.Query{
		"pool":      {Pool: "demo", Source: audit.SourceAudit},
		"since":     {Since: time.Now().Add(-time.Hour), Source: audit.SourceAudit},
		"pool auto": {Pool: "demo"},
		"ids":       {RequestIDs: []string{before, lost, after}, Source: audit.SourceAudit},
		"ids auto":  {RequestIDs: []string{lost, after}},
	}
	for name, q := range queries {
		var recs []audit.Record
		_, err := a.Replay(testCtx(t), q, func(r audit.Record) error {
			recs = append(recs, r)
			return nil
		})
		if !errors.Is(err, archive.ErrCorrupt) || !strings.Contains(err.Error(), "batch "+strconv.FormatUint(bad, 10)) {
			t.Errorf("%s: %v, want ErrCorrupt naming batch %d", name, err, bad)
		}
		for _, id := range []string{before, after} {
			if name == "ids auto" && id == before {
				continue
			}
			if count(recs, audit.KindRequest, id) != 1 || count(recs, audit.KindFrame, id) != 4 || count(recs, audit.KindSummary, id) != 1 {
				t.Errorf("%s: %s: %d requests, %d frames, %d summaries; want 1, 4 and 1", name, id,
					count(recs, audit.KindRequest, id), count(recs, audit.KindFrame, id), count(recs, audit.KindSummary, id))
			}
		}
	}
}
