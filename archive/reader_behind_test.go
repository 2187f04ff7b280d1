package archive_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestRecordsBehindSpanErrs: Reader.Span reads the
// archive's last batch sequence from the stream's info (the leader), while
// Reader.Load reads each batch with a direct get, which any replica
// answers; a follower trailing the leader by the newest batch answers "no
// message" for it (docs/design.md, "An absence is the leader's word").
// Records reports ErrBehind then; it ended as if the archive were read,
// and its caller (internal/audit's auditSeq) went on in E2A_AUDIT after
// sp.Last, silently skipping that batch's messages.
//
// The lagging replica is simulated by a span one batch ahead of what the
// stream answers (exactly the view a reader gets when the leader's info
// names a batch the answering follower does not hold yet).
func TestRecordsBehindSpanErrs(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	natstest.RunArchiver(t, nc, fast...)
	traffic(t, nc, js, "lag", 20)
	last := auditLast(t, js, 60)
	natstest.WaitArchived(t, nc, last)
	r, err := archive.NewReader(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sp, err := r.Span(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The leader holds one more batch (10 more messages) than the replica
	// answering the direct gets.
	lagging := sp
	lagging.LastBatch++
	lagging.Last += 10
	var n int
	var gotErr error
	for rec, err := range r.Records(ctx, lagging, sp.First) {
		if err != nil {
			gotErr = err
			break
		}
		_ = rec
		n++
	}
	if !errors.Is(gotErr, archive.ErrBehind) {
		t.Errorf("Records over a span naming batch %d (E2A_AUDIT ..%d) ended after %d records (..%d) with %v, want ErrBehind: "+
			"the caller would go on in E2A_AUDIT after %d and skip %d..%d",
			lagging.LastBatch, lagging.Last, n, sp.Last, gotErr, lagging.Last, sp.Last+1, lagging.Last)
	}
}
