package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// chunk writes text as a raw chunk frame (Write: no coalescing).
func chunk(w agent.Writer, text string) error {
	return w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text}, false)
}

// burst is a handler writing n chunks "0", "1"… at once, then the final.
func burst(n int) agent.Handler {
	return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for i := range n {
			if err := chunk(w, fmt.Sprint(i)); err != nil {
				return err
			}
		}
		return w.Complete("done")
	})
}

// A handler's burst of frames goes out at once: a first delivery's eight
// frames, frame 0 included, share one batch, acknowledged by the server a
// few times instead of once per frame (counted on the worker's inboxes: the
// request's delivery, the batch's flow acknowledgement and its PubAck).
func TestBatchedFramesShareAcks(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	h := burst(7)
	// The worker's replies and deliveries come to its inboxes, seen here
	// from another connection too. Status messages are not counted: each
	// pull request ends with one when its wait expires (every 200 ms in
	// these tests), which a loaded machine spreads into the count.
	nc := s.connect(t, nats.CustomInboxPrefix("_BURST"))
	inbox := make(chan *nats.Msg, 1024)
	if _, err := s.nc.ChanSubscribe("_BURST.>", inbox); err != nil {
		t.Fatal(err)
	}
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// count reads the worker's messages up to its batch's PubAck (the
	// server's last answer to the batch, sent once the final frame is
	// stored), then what else came before a flush of this connection.
	count := func() (n int) {
		take := func(m *nats.Msg) bool {
			if m.Header.Get("Status") != "" {
				return false
			}
			n++
			return bytes.Contains(m.Data, []byte(`"batch":`))
		}
		for done := false; !done; {
			select {
			case m := <-inbox:
				done = take(m)
			case <-time.After(10 * time.Second):
				t.Fatalf("no PubAck of the batch among the worker's %d messages", n)
			}
		}
		if err := s.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case m := <-inbox:
				take(m)
			default:
				return n
			}
		}
	}
	startWorker(t, nc, "burst", h, agent.WithoutHeartbeats())
	waitConsumer(t, s.js, "burst")
	publish(t, s.js, "burst", request("burst-0", nil)) // warm: consumer, subscriptions
	waitFinal(t, s.nc, "burst-0", 10*time.Second)
	count()
	publish(t, s.js, "burst", request("burst-1", nil))
	fr := waitFinal(t, s.nc, "burst-1", 10*time.Second)
	if len(fr) != 8 || text(t, fr) != "0123456" {
		t.Fatalf("%d frames %q, want 8 frames 0123456 and the final", len(fr), text(t, fr))
	}
	// One at a time it was 9: the delivery and 8 PubAcks; with frame 0
	// published alone before the batch, 4.
	if got := count(); got > 3 {
		t.Errorf("the worker received %d messages for one request of 8 frames, want at most 3", got)
	}
}

// A first delivery's frame 0 opens its batch expecting the frame subject to
// be empty. A frame already stored there (another writer's) refuses it
// and, the batch failing on a gap, every frame after it: the worker is
// fenced out, and the subject keeps the other writer's frame alone.
func TestBatchFirstFrameFencedByStoredFrame(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	reg := prometheus.NewRegistry()
	startWorker(t, s.connect(t), "taken", burst(5), agent.WithoutHeartbeats(), agent.WithMetrics(reg))
	waitConsumer(t, s.js, "taken")
	publish(t, s.js, "taken", request("taken-0", nil)) // the worker knows batches are allowed
	waitFinal(t, s.nc, "taken-0", 10*time.Second)
	other := `{"protocol_version":"1.0","response_id":"other-0","request_id":"taken-1","sequence":0,"is_final":false,"status":"in_progress",` +
		`"response_kind":"e2a.chunk","timestamp":"2026-01-01T00:00:00+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":"other"}}`
	if _, err := agent.PublishRaw(s.js, "taken-1", 0, 0, []byte(other)); err != nil {
		t.Fatal(err)
	}
	publish(t, s.js, "taken", request("taken-1", nil))
	waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeFenced}, 1)
	fr, _ := storedFrames(t, s.nc, "taken-1")
	if len(fr) != 1 || text(t, fr) != "other" {
		t.Fatalf("%d frames %q, want the other writer's frame alone", len(fr), text(t, fr))
	}
}

