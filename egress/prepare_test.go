package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

// readAll reads a request's frames with a reader given ctx's prepared
// subscription, as Service.Stream does.
func readAll(t *testing.T, ctx context.Context, nc *nats.Conn, id string) []render.Frame {
	t.Helper()
	var opts []ReplayOption
	if p := takePrepared(ctx, id); p != nil {
		opts = append(opts, withPrepared(p))
	}
	// No poll of the stream while waiting: what is read comes from the
	// subscription, or from the reads the reader decides on.
	noPoll := func(c *replayConfig) error { c.firstPoll, c.pollInterval = time.Hour, time.Hour; return nil }
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rd, err := Open(ctx, nc, id, 0, append(opts, WithoutRequestCheck(), noPoll)...)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var out []render.Frame
	for {
		f, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
}

// preparedCall is a call expecting a stream (its end runs at cleanup) with
// the subscription to id prepared on svc.
func preparedCall(t *testing.T, svc *Service, id string) (context.Context, *Prepared) {
	t.Helper()
	ctx, end := ExpectStream(context.Background())
	t.Cleanup(end)
	p, err := svc.Prepare(ctx, id)
	if err != nil || p == nil {
		t.Fatalf("Prepare: %v %v", p, err)
	}
	return ctx, p
}

// newService is a Service on e's connection.
func newService(t *testing.T, e *testEnv, opts ...Option) *Service {
	t.Helper()
	svc, err := New(e.nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// A request published after Prepare on the service's connection opens its
// stream without reading E2A_RESPONSES, and every frame, all of them stored
// before the reader opened, comes from the subscription in order.
func TestPreparedFreshRequestReadsNothing(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	svc := newService(t, e)
	gets := natstest.DirectGets(t, e.nc, streams.ResponsesStream)
	env := newEnvelope("prep-fresh")
	ctx, p := preparedCall(t, svc, env.RequestID)
	e.submit(t, env) // on e.nc, the service's connection
	p.Published(true)
	w := e.writer(t, env)
	w.text("a ")
	w.text("b ")
	w.complete(map[string]any{"content": "done"})
	fr := readAll(t, ctx, e.nc, env.RequestID)
	if len(fr) != 3 {
		t.Fatalf("%d frames", len(fr))
	}
	checkSeq(t, fr, 0, true)
	if n := gets.Count(t); n != 0 {
		t.Fatalf("%d direct gets on %s for a fresh request", n, streams.ResponsesStream)
	}
}

// A duplicate (or a publish on another connection) may have frames stored
// before the subscription: the reader reads the stream first.
func TestPreparedDuplicateReadsTheStream(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	svc := newService(t, e)
	e.finished(t, "prep-dup", 2) // the original, answered before the retry
	gets := natstest.DirectGets(t, e.nc, streams.ResponsesStream)
	ctx, p := preparedCall(t, svc, "prep-dup")
	p.Published(false)
	fr := readAll(t, ctx, e.nc, "prep-dup")
	if len(fr) != 3 {
		t.Fatalf("%d frames", len(fr))
	}
	checkSeq(t, fr, 0, true)
	if n := gets.Count(t); n == 0 {
		t.Fatal("no direct get for a duplicate")
	}
}

// More frames before the reader opens than the subscription holds: the
// dropped ones are read from the stream, none lost or repeated.
func TestPreparedOverflowReadsWhatWasDropped(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	svc := newService(t, e, WithReplayOptions(WithLiveBuffer(4)))
	env := newEnvelope("prep-over")
	ctx, p := preparedCall(t, svc, env.RequestID)
	e.submit(t, env)
	p.Published(true)
	w := e.writer(t, env)
	for i := range 20 {
		w.text(fmt.Sprintf("t%d ", i))
	}
	w.complete(nil)
	fr := readAll(t, ctx, e.nc, env.RequestID)
	if len(fr) != 21 {
		t.Fatalf("%d frames", len(fr))
	}
	checkSeq(t, fr, 0, true)
}

// Without ExpectStream nothing is subscribed; a subscription no stream took
// is dropped by the end function, and a second Prepare in one call does
// nothing.
func TestPrepareOnlyWhenExpected(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	svc := newService(t, e)
	if p, err := svc.Prepare(context.Background(), "x"); p != nil || err != nil {
		t.Fatalf("Prepare without ExpectStream: %v %v", p, err)
	}
	before := e.nc.NumSubscriptions()
	ctx, end := ExpectStream(context.Background())
	p, err := svc.Prepare(ctx, "unused")
	if err != nil || p == nil {
		t.Fatalf("Prepare: %v %v", p, err)
	}
	if again, _ := svc.Prepare(ctx, "other"); again != nil {
		t.Fatal("second Prepare in one call subscribed")
	}
	if got := takePrepared(ctx, "unused"); got != nil {
		t.Fatal("taken before Published")
	}
	p.Published(true)
	if got := takePrepared(ctx, "other"); got != nil {
		t.Fatal("taken for another request")
	}
	end()
	if n := e.nc.NumSubscriptions(); n != before {
		t.Fatalf("%d subscriptions after end, %d before", n, before)
	}
}
