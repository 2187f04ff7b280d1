package agent_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestStaleCancelOfReusedIDIgnored: a cancel stored before a request's
// envelope is not that request's, and the worker does not apply it. The
// case: alice's request is cancelled; her envelope and frames then leave
// E2A_REQUESTS and E2A_RESPONSES (aged out, evicted by the responses' byte
// limit, or never written for a request cancelled while queued) while her
// cancel stays on e2a.ctl.<id> in E2A_CONTROL, and ingress lets bob take the
// id (it checks the requests and the frames). Bob's request must run:
//   - picked up by the worker that received alice's cancel live (the
//     cancels it remembers),
//   - picked up from a backlog by a worker started later (the stored cancel
//     read at pick-up), and held past its re-read of the stored cancel
//     (missed.go) without being stopped,
//
// while a cancel of the new request, stored after its envelope, still ends
// it cancelled at pick-up. The margin is 0 here: a cancel a moment older
// than the request is stale (in production a minute, staleCancelMargin).
func TestStaleCancelOfReusedIDIgnored(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool, id = "stale", "stale-shared-id"
	aliceStarted, held, release := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	var calls atomic.Int32
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		calls.Add(1)
		who, _ := env.Params["who"].(string)
		switch who {
		case "alice":
			aliceStarted <- struct{}{}
			<-ctx.Done()
			return context.Cause(ctx)
		case "carol":
			held <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		return w.Complete("answer for " + who)
	})
	ignored := make(chan string, 16) // found_at of each stale cancel logged
	opts := []agent.Option{agent.WithStaleCancelMargin(0), agent.WithHeartbeat(50 * time.Millisecond),
		agent.WithLogger(slog.New(&staleLog{found: ignored}))}
	// Each request of the id is stored under a message id of its own, as
	// once the dedupe window has passed.
	publishAs := func(who string) {
		t.Helper()
		publish(t, s.js, pool, request(id, map[string]any{"who": who}), subjects.HeaderMsgID, id+"-"+who)
	}
	wantAnswer := func(who string) {
		t.Helper()
		fr := waitFinal(t, s.nc, id, 10*time.Second)
		last := fr[len(fr)-1]
		c, err := last.Complete()
		if last.ResponseKind != e2a.KindComplete || err != nil || c.Result != "answer for "+who {
			t.Fatalf("%s's request under the id of alice's cancelled one: final %s %s, want his answer", who, last.ResponseKind, last.Body)
		}
	}

	w1 := startWorker(t, s.connect(t), pool, h, opts...)
	waitConsumer(t, s.js, pool)
	publishAs("alice")
	testkit.Receive(t, aliceStarted, 10*time.Second, "alice's handler started")
	if res, err := agent.Cancel(tctx(t), s.js, id); err != nil || !res.Published {
		t.Fatalf("alice's cancel: %+v %v", res, err)
	}
	fr := waitFinal(t, s.nc, id, 10*time.Second)
	if e, _ := fr[len(fr)-1].Error(); e.Code != e2a.ErrCodeCancelled {
		t.Fatalf("alice's request: final %s, want cancelled", fr[len(fr)-1].Body)
	}
	natstest.Purge(t, s.js, streams.RequestsStream, streams.ResponsesStream) // E2A_CONTROL keeps her cancel

	// The worker that received alice's cancel live.
	publishAs("bob")
	wantAnswer("bob")
	if at := testkit.Receive(t, ignored, 5*time.Second, "the stale cancel logged at bob's pick-up"); at != "pick-up" {
		t.Errorf("logged found_at %q, want pick-up", at)
	}
	if err := w1.stop(); err != nil {
		t.Fatal(err)
	}
	natstest.Purge(t, s.js, streams.RequestsStream, streams.ResponsesStream)

	// A backlog found by a worker that never received it: the stored cancel
	// is read at pick-up, then again while the request is held.
	publishAs("carol")
	w2 := startWorker(t, s.connect(t), pool, h, opts...)
	testkit.Receive(t, held, 10*time.Second, "carol's handler started")
	for _, want := range []string{"pick-up", "re-read"} {
		if at := testkit.Receive(t, ignored, 10*time.Second, "the stale cancel logged (%s)", want); at != want {
			t.Fatalf("logged found_at %q, want %s", at, want)
		}
	}
	close(release)
	wantAnswer("carol")
	if err := w2.stop(); err != nil {
		t.Fatal(err)
	}
	natstest.Purge(t, s.js, streams.RequestsStream, streams.ResponsesStream)

	// The new request's own cancel, stored after it, still counts.
	publishAs("dave")
	if res, err := agent.Cancel(tctx(t), s.js, id); err != nil || !res.Published {
		t.Fatalf("dave's cancel: %+v %v", res, err)
	}
	before := calls.Load()
	startWorker(t, s.connect(t), pool, h, opts...)
	fr = waitFinal(t, s.nc, id, 10*time.Second)
	if e, _ := fr[0].Error(); len(fr) != 1 || e.Code != e2a.ErrCodeCancelled || calls.Load() != before {
		t.Fatalf("dave's cancelled request: %d frames, final %s, %d handler calls; want cancelled at pick-up", len(fr), fr[len(fr)-1].Body, calls.Load()-before)
	}
}

// staleLog is a slog handler that sends the found_at of each stale cancel
// logged to found, and drops every other record.
type staleLog struct {
	found chan<- string
}

func (l *staleLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *staleLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "found_at" {
			l.found <- a.Value.String()
			return false
		}
		return true
	})
	return nil
}

func (l *staleLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *staleLog) WithGroup(string) slog.Handler      { return l }
