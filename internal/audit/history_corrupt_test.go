package audit_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/audit"
)

// TestHistoryCorruptBatchIsPermanent: the read API's lookup of a request
// only a corrupt archive batch holds returned the archive's report as any
// other failed read, which egress answers 503, retryable: a client retried
// permanent damage for ever. Request's error is ErrHistoryCorrupt (still
// archive.ErrCorrupt, naming the batch), told apart from a read that got no
// answer; the requests around the batch are answered whole.
func TestHistoryCorruptBatchIsPermanent(t *testing.T) {
	t.Parallel()
	nc, before, lost, after, bad := corruptArchive(t)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Request(testCtx(t), lost)
	var u *archive.UnreadableError
	if !errors.Is(err, audit.ErrHistoryCorrupt) || !errors.Is(err, archive.ErrCorrupt) || !errors.As(err, &u) ||
		!strings.Contains(err.Error(), "batch "+strconv.FormatUint(bad, 10)) {
		t.Fatalf("Request of the request in the corrupt batch: %v, want ErrHistoryCorrupt naming batch %d", err, bad)
	}
	for _, id := range []string{before, after} {
		h, err := a.Request(testCtx(t), id)
		if err != nil || len(h.Frames) != 4 {
			t.Errorf("Request(%s): %d frames, %v; want 4", id, len(h.Frames), err)
		}
	}
}
