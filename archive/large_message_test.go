package archive_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestArchiveLargeAuditMessage: a message of a few MiB (a frame carrying
// a large artifact, well under the shipped max_payload of 8 MB, and
// compressible) must be archived like any other (docs/capacity.md: only a
// message that fits no batch under max_payload is left out, and counted as
// skipped); the archive must go on after it. The archiver pulls E2A_AUDIT
// with PullMaxBytes(2 MiB) (archiver.go), which the server refuses to fill
// with a larger message: the archive stopped at it for good.
func TestArchiveLargeAuditMessage(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t, natstest.WithMaxPayload(8<<20))
	js := natstest.JetStream(t, nc)
	var logs bytes.Buffer
	var mu sync.Mutex
	natstest.RunArchiver(t, nc, append(fast, archive.WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))))...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big := []byte(`{"request_id":"big-1","text":"` + strings.Repeat("all work and no play ", (3<<20)/21) + `"}`)
	if _, err := js.Publish(ctx, "e2a.req.p.big-1", big); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "e2a.req.p.small-1", []byte(`{"request_id":"small-1"}`)); err != nil {
		t.Fatal(err)
	}
	auditLastAtLeast(t, js, 2)
	r, err := archive.NewReader(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() {
			t.Logf("archiver log (%d bytes: the stall is silent):\n%s", logs.Len(), logs.String())
		}
	})
	testkit.Eventually(t, 20*time.Second, "the archive to hold the 3 MiB E2A_AUDIT message 1 and message 2", func() bool {
		sp, err := r.Span(ctx)
		return err == nil && !sp.Empty && sp.Last >= 2
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
