package agent_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// A held turn (holdUnrun) does not keep the pool from delivering the turn
// it waits for: a later turn stored before its earlier one (ingress records
// a turn before it publishes it; two front doors' publishes may land in
// either order) is picked up first, and with MaxAckPending reached the
// earlier one is never delivered while the later holds its delivery. Past
// its deadline, the later turn used to end then (its ack made room); held
// for the earlier turn, it kept the pool stuck for good. It now ends at
// once when the turn it waits for is undelivered behind a full
// MaxAckPending (out of order, the price of not deadlocking), and the
// earlier turn runs.
func TestHeldTurnEndsWhenTheTurnBeforeCannotBeDelivered(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool = "rvmaxap"
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return w.Complete("ran " + env.RequestID)
	})
	startWorker(t, s.connect(t), pool, h, agent.WithConcurrency(2), agent.WithMaxAckPending(1),
		agent.WithDrainTimeout(time.Second))
	waitConsumer(t, s.js, pool)
	// The later turn lands first and waits for the earlier one (not stored
	// yet: within turnGrace it is waited for).
	later := request("rvmaxap-2", nil)
	later.Deadline = e2a.FormatTime(time.Now().Add(500 * time.Millisecond))
	publishAfter(t, s.js, pool, later, "rvmaxap-1")
	waitPending(t, s.js, pool, 1)
	publish(t, s.js, pool, request("rvmaxap-1", nil))
	// Its deadline passes while it waits (500 ms): held for the earlier
	// turn, which is never delivered, it must end (undelivered).
	name, _ := streams.AgentConsumerName(pool)
	ok := testkit.Until(10*time.Second, func() bool {
		fr, _ := storedFrames(t, s.nc, "rvmaxap-1")
		return len(fr) > 0 && fr[len(fr)-1].IsFinal
	})
	if !ok {
		c, err := s.js.Consumer(tctx(t), streams.RequestsStream, name)
		if err != nil {
			t.Fatal(err)
		}
		info := c.CachedInfo()
		fr2, _ := storedFrames(t, s.nc, "rvmaxap-2")
		t.Fatalf("the earlier turn never ran: MaxAckPending %d, ack pending %d, %d request(s) not delivered; "+
			"the later turn, past its deadline, held for it with %d frame(s) (a deadlock)",
			info.Config.MaxAckPending, info.NumAckPending, info.NumPending, len(fr2))
	}
	fr := waitFinal(t, s.nc, "rvmaxap-2", 10*time.Second)
	if e, _ := fr[0].Error(); len(fr) != 1 || e.Code != e2a.ErrCodeDeadlineExceeded {
		t.Errorf("the later turn: %d frames, %+v; want deadline_exceeded", len(fr), fr[0])
	}
}

// A queued turn cancelled before its pick-up is held (holdUnrun) as a
// stopped request: the scheduled re-reads of its stored cancel (missed.go)
// neither count nor log it as stopped by a cancel the control subscription
// missed (the pick-up saw the cancel, and the hold ignores cancels; it was
// logged at Info at the first re-read). The test watches the worker's
// reads of the turn's control subject and, once two of them were made
// after the hold began (the first scheduled re-read has returned), reads
// the log.
func TestHeldTurnNotLoggedAsMissedCancel(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool = "rvlog"
	started, release := make(chan struct{}), make(chan struct{})
	held := make(chan string, 4)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "rvlog-1" {
			close(started)
			<-release
		}
		return w.Complete("ran")
	})
	logs := &missedLog{}
	startWorker(t, s.connect(t), pool, h, agent.WithConcurrency(2), agent.WithHeartbeat(20*time.Millisecond),
		agent.WithTurnHeld(func(id string) { held <- id }), agent.WithLogger(slog.New(logs)))
	waitConsumer(t, s.js, pool)
	publish(t, s.js, pool, request("rvlog-1", nil))
	<-started
	defer close(release)

	ctl, err := subjects.Control("rvlog-2")
	if err != nil {
		t.Fatal(err)
	}
	reads := make(chan struct{}, 64)
	var holding sync.Mutex
	isHeld := false
	sub, err := s.nc.Subscribe(subjects.DirectGetLast(streams.ControlStream, ctl), func(*nats.Msg) {
		holding.Lock()
		defer holding.Unlock()
		if isHeld {
			reads <- struct{}{}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	if _, err := agent.Cancel(tctx(t), s.js, "rvlog-2"); err != nil {
		t.Fatal(err)
	}
	publishAfter(t, s.js, pool, request("rvlog-2", nil), "rvlog-1")
	if id := testkit.Receive(t, held, 10*time.Second, "the turn cancelled before its pick-up held"); id != "rvlog-2" {
		t.Fatalf("held %q", id)
	}
	holding.Lock()
	isHeld = true
	holding.Unlock()
	testkit.Receive(t, reads, 10*time.Second, "a re-read of the held turn's stored cancel")
	testkit.Receive(t, reads, 10*time.Second, "a second re-read of the held turn's stored cancel")
	if got := logs.lines(); len(got) > 0 {
		t.Errorf("a turn cancelled at its pick-up, held for the turn before it, logged as stopped by a missed cancel: %q", got)
	}
}

// missedLog is a slog handler that keeps the records saying a missed
// cancel stops a request, and drops every other.
type missedLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *missedLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *missedLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "missed by the control subscription") {
		l.mu.Lock()
		l.seen = append(l.seen, r.Message)
		l.mu.Unlock()
	}
	return nil
}

func (l *missedLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

func (l *missedLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *missedLog) WithGroup(string) slog.Handler      { return l }
