package archive_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// A batch whose payload decodes, with as many records as its header counts,
// but not the E2A_AUDIT sequences its header names (in order, from First
// to Last) is corrupt: Load refuses it with ErrCorrupt naming the batch,
// and Records ends with that error. Records skipped such records silently
// (those outside the span, or behind one read before), and an audit read
// through it missed messages without a word.
func TestReaderRefusesRecordsThatDisagreeWithTheHeader(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	r, err := archive.NewReader(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	for i, c := range []struct {
		first, last uint64
		seqs        []uint64
	}{
		{1, 2, []uint64{7, 8}}, // other sequences than the header's
		{1, 2, []uint64{2, 1}}, // out of order
		{1, 3, []uint64{1, 2}}, // ends before the header's last
		{1, 3, []uint64{1, 1}}, // one twice
	} {
		recs := make([]archive.Record, len(c.seqs))
		for j, s := range c.seqs {
			recs[j] = archive.Record{Seq: s, Time: now, Subject: "e2a.audit.req.1", Data: []byte("{}")}
		}
		data, err := archive.Encode(recs)
		if err != nil {
			t.Fatal(err)
		}
		h := map[string]string{subjects.HeaderArchiveFirst: strconv.FormatUint(c.first, 10),
			subjects.HeaderArchiveLast: strconv.FormatUint(c.last, 10), subjects.HeaderArchiveCount: strconv.Itoa(len(recs))}
		for _, k := range []string{subjects.HeaderArchiveFrom, subjects.HeaderArchiveUntil, subjects.HeaderArchiveEpoch} {
			h[k] = now.Format(time.RFC3339Nano)
		}
		seq := natstest.StoreArchiveBatch(t, js, h, data)
		name := "batch " + strconv.FormatUint(seq, 10)
		if _, err := r.Load(ctx, seq); !errors.Is(err, archive.ErrCorrupt) || !strings.Contains(err.Error(), name) {
			t.Errorf("case %d: Load: %v, want ErrCorrupt naming %s", i, err, name)
		}
		sp := archive.Span{Exists: true, FirstBatch: seq, LastBatch: seq, First: c.first, Last: c.last, Epoch: now}
		var got []uint64
		var rerr error
		for rec, err := range r.Records(ctx, sp, c.first) {
			if err != nil {
				rerr = err
				break
			}
			got = append(got, rec.Seq)
		}
		if !errors.Is(rerr, archive.ErrCorrupt) || !strings.Contains(rerr.Error(), name) {
			t.Errorf("case %d: Records gave %v then %v, want ErrCorrupt naming %s", i, got, rerr, name)
		}
	}
}
