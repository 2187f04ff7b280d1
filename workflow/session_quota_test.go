package workflow

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// sessionKV creates a sessionStorage test bucket like the pool's
// A2E_SESSION: bounded to maxBytes, its keys kept ttl.
func (n *natsEnv) sessionKV(t testing.TB, maxBytes int64, ttl time.Duration) jetstream.KeyValue {
	kv, err := n.js.CreateKeyValue(tctx(t), jetstream.KeyValueConfig{Bucket: "A2E_SESSION", Storage: jetstream.MemoryStorage, MaxBytes: maxBytes, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// testClock is a clock the test moves (Stores.now): the sessionStorage
// quota's windows age by it, not by waiting.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// TestSessionStorageQuotaPerPrincipal: one principal writing to
// sessionStorage (A2E_SESSION: one bound shared by all, keys expiring
// after its TTL) is refused past its quota (by default a quarter of the
// bucket) for as long as what it wrote may still be there, and again
// admitted once all of it has expired: the count does not drift up as keys
// expire without a write. The other principals are untouched.
func TestSessionStorageQuotaPerPrincipal(t *testing.T) {
	const ttl = 24 * time.Hour
	n := startNATS(t)
	clock := &testClock{t: time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)}
	s := &Stores{Session: n.sessionKV(t, 64<<10, ttl), now: clock.now} // quota: a quarter of 64 KiB
	refusedPastQuota(t, s, StorageSession, 16<<10)
	for _, p := range []string{"p1", "p2"} {
		if we := storeIn(t, s, StorageSession, p, "a", 12<<10); we != nil {
			t.Fatalf("%s: %v", p, we)
		}
	}
	// while the first 10 KiB may still be kept, the quota holds
	clock.add(ttl)
	if we := storeIn(t, s, StorageSession, "greedy", "b", 10<<10); we == nil || we.Details["limit"] != "sessionStorageQuota" {
		t.Fatalf("10 KiB more a TTL later, the first write maybe not yet expired: %+v", we)
	}
	// once it has expired (TTL + the window it was written in + one), it
	// counts no more
	clock.add(ttl / sessionWindows * 2)
	if we := storeIn(t, s, StorageSession, "greedy", "b", 10<<10); we != nil {
		t.Fatalf("10 KiB after the first expired: %v", we)
	}
}

// TestSessionStorageQuotaConcurrentWorkers: two workers (Stores on one
// bucket) storing for one principal at once admit exactly what the quota
// holds: the usage record is updated by compare-and-set.
func TestSessionStorageQuotaConcurrentWorkers(t *testing.T) {
	n := startNATS(t)
	kv := n.sessionKV(t, 1<<20, time.Hour)
	const quota, size, tries = 8 << 10, 1000, 24
	w1, w2 := &Stores{Session: kv, SessionQuota: quota}, &Stores{Session: kv, SessionQuota: quota}
	fit := int(quota / localCharge("p.r.k00", size))
	if stored, refused := storeAtOnce(t, w1, w2, StorageSession, tries, size); stored != fit || refused != tries-fit {
		t.Errorf("stored %d, refused %d; the quota holds %d", stored, refused, fit)
	}
}
