package audit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// testAuditor is an Auditor on a new server.
func testAuditor(t *testing.T) (*Auditor, jetstream.JetStream, *nats.Conn) {
	t.Helper()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	a, err := New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return a, js, nc
}

// newTestTailer is the tailer Tail builds once subscribed, with its records
// appended to *recs.
func newTestTailer(ctx context.Context, t *testing.T, a *Auditor) (*tailer, *[]Record) {
	t.Helper()
	reqs, err := a.state(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	resps, err := a.state(ctx, streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	recs := &[]Record{}
	tl := &tailer{a: a, emit: func(r Record) error { *recs = append(*recs, r); return nil }, reqs: reqs, resps: resps,
		tracked: map[string]*tailReq{}, max: 100, backfillTo: reqs.last, subscribedTo: reqs.last, reconnects: a.nc.Stats().Reconnects}
	return tl, recs
}

// TestReviewTailShowsLostFirstLiveFrame: a request stored after Tail's live
// subscription was in place (so Tail must show all of its frames) whose
// first live message is lost (Tail's live buffer of 8192 was full: a busy
// pipeline, or `e2a tail | less` not reading) has frame 0 read back from
// E2A_RESPONSES when frame 1 arrives, and it is shown ("lost ones are
// shown"). It was only fed to the checker (taken for a frame from before
// Tail started): `e2a tail` printed frame 1 alone.
func TestTailShowsLostFirstLiveFrame(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, js, nc := testAuditor(t)
	live := liveFeed(ctx, t, nc)
	// The tailer as Tail builds it once subscribed: nothing stored yet.
	tl, recs := newTestTailer(ctx, t, a)
	reqs := tl.reqs

	const id = "lost-first-live"
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: id})
	if _, err := tl.poll(ctx, subjects.AllRequests, reqs.last+1); err != nil {
		t.Fatal(err)
	}
	msgs := twoFramesLive(ctx, t, nc, live, id)
	// Frame 0's live copy is lost (Tail's channel was full); frame 1's
	// arrives.
	if err := tl.frame(ctx, msgs[1]); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var seqs []int64
	for _, r := range *recs {
		kinds = append(kinds, r.Kind)
		if r.Kind == KindFrame && r.Sequence != nil {
			seqs = append(seqs, *r.Sequence)
		}
	}
	if len(seqs) != 2 || seqs[0] != 0 || seqs[1] != 1 {
		t.Fatalf("frames printed %v (records %v), want [0 1]: frame 0, whose live copy was lost, "+
			"was read back but not printed, for a request stored after the tail started", seqs, kinds)
	}
}

// TestTailBackfillsRequestsStoredDuringReconnect: a request stored and
// answered while Tail's connection was away, and first polled after it
// reconnected, has every frame read back from E2A_RESPONSES (their live
// copies never reached Tail): backfillTo is raised to the requests stored
// by then. Only requests stored before Tail subscribed were backfilled, so
// such a request was shown without frames or summary.
func TestTailBackfillsRequestsStoredDuringReconnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, js, nc := testAuditor(t)
	tl, recs := newTestTailer(ctx, t, a)
	reqs := tl.reqs
	// A reconnect not caught up with yet: the counter Tail saw differs.
	tl.reconnects = nc.Stats().Reconnects + 1

	const id = "during-reconnect"
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: id})
	s0 := natstest.PublishBurst(t, nc, id, 0, 0, natstest.Frame(id, 0, false))
	natstest.PublishBurst(t, nc, id, 1, s0, natstest.Frame(id, 1, true))
	if _, err := tl.tick(ctx, subjects.AllRequests, reqs.last+1); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range *recs {
		kinds = append(kinds, r.Kind)
	}
	if got := strings.Join(kinds, ","); got != "request,frame,frame,summary" {
		t.Fatalf("records %s, want request,frame,frame,summary", got)
	}
}

// TestTailShowsLostFirstFrameOfARequestPolledAfterAReconnect: a request
// stored after Tail started and first polled once a reconnect (or a full
// live buffer) was caught up with had its envelope taken for one stored
// before the subscription (backfillTo is raised then): when its frame 0's
// live copy was lost, frame 0 was read back into the checker but not
// printed, as TestTailShowsLostFirstLiveFrame's was.
func TestTailShowsLostFirstFrameOfARequestPolledAfterAReconnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, js, nc := testAuditor(t)
	live := liveFeed(ctx, t, nc)
	tl, recs := newTestTailer(ctx, t, a)
	reqs := tl.reqs

	const id = "polled-after-reconnect"
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: id})
	// A reconnect not caught up with yet: the tick catches up, then polls
	// the request (no frame stored yet).
	tl.reconnects = nc.Stats().Reconnects + 1
	if _, err := tl.tick(ctx, subjects.AllRequests, reqs.last+1); err != nil {
		t.Fatal(err)
	}
	msgs := twoFramesLive(ctx, t, nc, live, id)
	// Frame 0's live copy is lost; frame 1's arrives.
	if err := tl.frame(ctx, msgs[1]); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, r := range *recs {
		if r.Kind == KindFrame && r.Sequence != nil {
			seqs = append(seqs, *r.Sequence)
		}
	}
	if len(seqs) != 2 || seqs[0] != 0 || seqs[1] != 1 {
		t.Fatalf("frames printed %v, want [0 1]", seqs)
	}
}

// liveFeed is the live feed as Tail's subscription receives it (the
// server's republish of each stored response message), subscribed on nc
// until the test ends.
func liveFeed(ctx context.Context, t *testing.T, nc *nats.Conn) <-chan *nats.Msg {
	t.Helper()
	live := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(subjects.AllLive, live)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	return live
}

// twoFramesLive stores frames 0 and 1 (final) of request id and returns
// their live copies, as live receives them.
func twoFramesLive(ctx context.Context, t *testing.T, nc *nats.Conn, live <-chan *nats.Msg, id string) []*nats.Msg {
	t.Helper()
	s0 := natstest.PublishBurst(t, nc, id, 0, 0, natstest.Frame(id, 0, false))
	natstest.PublishBurst(t, nc, id, 1, s0, natstest.Frame(id, 1, true))
	var msgs []*nats.Msg
	for len(msgs) < 2 {
		select {
		case m := <-live:
			msgs = append(msgs, m)
		case <-ctx.Done():
			t.Fatalf("live copies: got %d of 2", len(msgs))
		}
	}
	return msgs
}