// A lease stored by a newer delivery refuses the rest of an open batch: the
// frames written after it are not stored, the writer reports ErrFenced (at
// a write, and as its context's cause), and the subject holds exactly the
// frames written before the lease.
func TestBatchFencedByNewerLease(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const id = "lease-1"
	wrote, leased := make(chan struct{}), make(chan struct{})
	result := make(chan error, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for _, tx := range []string{"a", "b", "c"} {
			if err := chunk(w, tx); err != nil {
				result <- err
				return err
			}
		}
		close(wrote)
		<-leased
		var err error
		for _, tx := range []string{"d", "e", "f", "g"} {
			if err = chunk(w, tx); err != nil {
				break
			}
		}
		if err == nil {
			err = w.Complete("done")
		}
		<-ctx.Done()
		result <- errors.Join(err, context.Cause(ctx))
		return err
	})
	startWorker(t, s.connect(t), "lease", h, agent.WithAckWait(time.Minute), agent.WithoutHeartbeats())
	waitConsumer(t, s.js, "lease")
	publish(t, s.js, "lease", request(id, nil))
	<-wrote
	waitFrames(t, s, id, 3)
	leaseSubj, err := subjects.ResponseLease(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.js.Publish(context.Background(), leaseSubj, []byte(`{"worker":"newer"}`)); err != nil {
		t.Fatal(err)
	}
	close(leased)
	select {
	case err := <-result:
		if !errors.Is(err, agent.ErrFenced) {
			t.Fatalf("the fenced writer got %v, want ErrFenced", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the writer was not fenced")
	}
	fr, _ := storedFrames(t, s.nc, id)
	if len(fr) != 3 || text(t, fr) != "abc" {
		t.Fatalf("stored %d frames %q, want exactly a b c", len(fr), text(t, fr))
	}
}

// A batch the server refuses (here: the stream stopped taking batches
// after the worker started) is written again, one frame at a time, after a
// new lease: every frame lands once, in order, and the worker's later
// requests go out one at a time.
func TestBatchRefusedIsWrittenAgain(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	h := burst(5)
	startWorker(t, s.connect(t), "refused", h, agent.WithoutHeartbeats())
	waitConsumer(t, s.js, "refused")
	// A request handled means the worker has read the stream's
	// configuration (batches allowed) before it pulled.
	publish(t, s.js, "refused", request("refused-0", nil))
	waitFinal(t, s.nc, "refused-0", 10*time.Second)
	ctx := context.Background()
	str, err := s.js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := str.CachedInfo().Config
	cfg.AllowBatchPublish = false
	if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"refused-1", "refused-2"} {
		publish(t, s.js, "refused", request(id, nil))
		fr := waitFinal(t, s.nc, id, 20*time.Second)
		if len(fr) != 6 || text(t, fr) != "01234" || !fr[5].IsFinal {
			t.Fatalf("%s: %d frames %q, want 01234 and the final", id, len(fr), text(t, fr))
		}
	}
	// The first request's batch was resolved with a new lease; the second
	// went out one frame at a time and stored none.
	for id, want := range map[string]bool{"refused-1": true, "refused-2": false} {
		leaseSubj, _ := subjects.ResponseLease(id)
		_, err := streams.LastBySubject(ctx, s.nc, streams.ResponsesStream, leaseSubj)
		if got := err == nil; got != want {
			t.Errorf("%s: lease stored %v (%v), want %v", id, got, err, want)
		}
	}
}

// A server that refuses to open a batch because the stream has its limit
// of open ones (max_batch_inflight_per_stream: 1,000 by default, 1 here)
// gets that batch's frames one at a time: nothing of the refused batch was
// stored, so the worker neither stores a lease nor reads the stream, and
// every frame lands once, in order. The request holding the open batch
// finishes too.
func TestBatchRefusedForTooManyOpen(t *testing.T) {
	t.Parallel()
	e, nc := natstest.RunServer(t, natstest.WithConfig(testConfig()), natstest.WithMaxBatchesPerStream(1))
	s := &server{e: e, nc: nc, js: natstest.JetStream(t, nc)}
	release := make(chan struct{})
	holder := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := chunk(w, "h"); err != nil { // opens a batch, kept open
			return err
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return w.Complete("done")
	})
	startWorker(t, s.connect(t), "hold", holder, agent.WithoutHeartbeats())
	many := s.connect(t)
	startWorker(t, many, "many", burst(5), agent.WithoutHeartbeats(), agent.WithBatchPause(time.Hour))
	waitConsumer(t, s.js, "hold")
	waitConsumer(t, s.js, "many")
	publish(t, s.js, "hold", request("hold-1", nil))
	waitFrames(t, s, "hold-1", 1)
	for _, id := range []string{"many-1", "many-2"} {
		before := many.Stats().InMsgs
		publish(t, s.js, "many", request(id, nil))
		fr := waitFinal(t, s.nc, id, 10*time.Second)
		if len(fr) != 6 || text(t, fr) != "01234" || !fr[5].IsFinal {
			t.Fatalf("%s: %d frames %q, want 01234 and the final", id, len(fr), text(t, fr))
		}
		leaseSubj, _ := subjects.ResponseLease(id)
		if _, err := streams.LastBySubject(context.Background(), s.nc, streams.ResponsesStream, leaseSubj); err == nil {
			t.Errorf("%s: a lease was stored: the refused batch was resolved as a failed one", id)
		}
		// Right after a refusal the worker opens no batch: many-2's frames go
		// out alone at once (the delivery and 6 PubAcks), instead of being
		// refused again one by one first.
		if got := many.Stats().InMsgs - before; id == "many-2" && got > 7 {
			t.Errorf("%s: the worker received %d messages, want at most 7", id, got)
		}
	}
	close(release)
	if fr := waitFinal(t, s.nc, "hold-1", 10*time.Second); len(fr) != 2 || text(t, fr) != "h" {
		t.Fatalf("hold-1: %d frames %q, want h and the final", len(fr), text(t, fr))
	}
}

