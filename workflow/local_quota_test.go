package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// boundedKV creates a localStorage test bucket bounded to maxBytes (the
// pool's A2E_LOCAL is bounded by E2A_KV_MAX_BYTES; no TTL).
func (n *natsEnv) boundedKV(t testing.TB, name string, maxBytes int64) jetstream.KeyValue {
	kv, err := n.js.CreateKeyValue(tctx(t), jetstream.KeyValueConfig{Bucket: name, Storage: jetstream.MemoryStorage, MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// storeLocal stores a JSON string of size bytes under key for principal.
func storeLocal(t testing.TB, s *Stores, principal, key string, size int) *Error {
	t.Helper()
	return storeIn(t, s, StorageLocal, principal, key, size)
}

// refusedPastQuota stores 10 KiB for principal "greedy" (key a) in
// storage kind, then checks that 10 KiB more (key b) are refused by its
// quota of quota bytes: not retryable, without NATS internals.
func refusedPastQuota(t *testing.T, s *Stores, kind string, quota int64) {
	t.Helper()
	if we := storeIn(t, s, kind, "greedy", "a", 10<<10); we != nil {
		t.Fatalf("first 10 KiB: %v", we)
	}
	we := storeIn(t, s, kind, "greedy", "b", 10<<10)
	if we == nil {
		t.Fatalf("greedy stored 20 KiB past its %d B quota", quota)
	}
	if we.Type != ExecutionError || we.Retryable || !strings.Contains(we.Message, kind+" quota") ||
		!strings.Contains(we.Message, fmt.Sprint(quota)) || we.Details["limit"] != kind+"Quota" {
		t.Errorf("over quota: %+v", we)
	}
	if strings.Contains(we.Message, "nats") {
		t.Errorf("NATS internals in %q", we.Message)
	}
}

// storeIn stores size bytes under key for principal (request id "r") in
// storage kind, and returns its A2E error.
func storeIn(t testing.TB, s *Stores, kind, principal, key string, size int) *Error {
	t.Helper()
	_, err := s.Store(tctx(t), StoreScope{Principal: principal, RequestID: "r"}, kind, key, bytes.Repeat([]byte("x"), size))
	if err == nil {
		return nil
	}
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("Store %s %s: %T %v, not an *Error", principal, key, err, err)
	}
	return we
}

// TestLocalStorageQuotaPerPrincipal: one principal storing into
// localStorage (A2E_LOCAL: one bucket bound shared by all, no TTL) is
// refused past its quota (by default a quarter of the bucket), so it cannot
// fill the bucket and deny everyone else's StoreData; an overwrite counts
// only its difference, and a smaller value frees.
func TestLocalStorageQuotaPerPrincipal(t *testing.T) {
	n := startNATS(t)
	kv := n.boundedKV(t, "A2E_LOCAL", 64<<10)
	s := &Stores{Local: kv} // quota: a quarter of 64 KiB
	refusedPastQuota(t, s, StorageLocal, 16<<10)
	// an overwrite counts its difference only
	if we := storeLocal(t, s, "greedy", "a", 12<<10); we != nil {
		t.Fatalf("overwrite 10 → 12 KiB: %v", we)
	}
	// a smaller value frees
	if we := storeLocal(t, s, "greedy", "a", 2); we != nil {
		t.Fatalf("overwrite 12 KiB → 2 B: %v", we)
	}
	if we := storeLocal(t, s, "greedy", "b", 10<<10); we != nil {
		t.Fatalf("10 KiB after freeing: %v", we)
	}
	// the others are untouched
	for _, p := range []string{"p1", "p2"} {
		if we := storeLocal(t, s, p, "a", 12<<10); we != nil {
			t.Fatalf("%s: %v", p, we)
		}
	}
	// deleting frees
	if err := s.DeleteLocal(tctx(t), "greedy", "b"); err != nil {
		t.Fatal(err)
	}
	if we := storeLocal(t, s, "greedy", "c", 12<<10); we != nil {
		t.Fatalf("12 KiB after deleting: %v", we)
	}
	if err := s.DeleteLocal(tctx(t), "greedy", "b"); err != nil {
		t.Fatalf("deleting a key not there: %v", err)
	}
}

// TestLocalStorageQuotaConcurrentWorkers: two workers (two Stores on one
// bucket) storing for the same principal at once admit exactly what the
// quota holds, no more.
func TestLocalStorageQuotaConcurrentWorkers(t *testing.T) {
	n := startNATS(t)
	kv := n.boundedKV(t, "A2E_LOCAL", 1<<20)
	const quota, size, tries = 8 << 10, 1000, 24
	w1, w2 := &Stores{Local: kv, LocalQuota: quota}, &Stores{Local: kv, LocalQuota: quota}
	fit := int(quota / localCharge("p.k00", size))
	if stored, refused := storeAtOnce(t, w1, w2, StorageLocal, tries, size); stored != fit || refused != tries-fit {
		t.Errorf("stored %d, refused %d; the quota holds %d", stored, refused, fit)
	}
	// overwrites of one key at once, on both workers, each counted as its
	// difference: the count ends equal to what the keys hold
	var wg sync.WaitGroup
	for i := range 12 {
		w := w1
		if i%2 == 1 {
			w = w2
		}
		wg.Go(func() {
			if we := storeLocal(t, w, "q", "same", 100*i); we != nil {
				t.Errorf("overwrite %d: %v", i, we)
			}
		})
	}
	wg.Wait()
	keys, err := kv.ListKeys(tctx(t), jetstream.MetaOnly())
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int64{}
	for k := range keys.Keys() {
		if p, _, _ := strings.Cut(k, "."); p == "p" || p == "q" {
			e, err := kv.Get(tctx(t), k)
			if err != nil {
				t.Fatal(err)
			}
			held[p] += localCharge(k, len(e.Value()))
		}
	}
	for _, p := range []string{"p", "q"} {
		e, err := kv.Get(tctx(t), usageKey(p))
		if err != nil || string(e.Value()) != fmt.Sprint(held[p]) {
			t.Errorf("%s: usage %s (%v); the keys hold %d", p, e.Value(), err, held[p])
		}
	}
}

// TestLocalStorageFullBucket: a bucket the principals filled together
// (each within its quota) refuses StoreData with an error that says so,
// without NATS internals, not retryable: nothing frees A2E_LOCAL on its
// own (no TTL).
func TestLocalStorageFullBucket(t *testing.T) {
	n := startNATS(t)
	kv := n.boundedKV(t, "A2E_LOCAL", 64<<10)
	s := &Stores{Local: kv, LocalQuota: -1}
	var we *Error
	for i := range 20 {
		if we = storeLocal(t, s, fmt.Sprintf("p%d", i), "k", 8<<10); we != nil {
			break
		}
	}
	if we == nil {
		t.Fatal("160 KiB stored in a 64 KiB bucket")
	}
	if we.Type != ExecutionError || we.Retryable || !strings.Contains(we.Message, "full") {
		t.Errorf("full bucket: %+v", we)
	}
	for _, internal := range []string{"nats", "10077", "err_code", "API error"} {
		if strings.Contains(we.Message, internal) {
			t.Errorf("%q in %q", internal, we.Message)
		}
	}
	// with the quota counted (a quarter of the bucket), the same
	counted := &Stores{Local: kv}
	for i := range 16 {
		if we = storeLocal(t, counted, "late", fmt.Sprintf("k%d", i), 1<<10); we != nil {
			break
		}
	}
	if we == nil || we.Retryable || we.Details["limit"] != "storageFull" {
		t.Errorf("full bucket, quota counted: %+v", we)
	}
}

// TestStoreDataOverQuotaFails: through the executor, StoreData over the
// quota (localStorage's, sessionStorage's) fails its operation with the
// quota's error, not retryable.
func TestStoreDataOverQuotaFails(t *testing.T) {
	n := startNATS(t)
	stores := &Stores{Local: n.boundedKV(t, "A2E_LOCAL", 1<<20), LocalQuota: 50,
		Session: n.sessionKV(t, 1<<20, time.Hour), SessionQuota: 50}
	en := newEnv(t, func(o *Options) { o.Storage = stores })
	for _, kind := range []string{StorageLocal, StorageSession} {
		out, _ := en.run(t, lines(
			op("get", `{"ApiCall":{"method":"GET","url":"https://api.example.com/data","outputPath":"/workflow/d"}}`),
			op("keep", `{"StoreData":{"inputPath":"/workflow/d","storage":"`+kind+`","key":"results/latest"}}`),
			begin("get", "keep")))
		if out.Status != StatusFailed || out.Error == nil || out.Error.OperationID != "keep" || out.Error.Retryable ||
			out.Error.Details["limit"] != kind+"Quota" || out.Error.Code() != "execution_error" {
			t.Fatalf("%s: %s %+v", kind, out.Status, out.Error)
		}
	}
}

// storeAtOnce stores tries values of size bytes for principal "p" (keys
// k00, k01, …) in storage kind at once, half on w1 and half on w2 (two
// workers), and counts those stored and those refused by the quota.
func storeAtOnce(t *testing.T, w1, w2 *Stores, kind string, tries, size int) (stored, refused int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range tries {
		w := w1
		if i%2 == 1 {
			w = w2
		}
		wg.Go(func() {
			we := storeIn(t, w, kind, "p", fmt.Sprintf("k%02d", i), size)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case we == nil:
				stored++
			case we.Details["limit"] == kind+"Quota":
				refused++
			default:
				t.Errorf("k%02d: %v", i, we)
			}
		})
	}
	wg.Wait()
	return stored, refused
}
