package workflow

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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

// TestQuotaResolutionHoldsNoOneBack: the first store of a worker reads the
// bucket's status (its bound, for the default quota). With the server
// unreachable, that read waits for its caller's context; another store,
// with a shorter context, must fail at the end of its own, not wait for
// the first (the resolution held a mutex across the read: the second then
// waited for the first's context).
func TestQuotaResolutionHoldsNoOneBack(t *testing.T) {
	n := startNATS(t)
	s := &Stores{Local: n.boundedKV(t, "A2E_LOCAL", 64<<10)}
	disconnected := make(chan struct{})
	n.nc.SetDisconnectErrHandler(func(*nats.Conn, error) { close(disconnected) })
	// the connection reconnects: its requests wait, buffered (before it
	// sees the server gone, they could be written to the dead socket,
	// blocking for a minute)
	n.srv.Shutdown()
	<-disconnected
	// a deadline, else JetStream's 5 s default
	first, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	firstDone := make(chan error, 1)
	go func() {
		_, err := s.Store(first, StoreScope{Principal: "a", RequestID: "r"}, StorageLocal, "k", []byte(`1`))
		firstDone <- err
	}()
	for b, _ := n.nc.Buffered(); b == 0; b, _ = n.nc.Buffered() { // until the first store's status request is out, waiting
		runtime.Gosched()
	}
	ctx, cancelSecond := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelSecond()
	secondDone := make(chan error, 1)
	go func() {
		_, err := s.Store(ctx, StoreScope{Principal: "b", RequestID: "r"}, StorageLocal, "k", []byte(`1`))
		secondDone <- err
	}()
	select {
	case err := <-secondDone:
		var we *Error
		if !errors.As(err, &we) || !we.Retryable {
			t.Errorf("second store: %v, want a retryable store failure", err)
		}
	case err := <-firstDone:
		t.Fatalf("the first store ended first: %v", err)
	case <-time.After(10 * time.Second): // a bound on failure, not a synchronisation
		t.Fatal("the second store (200 ms context) still waits 10 s later, behind the first")
	}
}
