package egress

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestSlowClientLiveOverflowIsNoSlowConsumer: a reader whose client reads
// slower than the agent writes (the stream blocked in a write to it) lets
// its live buffer overflow; the live subscription is at most once by
// design and the reader reads the dropped frames again from the stream.
// That one slow client is not the process failing to keep up: the
// connection's events do not count it as slow_consumer nor warn of it (it
// did: e2a_nats_connection_events_total{event="slow_consumer"} and alert
// E2ANATSSlowConsumer, "scale the stage out", for every slow client).
func TestSlowClientLiveOverflowIsNoSlowConsumer(t *testing.T) {
	e := startEnv(t)
	log := &testkit.Buffer{}
	ev := streams.NewConnEvents(slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	nc, err := e.srv.Connect(ev.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	w := e.running(t, "req_overflow")
	r, err := Open(ctx, nc, "req_overflow", 0, WithLiveBuffer(1))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 20 {
		w.text("y")
	}
	w.complete("done")
	// Nothing read meanwhile: the live buffer of 1 overflowed.
	testkit.Eventually(t, 10*time.Second, "the live subscription's drop reported", func() bool {
		return strings.Contains(log.String(), `"subject":"e2a.live.req_overflow"`)
	})

	if n := readChecked(t, ctx, r, nil); n != 21 {
		t.Fatalf("read %d frames, want 21", n)
	}
	if n := ev.Count(streams.ConnSlowConsumer); n != 0 {
		t.Errorf("a slow client's live overflow counted as %d slow consumer events", n)
	}
	if strings.Contains(log.String(), `"level":"WARN"`) {
		t.Errorf("a slow client's live overflow warned:\n%s", log.String())
	}
}
