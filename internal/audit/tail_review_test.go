package audit_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// startTail runs Tail on a until the test ends and returns once the live
// subscription is in place (a request stored after Tail started is shown).
func startTail(t *testing.T, js jetstream.JetStream, a *audit.Auditor, o audit.TailOptions) (*recorder, chan error, context.CancelFunc) {
	t.Helper()
	return startTailWith(t, js, a, o, newRecorder())
}

// startTailWith is startTail recording into rec.
func startTailWith(t *testing.T, js jetstream.JetStream, a *audit.Auditor, o audit.TailOptions, rec *recorder) (*recorder, chan error, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	go func() { errc <- a.Tail(ctx, o, rec.emit) }()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			subj, _ := subjects.Request("demo", "marker-"+strconv.Itoa(i))
			_, _ = js.Publish(ctx, subj, []byte(`{}`))
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	rec.waitFor(t, "marker request", func(r audit.Record) bool {
		return r.Kind == audit.KindRequest && strings.HasPrefix(r.RequestID, "marker-")
	})
	close(stop)
	<-stopped // no marker is stored after the test's own requests
	return rec, errc, cancel
}

// waitSummaries waits (bounded) for the summaries of ids and returns the
// ones that never came.
func waitSummaries(rec *recorder, within time.Duration, ids ...string) []string {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	rec.mu.Lock()
	for _, r := range rec.recs {
		if r.Kind == audit.KindSummary {
			delete(want, r.RequestID)
		}
	}
	rec.mu.Unlock()
	timeout := time.After(within)
	for len(want) > 0 {
		select {
		case r := <-rec.ch:
			if r.Kind == audit.KindSummary {
				delete(want, r.RequestID)
			}
		case <-timeout:
			var missing []string
			for _, id := range ids {
				if want[id] {
					missing = append(missing, id)
				}
			}
			return missing
		}
	}
	return nil
}

// shown lists the records of the requests whose id starts with prefix, as
// "kind id [sequence]".
func shown(rec *recorder, prefix string) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, r := range rec.recs {
		if strings.HasPrefix(r.RequestID, prefix) {
			s := r.Kind + " " + r.RequestID
			if r.Sequence != nil {
				s += " " + strconv.FormatInt(*r.Sequence, 10)
			}
			out = append(out, s)
		}
	}
	return out
}

// TestTailReadsBackAfterReconnect: after `e2a tail`'s connection
// reconnected (it "reconnects for ever", docs/configuration.md), the frames
// republished on e2a.live.> while it was away, which its core subscription
// never gets, were lost: Tail read a lost message back only when a later
// live message of the same request showed the gap, and backfilled a polled
// request only when it was stored before the subscription. A request that
// ran entirely during the blip was shown as a request record with no frame
// and no summary, and a running request whose final frame fell in the blip
// never got its final frame or summary.
func TestTailReadsBackAfterReconnect(t *testing.T) {
	p := audit.NewProxied(t)
	js, nc := p.JS, p.NC
	a, err := audit.New(p.TNC)
	if err != nil {
		t.Fatal(err)
	}
	rec, errc, cancel := startTail(t, js, a, audit.TailOptions{PollInterval: 20 * time.Millisecond})

	// A request running when the blip starts: frame 0 shown live.
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "rc-run"})
	s0 := natstest.PublishBurst(t, nc, "rc-run", 0, 0, frame("rc-run", 0, false))
	rec.waitFor(t, "frame 0 of rc-run", func(r audit.Record) bool {
		return r.Kind == audit.KindFrame && r.RequestID == "rc-run"
	})

	p.Cut(t)
	// During the blip: rc-run ends; rc-gone runs whole.
	natstest.PublishBurst(t, nc, "rc-run", 1, s0, frame("rc-run", 1, true))
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "rc-gone"})
	g0 := natstest.PublishBurst(t, nc, "rc-gone", 0, 0, frame("rc-gone", 0, false))
	natstest.PublishBurst(t, nc, "rc-gone", 1, g0, frame("rc-gone", 1, true))
	p.Restore(t)
	if err := p.TNC.FlushTimeout(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	// After the blip: a request shown whole, live.
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "rc-after"}, 1)

	missing := waitSummaries(rec, 10*time.Second, "rc-after", "rc-run", "rc-gone")
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Tail: %v", err)
	}
	if len(missing) > 0 {
		t.Fatalf("after a reconnect, no summary (nor the frames stored during the disconnect) for %v; tail printed:\n  %s",
			missing, strings.Join(shown(rec, "rc-"), "\n  "))
	}
}

