package agent_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// holdUntilSync holds the publish of request id's first message (as
// holdFirst) and releases it only once a Sync of the handler (syncing set)
// waits behind it: a Sync that returned without waiting finds the frame
// still unstored, whatever the timing. release, idempotent, lets it go.
func holdUntilSync(id string, syncing *atomic.Bool) (opts []agent.Option, taken chan struct{}, release func()) {
	hold, taken, rel := holdFirst(id)
	var once sync.Once
	release = func() { once.Do(func() { close(rel) }) }
	wait := agent.WithEnqueueWait(func(rid string) {
		if rid == id && syncing.Load() {
			release()
		}
	})
	return []agent.Option{hold, wait, agent.WithoutHeartbeats()}, taken, release
}

// A non-final Write returns before its frame is stored (its publish held
// here); once Sync returns, the frame is in E2A_RESPONSES (read directly).
// Sync with nothing pending returns at once, after the final frame it
// reports ErrFinalWritten, as the test recorder's (agenttest.Writer).
func TestSyncWaitsForStoredFrames(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const id = "sync-stored-1"
	var syncing atomic.Bool
	opts, taken, release := holdUntilSync(id, &syncing)
	t.Cleanup(release)
	result := make(chan error, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		res := func() error {
			if err := w.Sync(); err != nil {
				return errors.New("Sync before any write: " + err.Error())
			}
			if err := chunk(w, "call-starts"); err != nil {
				return err
			}
			<-taken // frame 0's publish is held
			if fr, _ := storedFrames(t, s.nc, id); len(fr) != 0 {
				return errors.New("frame 0 stored while its publish is held")
			}
			syncing.Store(true)
			if err := w.Sync(); err != nil {
				return err
			}
			fr, _ := storedFrames(t, s.nc, id)
			if len(fr) != 1 || text(t, fr) != "call-starts" {
				return errors.New("after Sync the stream holds " + text(t, fr) + ", want frame 0 (call-starts)")
			}
			if err := w.Sync(); err != nil {
				return errors.New("Sync with nothing pending: " + err.Error())
			}
			if err := w.Complete("done"); err != nil {
				return err
			}
			if err := w.Sync(); !errors.Is(err, agent.ErrFinalWritten) {
				return errors.New("Sync after the final frame: want ErrFinalWritten")
			}
			return nil
		}()
		release()
		result <- res
		return res
	})
	startWorker(t, s.connect(t), "sync", h, opts...)
	waitConsumer(t, s.js, "sync")
	publish(t, s.js, "sync", request(id, nil))
	if err := testkit.Receive(t, result, 20*time.Second, "the handler did not return"); err != nil {
		t.Fatal(err)
	}
	waitFinal(t, s.nc, id, 10*time.Second)
	rec := &agenttest.Writer{}
	if err := rec.Sync(); err != nil {
		t.Errorf("Sync on the test recorder before the final frame: %v", err)
	}
	if err := rec.Complete("done"); err != nil || !errors.Is(rec.Sync(), agent.ErrFinalWritten) {
		t.Errorf("Sync on the test recorder after the final frame: %v; want ErrFinalWritten", rec.Sync())
	}
}

// Sync publishes the text still coalescing at once (not after the
// coalescing delay) and returns once it is stored.
func TestSyncPublishesCoalescedText(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const id = "sync-coalesced-1"
	result := make(chan error, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		res := func() error {
			for _, d := range []string{"a", "b", "c"} {
				if err := w.Chunk(e2a.DeltaText, d); err != nil {
					return err
				}
			}
			if err := w.Sync(); err != nil {
				return err
			}
			if fr, _ := storedFrames(t, s.nc, id); text(t, fr) != "abc" {
				return errors.New("after Sync the stream holds " + text(t, fr) + ", want abc")
			}
			return w.Complete("done")
		}()
		result <- res
		return res
	})
	startWorker(t, s.connect(t), "sync-text", h, agent.WithoutHeartbeats(), agent.WithCoalesce(1<<20, time.Second))
	waitConsumer(t, s.js, "sync-text")
	publish(t, s.js, "sync-text", request(id, nil))
	if err := testkit.Receive(t, result, 20*time.Second, "the handler did not return"); err != nil {
		t.Fatal(err)
	}
}

// A frame fenced out while Sync waits for it (another writer stored frame
// 0 first) makes Sync return ErrFenced, as the writes report it.
func TestSyncReportsFence(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const id = "sync-fenced-1"
	other := `{"protocol_version":"1.0","response_id":"other-0","request_id":"` + id + `","sequence":0,"is_final":false,"status":"in_progress",` +
		`"response_kind":"e2a.chunk","timestamp":"2026-01-01T00:00:00+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":"other"}}`
	var syncing atomic.Bool
	opts, taken, release := holdUntilSync(id, &syncing)
	t.Cleanup(release)
	result := make(chan error, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		err := chunk(w, "mine")
		if err == nil {
			<-taken
			if _, err = agent.PublishRaw(s.js, id, 0, 0, []byte(other)); err == nil {
				syncing.Store(true)
				err = w.Sync()
			}
		}
		release()
		result <- err
		return err
	})
	startWorker(t, s.connect(t), "sync-fenced", h, opts...)
	waitConsumer(t, s.js, "sync-fenced")
	publish(t, s.js, "sync-fenced", request(id, nil))
	err := testkit.Receive(t, result, 20*time.Second, "the handler did not return")
	if !errors.Is(err, agent.ErrFenced) {
		t.Fatalf("Sync returned %v, want ErrFenced", err)
	}
	if fr, _ := storedFrames(t, s.nc, id); text(t, fr) != "other" {
		t.Errorf("stored %q, want the other writer's frame only", text(t, fr))
	}
}
