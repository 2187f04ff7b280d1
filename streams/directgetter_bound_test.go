package streams_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestDirectGetterBoundAllocs: the bound of a direct get whose context
// has no deadline (ingress's check that a chosen request id has no frames
// stored, egress's reads: an HTTP request's context) costs no allocation
// beyond those of a call whose context has a deadline: it was a context
// with a timeout per call (4 more allocations).
func TestDirectGetterBoundAllocs(t *testing.T) {
	_, nc, _ := startApplied(t)
	g, err := streams.NewDirectGetter(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	subj, _ := subjects.Response("no-such-request")
	get := func(ctx context.Context) func() {
		return func() {
			if m, err := g.GetLast(ctx, streams.ResponsesStream, subj); m != nil || err != nil {
				t.Fatalf("GetLast: %v, %v", m, err)
			}
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 40 { // reply tokens of two characters from now on, as later
		get(context.Background())()
	}
	withDeadline := testing.AllocsPerRun(200, get(dctx))
	without := testing.AllocsPerRun(200, get(context.Background()))
	// The replies' own allocations vary a little with the read loop's
	// buffering: half an allocation of slack.
	if without > withDeadline+0.5 && !raceEnabled {
		t.Errorf("GetLast: %v allocations without a deadline, %v with one: the bound costs %v", without, withDeadline, without-withDeadline)
	}
}

// TestDirectGetterBoundEnds: a direct get nobody answers (no 503: a
// subscriber that never replies) ends after DefaultDirectGetTimeout with
// context.DeadlineExceeded when its context has no deadline, and with its
// context's error when that ends first.
func TestDirectGetterBoundEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("waits DefaultDirectGetTimeout")
	}
	_, nc, _ := startApplied(t)
	sub, err := nc.SubscribeSync(subjects.DirectGet("SILENT") + ".>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	sub, err = nc.SubscribeSync(subjects.DirectGet("SILENT"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	g, err := streams.NewDirectGetter(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	start := time.Now()
	_, err = g.GetLast(context.Background(), "SILENT", "e2a.resp.x")
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took < streams.DefaultDirectGetTimeout || took > streams.DefaultDirectGetTimeout+2*time.Second {
		t.Errorf("GetLast: %v after %v, want context.DeadlineExceeded after %v", err, took, streams.DefaultDirectGetTimeout)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := g.GetBatch(ctx, "SILENT", "e2a.resp.x", 0, 8, 0, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("GetBatch cancelled: %v, want context.Canceled", err)
	}
	// The timer of the call that timed out serves the next one: it does
	// not end it at once.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	if _, err := g.GetLast(ctx, "SILENT", "e2a.resp.x"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetLast after a timeout: %v, want context.Canceled", err)
	}
}
