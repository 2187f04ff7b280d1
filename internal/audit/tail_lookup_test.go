package audit

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestTailRetriesAFailedEnvelopeLookup: with a filter (--task here), Tail
// looks up the envelope of a request met through its frames; when that
// lookup got no answer (the connection cut), the request was taken for one
// that does not match for its whole life: its frames were never shown (and
// its request record only when a poll met it later, without them). The
// lookup is tried again at the next poll, and then every frame since the
// first one met is shown, once.
func TestTailRetriesAFailedEnvelopeLookup(t *testing.T) {
	cases := []struct {
		name string
		// before: the request and its frame 0 are stored before the
		// tailer (a request running when Tail started: frame 0 only
		// primes the checker, the frames from the first met on are
		// shown).
		before bool
		// nextFrame: the request's next live frame is met once the
		// connection is back (else both during the cut).
		nextFrame bool
		want      string
	}{
		{"after, next frame", false, true, "request,frame 0,frame 1,summary"},
		{"after, next poll", false, false, "request,frame 0,frame 1,summary"},
		{"before, next frame", true, true, "request,frame 1,frame 2,summary"},
		{"before, next poll", true, false, "request,frame 1,frame 2,summary"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, a, live := newProxiedAuditor(ctx, t, 50*time.Millisecond)
			const id = "lookup-cut"
			store := func() { natstest.PublishRequest(t, p.JS, "demo", &e2a.Envelope{RequestID: id, TaskID: "wanted"}) }
			var msgs []*nats.Msg
			var tl *tailer
			var recs *[]Record
			if c.before {
				store()
				s0 := natstest.PublishBurst(t, p.NC, id, 0, 0, natstest.Frame(id, 0, false))
				testkit.Receive(t, live, 10*time.Second, "live copy of frame 0")
				tl, recs = newTestTailer(ctx, t, a)
				s1 := natstest.PublishBurst(t, p.NC, id, 1, s0, natstest.Frame(id, 1, false))
				natstest.PublishBurst(t, p.NC, id, 2, s1, natstest.Frame(id, 2, true))
				msgs = []*nats.Msg{testkit.Receive(t, live, 10*time.Second, "live copy of frame 1"),
					testkit.Receive(t, live, 10*time.Second, "live copy of frame 2")}
			} else {
				tl, recs = newTestTailer(ctx, t, a)
				store()
				msgs = twoFramesLive(ctx, t, p.NC, live, id)
			}
			tl.q = Query{TaskID: "wanted"}
			p.Cut(t)
			if err := tl.frame(ctx, msgs[0]); err != nil {
				t.Fatal(err)
			}
			if !c.nextFrame {
				if err := tl.frame(ctx, msgs[1]); err != nil {
					t.Fatal(err)
				}
			}
			p.Restore(t)
			if c.nextFrame {
				if err := tl.frame(ctx, msgs[1]); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tl.tick(ctx, subjects.AllRequests, tl.reqs.last+1); err != nil {
				t.Fatal(err)
			}
			if got := records(*recs); got != c.want {
				t.Fatalf("records %s, want %s", got, c.want)
			}
		})
	}
}

