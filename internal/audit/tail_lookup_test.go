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
			p := NewProxied(t)
			a, err := New(p.TNC, WithCallTimeout(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			live := make(chan *nats.Msg, 16)
			sub, err := p.NC.ChanSubscribe(subjects.AllLive, live)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			if err := p.NC.FlushWithContext(ctx); err != nil {
				t.Fatal(err)
			}
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
