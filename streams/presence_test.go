package streams

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A pool is live while a pull waits, and for the grace after one was last
// seen: the gap between a worker's pull rounds does not read as "no live
// worker"; a worker gone longer than the grace does (requests it held and
// never acknowledged do not count), and so does a pool never seen pulling.
func TestPresence(t *testing.T) {
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p := NewPresence(5 * time.Second)
	p.now = func() time.Time { return clock }
	idle := &jetstream.ConsumerInfo{}
	steps := []struct {
		after time.Duration
		pool  string
		ci    *jetstream.ConsumerInfo
		want  bool
	}{
		{0, "demo", idle, false}, // never seen pulling
		{0, "demo", &jetstream.ConsumerInfo{NumWaiting: 1}, true},
		{time.Second, "demo", idle, true}, // between two pulls
		{0, "other", idle, false},         // per pool
		{3 * time.Second, "demo", &jetstream.ConsumerInfo{NumWaiting: 1}, true},
		{4 * time.Second, "demo", &jetstream.ConsumerInfo{NumAckPending: 4}, true}, // held requests: within the grace
		{time.Second, "demo", &jetstream.ConsumerInfo{NumAckPending: 4}, false},    // 5 s since a pull was seen: held requests prove nothing
		{0, "demo", nil, false},
	}
	for i, s := range steps {
		clock = clock.Add(s.after)
		if got := p.Live(s.pool, s.ci); got != s.want {
			t.Errorf("step %d (%s, %+v): live %v, want %v", i, s.pool, s.ci, got, s.want)
		}
	}
	if q := NewPresence(0); q.grace != DefaultPresenceGrace {
		t.Errorf("grace 0: %v, want the default", q.grace)
	}
}