// records lists recs as "kind[ sequence]", comma-separated.
func records(recs []Record) string {
	var out []string
	for _, r := range recs {
		s := r.Kind
		if r.Sequence != nil {
			s += " " + strconv.FormatInt(*r.Sequence, 10)
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

// TestTailFilteredReadsNoFramesOfOtherRequests: `e2a tail --pool wanted`
// reads of a request of another pool only its envelope (one direct get of
// E2A_REQUESTS, when its first live message comes: response subjects carry
// no pool), never its frames. It read them back from E2A_RESPONSES, to show
// nothing of them, when a live message showed a gap, after a reconnect (every
// request followed and not done), and after a lookup that got no answer
// was tried again. The direct gets of Tail's connection are counted.
func TestTailFilteredReadsNoFramesOfOtherRequests(t *testing.T) {
	cases := []struct {
		name string
		// run makes tl meet request id (pool demo) as the case says, the
		// gets counted from where it starts them (count).
		run func(ctx context.Context, t *testing.T, p *Proxied, tl *tailer, live <-chan *nats.Msg, id string, count func())
		// reqGets: the direct gets of E2A_REQUESTS counted: the lookups
		// of the envelope, and the poll that ends each case (the new
		// requests of pool wanted: none).
		reqGets int
	}{
		{name: "gap", reqGets: 2, run: func(ctx context.Context, t *testing.T, p *Proxied, tl *tailer, live <-chan *nats.Msg, id string, count func()) {
			msgs := twoFramesLive(ctx, t, p.NC, live, id)
			count()
			// Frame 0's live copy is lost; frame 1's arrives.
			if err := tl.frame(ctx, msgs[1]); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "reconnect", reqGets: 1, run: func(ctx context.Context, t *testing.T, p *Proxied, tl *tailer, live <-chan *nats.Msg, id string, count func()) {
			s0 := natstest.PublishBurst(t, p.NC, id, 0, 0, natstest.Frame(id, 0, false))
			if err := tl.frame(ctx, testkit.Receive(t, live, 10*time.Second, "live copy of frame 0")); err != nil {
				t.Fatal(err)
			}
			// Frame 1 goes by during a reconnect not caught up with yet.
			natstest.PublishBurst(t, p.NC, id, 1, s0, natstest.Frame(id, 1, true))
			testkit.Receive(t, live, 10*time.Second, "live copy of frame 1")
			tl.reconnects = p.TNC.Stats().Reconnects + 1
			count()
		}},
		{name: "lookup retried", reqGets: 2, run: func(ctx context.Context, t *testing.T, p *Proxied, tl *tailer, live <-chan *nats.Msg, id string, count func()) {
			natstest.PublishBurst(t, p.NC, id, 0, 0, natstest.Frame(id, 0, false))
			m := testkit.Receive(t, live, 10*time.Second, "live copy of frame 0")
			p.Cut(t)
			if err := tl.frame(ctx, m); err != nil {
				t.Fatal(err)
			}
			p.Restore(t)
			count()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, p, tl, recs, live := filteredTailer(t, Query{Pool: "wanted"})
			const id = "other-pool"
			natstest.PublishRequest(t, p.JS, "demo", &e2a.Envelope{RequestID: id})
			var resps, reqs *natstest.Counter
			c.run(ctx, t, p, tl, live, id, func() {
				resps = natstest.DirectGets(t, p.TNC, streams.ResponsesStream)
				reqs = natstest.DirectGets(t, p.TNC, streams.RequestsStream)
			})
			filter, _ := subjects.RequestFilter("wanted")
			if _, err := tl.tick(ctx, filter, tl.reqs.last+1); err != nil {
				t.Fatal(err)
			}
			if got := resps.Count(t); got != 0 {
				t.Errorf("%d direct gets of E2A_RESPONSES for a request of another pool, want 0", got)
			}
			if got := reqs.Count(t); got != c.reqGets {
				t.Errorf("%d direct gets of E2A_REQUESTS, want %d (the envelope's lookup, the poll)", got, c.reqGets)
			}
			if len(*recs) != 0 {
				t.Errorf("records %s shown for a request of another pool", records(*recs))
			}
		})
	}
}

// TestTailDropsFramesOfOtherRequests: once Tail knows a request does not
// match (its envelope looked up when its first live frame came, or met by
// a poll), its later live frames are dropped at once: they went through
// the frame checker (decoded and checked, to show nothing). The ids of
// those requests stay bounded by MaxTracked, as the tracked ones: beyond
// it the oldest is forgotten (its next frame is looked up again). Each
// request costs one envelope lookup (met through its frames) or none (met
// by a poll).
func TestTailDropsFramesOfOtherRequests(t *testing.T) {
	cases := []struct {
		name    string
		q       Query
		poll    bool // the requests are met by a poll before their frames
		max     int  // MaxTracked
		reqGets int  // direct gets of E2A_REQUESTS from the first frame on
	}{
		{"pool, met through frames", Query{Pool: "wanted"}, false, 2, 4},
		{"task, met by a poll", Query{TaskID: "wanted"}, true, 4, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, p, tl, recs, live := filteredTailer(t, c.q)
			tl.max = c.max
			ids := []string{"other-0", "other-1", "other-2", "other-3"}
			for _, id := range ids {
				natstest.PublishRequest(t, p.JS, "demo", &e2a.Envelope{RequestID: id, TaskID: "other"})
			}
			if c.poll {
				if _, err := tl.tick(ctx, subjects.AllRequests, tl.reqs.last+1); err != nil {
					t.Fatal(err)
				}
			}
			reqs := natstest.DirectGets(t, p.TNC, streams.RequestsStream)
			for _, id := range ids {
				for _, m := range twoFramesLive(ctx, t, p.NC, live, id) {
					if err := tl.frame(ctx, m); err != nil {
						t.Fatal(err)
					}
				}
			}
			checked := 0
			for _, r := range tl.tracked {
				checked += r.check.frames
			}
			if checked != 0 {
				t.Errorf("%d frames of requests that do not match went through the checker, want 0", checked)
			}
			if len(tl.tracked) > tl.max || len(tl.others.ids) > tl.max || len(tl.others.q) > tl.max {
				t.Errorf("%d tracked, %d (%d queued) ids of requests that do not match remembered, want at most %d",
					len(tl.tracked), len(tl.others.ids), len(tl.others.q), tl.max)
			}
			if got := reqs.Count(t); got != c.reqGets {
				t.Errorf("%d direct gets of E2A_REQUESTS, want %d", got, c.reqGets)
			}
			if len(*recs) != 0 {
				t.Errorf("records %s shown for requests that do not match", records(*recs))
			}
		})
	}
}

// filteredTailer returns a test tailer (newTestTailer) with filter q on a
// proxied auditor (newProxiedAuditor), and the context of the test's calls
// (30 s at most). Its call timeout is long enough for a loaded machine: the
// tests count the direct gets, and a read given up and sent again is one
// more (50 ms: one or two more in a run beside other packages' tests).
func filteredTailer(t *testing.T, q Query) (context.Context, *Proxied, *tailer, *[]Record, <-chan *nats.Msg) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	p, a, live := newProxiedAuditor(ctx, t, time.Second)
	tl, recs := newTestTailer(ctx, t, a)
	tl.q = q
	return ctx, p, tl, recs, live
}

// TestTailFinishedRequestMetAgainByAPoll: requests met through their
// frames (which came before the poll that reads their envelopes: a short
// request between two polls) finish and, beyond MaxTracked, are forgotten,
// the first done first. The poll that then met their envelopes took each
// for a new request: its request record was shown again, and, tracked
// again, it pushed out the oldest running request, whose last frame and
// summary were then never shown (seen in CI, `-race`).
func TestTailFinishedRequestMetAgainByAPoll(t *testing.T) {
	ctx, p, tl, recs, live := filteredTailer(t, Query{})
	tl.max = 2
	from := tl.reqs.last + 1
	for _, id := range []string{"long", "short-1", "short-2"} {
		natstest.PublishRequest(t, p.JS, "demo", &e2a.Envelope{RequestID: id})
	}
	s0 := natstest.PublishBurst(t, p.NC, "long", 0, 0, natstest.Frame("long", 0, false))
	msgs := []*nats.Msg{testkit.Receive(t, live, 10*time.Second, "live copy of long's frame 0")}
	msgs = append(msgs, twoFramesLive(ctx, t, p.NC, live, "short-1")...)
	msgs = append(msgs, twoFramesLive(ctx, t, p.NC, live, "short-2")...)
	for _, m := range msgs {
		if err := tl.frame(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tl.tick(ctx, subjects.AllRequests, from); err != nil {
		t.Fatal(err)
	}
	natstest.PublishBurst(t, p.NC, "long", 1, s0, natstest.Frame("long", 1, true))
	if err := tl.frame(ctx, testkit.Receive(t, live, 10*time.Second, "live copy of long's frame 1")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range *recs {
		got = append(got, r.Kind+" "+r.RequestID)
	}
	want := "request long,frame long," +
		"request short-1,frame short-1,frame short-1,summary short-1," +
		"request short-2,frame short-2,frame short-2,summary short-2," +
		"frame long,summary long"
	if strings.Join(got, ",") != want {
		t.Fatalf("records:\n%s\nwant\n%s", strings.Join(got, ","), want)
	}
}
