package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// `e2a replay` of a request whose frames are stored without their
// envelope exits 1 (it cannot be audited) and says so in its summary; it
// exited 0, the request reported sound. A selection by filters that
// matches nothing exits 3 saying so; it said "1 of the requests asked
// for", as if an id had been given.
func TestReplayExitCodesOfMissingEnvelopeAndEmptySelection(t *testing.T) {
	cfg, nc := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seq := natstest.PublishBurst(t, nc, "orphan-1", 0, 0, natstest.Frame("orphan-1", 0, false))
	natstest.PublishBurst(t, nc, "orphan-1", 1, seq, natstest.Frame("orphan-1", 1, true))

	var out, errOut bytes.Buffer
	err := runReplay(ctx, cfg, []string{"--source", "hot", "orphan-1"}, &out, &errOut)
	if code := exitCode(err, io.Discard); code != exitFailure || !strings.Contains(out.String(), "without their envelope") {
		t.Errorf("frames without an envelope: exit %d (%v), stdout %s", code, err, out.String())
	}

	out.Reset()
	errOut.Reset()
	err = runReplay(ctx, cfg, []string{"--source", "hot", "--pool", "nobody", "--since", "1h"}, &out, &errOut)
	if code := exitCode(err, io.Discard); code != exitNotFound || !strings.Contains(err.Error(), "no request matched") {
		t.Errorf("nothing matched: exit %d (%v), want %d saying no request matched", code, err, exitNotFound)
	}
}

// `e2a tail --pool` with no pool name is a bad argument (exit 2, refused
// before connecting), as it is for `e2a replay`; it exited 1, which says
// the streams could not be read.
func TestTailBadPoolExitCode(t *testing.T) {
	cfg, _ := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := runTail(ctx, cfg, []string{"--pool", "a.b"}, io.Discard, io.Discard)
	if code := exitCode(err, io.Discard); code != exitUsage {
		t.Errorf("e2a tail --pool a.b: exit %d (%v), want %d (bad arguments)", code, err, exitUsage)
	}
}