// runPausing runs one request of a handler that writes "a", waits pause
// (past the server's batch timeout: no event tells that the server forgot a
// batch), writes "b" and "c" and completes, on a server that forgets a batch
// idle for batchTimeout, and checks that every frame landed once, in order.
// It reports whether a lease was stored for the request: whether a batch
// was resolved as a failed one.
func runPausing(t *testing.T, batchTimeout, pause time.Duration, opts ...agent.Option) (leaseStored bool) {
	t.Helper()
	e, nc := natstest.RunServer(t, natstest.WithConfig(testConfig()), natstest.WithBatchTimeout(batchTimeout))
	s := &server{e: e, nc: nc, js: natstest.JetStream(t, nc)}
	pausing := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := chunk(w, "a"); err != nil {
			return err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return ctx.Err()
		}
		for _, text := range []string{"b", "c"} {
			if err := chunk(w, text); err != nil {
				return err
			}
		}
		return w.Complete("done")
	})
	startWorker(t, s.connect(t), "pause", pausing, append([]agent.Option{agent.WithoutHeartbeats()}, opts...)...)
	waitConsumer(t, s.js, "pause")
	publish(t, s.js, "pause", request("pause-1", nil))
	fr := waitFinal(t, s.nc, "pause-1", 20*time.Second)
	if len(fr) != 4 || text(t, fr) != "abc" || !fr[3].IsFinal {
		t.Fatalf("%d frames %q, want a b c and the final", len(fr), text(t, fr))
	}
	leaseSubj, _ := subjects.ResponseLease("pause-1")
	_, err := streams.LastBySubject(context.Background(), s.nc, streams.ResponsesStream, leaseSubj)
	return err == nil
}

// A handler that pauses longer than the server keeps an idle batch (10 s
// by default, 200 ms here) while the worker would end it later (5 s) finds
// its batch forgotten: the frames it writes next are refused as naming an
// unknown batch, and the writer resolves that as a failed batch (a new
// lease, the last frame read, the rest written again). Every frame lands
// once, in order.
func TestBatchForgottenByServer(t *testing.T) {
	t.Parallel()
	if !runPausing(t, 200*time.Millisecond, 2*time.Second) {
		t.Error("no lease stored: the forgotten batch was not resolved as a failed one")
	}
}

// A batch that sends nothing for the worker's idle time (5 s by default,
// 100 ms here) is ended by the worker's sweep with its end-of-batch marker,
// before the server forgets it (10 s by default, 1 s here) and without the
// handler writing again: when the handler does write after its pause, its
// frames open a new batch, and nothing needs resolving (no lease stored).
func TestBatchEndedWhenIdle(t *testing.T) {
	t.Parallel()
	if runPausing(t, time.Second, 2500*time.Millisecond, agent.WithBatchIdle(100*time.Millisecond)) {
		t.Error("a lease was stored: the idle batch was forgotten by the server instead of ended by the worker")
	}
}

// A worker that started on an E2A_RESPONSES of one replica keeps writing
// whole frame sequences after the stream is scaled to three: a replicated
// stream may refuse a batched frame while another expectation on the lease
// subject is in flight, which the worker takes for "no batches here" (not
// for a fence), writing what did not land again one frame at a time.
func TestBatchesAfterScaleUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.RunCluster(t, 3)
	nc := c.Connect()
	js := natstest.JetStream(t, nc)
	ctx := context.Background()
	scale := func(n int) {
		t.Helper()
		str, err := js.Stream(ctx, streams.ResponsesStream)
		if err != nil {
			t.Fatal(err)
		}
		cfg := str.CachedInfo().Config
		cfg.Replicas = n
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			info, err := str.Info(ctx)
			if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == n-1 {
				current := true
				for _, r := range info.Cluster.Replicas {
					current = current && r.Current
				}
				if current {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("E2A_RESPONSES not at %d replicas: %+v %v", n, info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	scale(1)
	h := burst(6)
	startWorker(t, c.Connect(), "scale", h, agent.WithConcurrency(16))
	waitConsumer(t, js, "scale")
	publish(t, js, "scale", request("scale-r1", nil))
	waitFinal(t, nc, "scale-r1", 20*time.Second)
	scale(3)
	const n = 20
	for i := range n {
		publish(t, js, "scale", request(fmt.Sprintf("scale-r3-%d", i), nil))
	}
	for i := range n {
		id := fmt.Sprintf("scale-r3-%d", i)
		if fr := waitFinal(t, nc, id, 30*time.Second); len(fr) != 7 || text(t, fr) != "012345" {
			t.Fatalf("%s: %d frames %q, want 012345 and the final", id, len(fr), text(t, fr))
		}
	}
}