// TestTailReportsFrameAfterFinal: docs/operations.md says "a frame stored
// after the final one is reported ... live by `e2a tail`", but Tail dropped
// every live message of a request once its final frame was seen, so a
// frame stored after the final one in a message of its own (a second
// writer, a stray publish onto e2a.resp.<id>) was neither printed nor
// reported as a violation; only frames after the final one inside the same
// burst were.
func TestTailReportsFrameAfterFinal(t *testing.T) {
	js, nc := server(t)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	rec, errc, cancel := startTail(t, js, a, audit.TailOptions{PollInterval: 20 * time.Millisecond})

	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "extra"})
	publishFrame(t, js, "extra", 0, frame("extra", 0, true))
	rec.waitFor(t, "summary of extra", func(r audit.Record) bool {
		return r.Kind == audit.KindSummary && r.RequestID == "extra"
	})
	// A frame stored after the final one, in its own message.
	publishFrame(t, js, "extra", 1, frame("extra", 1, false))
	// A later request: once its summary is shown, tail has handled every
	// live message stored before its frames.
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "next"}, 0)
	rec.waitFor(t, "summary of next", func(r audit.Record) bool {
		return r.Kind == audit.KindSummary && r.RequestID == "next"
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Tail: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	printed, reported := false, false
	for _, r := range rec.recs {
		if r.RequestID != "extra" {
			continue
		}
		if r.Kind == audit.KindFrame && r.Sequence != nil && *r.Sequence == 1 {
			printed = true
		}
		if r.Kind == audit.KindSummary && strings.Contains(strings.Join(r.Summary.Violations, " "), "after the final frame") {
			reported = true
		}
	}
	if !printed || !reported {
		t.Fatalf("frame 1 of extra, stored after its final frame 0: printed %v, reported in a summary %v", printed, reported)
	}
}

// TestTailRidesOutAShortOutage: Tail "returns nil when ctx ends, or the
// error of emit" and `e2a tail` "follows live traffic until interrupted",
// on a connection that "reconnects for ever"; but a poll of E2A_REQUESTS
// that failed for want of an answer (3 attempts of the call timeout,
// 3 × 5 s by default: a NATS server restart) ended Tail with that error
// (only streams.ErrDirectGet was tolerated).
func TestTailRidesOutAShortOutage(t *testing.T) {
	p := audit.NewProxied(t)
	// A short call timeout stands for the default 5 s with a longer outage.
	a, err := audit.New(p.TNC, audit.WithCallTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rec, errc, cancel := startTail(t, p.JS, a, audit.TailOptions{PollInterval: 20 * time.Millisecond})
	p.Cut(t)
	// The outage lasts well over 3 call timeouts and several polls.
	select {
	case err := <-errc:
		t.Fatalf("Tail ended during a %v outage of its (reconnecting) connection: %v", 2*time.Second, err)
	case <-time.After(2 * time.Second):
	}
	p.Restore(t)
	completeRequest(t, p.JS, "demo", &e2a.Envelope{RequestID: "later"}, 0)
	if missing := waitSummaries(rec, 10*time.Second, "later"); len(missing) > 0 {
		t.Fatal("no summary of a request after the outage")
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Tail: %v", err)
	}
}

// TestTailKeepsARunningRequest: MaxTracked bounds the requests Tail
// remembers, and the one forgotten beyond it was the oldest by first
// sight, even while it still ran and newer ones were done. Its next live
// frame then made it a new request to Tail: its request record was printed
// again and its earlier frames read back and printed again. With the
// default 100,000, one request running while 100,000 others passed (100 s
// at 1,000 requests/s) was printed twice.
func TestTailKeepsARunningRequest(t *testing.T) {
	js, nc := server(t)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	rec, errc, cancel := startTail(t, js, a, audit.TailOptions{PollInterval: 20 * time.Millisecond, MaxTracked: 2})

	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: "long"})
	s0 := natstest.PublishBurst(t, nc, "long", 0, 0, frame("long", 0, false))
	rec.waitFor(t, "frame 0 of long", func(r audit.Record) bool {
		return r.Kind == audit.KindFrame && r.RequestID == "long"
	})
	// Two short requests pass, one after the other (each done before the
	// next is tracked: with both running at once, long would be the
	// oldest running one and rightly forgotten), while long runs.
	for _, id := range []string{"short-1", "short-2"} {
		completeRequest(t, js, "demo", &e2a.Envelope{RequestID: id}, 0)
		if missing := waitSummaries(rec, 10*time.Second, id); len(missing) > 0 {
			t.Fatalf("no summary of %v", missing)
		}
	}
	natstest.PublishBurst(t, nc, "long", 1, s0, frame("long", 1, true))
	if missing := waitSummaries(rec, 10*time.Second, "long"); len(missing) > 0 {
		t.Fatal("no summary of long")
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Tail: %v", err)
	}
	if got := strings.Join(shown(rec, "long"), ","); got != "request long,frame long 0,frame long 1,summary long" {
		t.Fatalf("records of long: %s, want request,frame 0,frame 1,summary (each once)", got)
	}
	if got := strings.Join(shown(rec, "short-"), ","); got != "request short-1,frame short-1 0,summary short-1,"+
		"request short-2,frame short-2 0,summary short-2" {
		t.Fatalf("records of the short requests: %s, want each request's once", got)
	}
}
