package workflow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultLocalQuotaShare divides the localStorage bucket's MaxBytes into
// the default per-principal quota (Stores.LocalQuota 0): a quarter, so
// that no one principal can fill the bucket.
const DefaultLocalQuotaShare = 4

// localKeyOverhead is charged per key on top of its name and value: more
// than the server keeps per message besides them (sequence, timestamp,
// checksum, lengths), so that many small values cannot pass the quota's
// bytes in the bucket.
const localKeyOverhead = 64

// casAttempts bounds the compare-and-set rounds of one store: each round
// lost is another write of the same principal (or key) that won.
const casAttempts = 64

// jsErrStoreFailed is the JetStream error code of a write the stream
// refused to store (its description says why: "maximum bytes exceeded").
const jsErrStoreFailed = 10077

// localCharge is what a value of n bytes under KV key k counts against
// its principal's quota.
func localCharge(k string, n int) int64 { return int64(len(k)+n) + localKeyOverhead }

// usageKey is the KV key of a principal's bytes in use: its first token
// ("=usage") is no principal's (scopeToken never writes "="), so no
// StoreData key can be it.
func usageKey(token string) string { return "=usage." + token }

// bucketLimits is what a bucket's status gives a quota: the bound
// share and the keys' TTL (MaxAge; 0: none).
type bucketLimits struct {
	quota int64 // MaxBytes / DefaultLocalQuotaShare; -1: the bucket is unbounded
	ttl   time.Duration
}

// resolveBucket reads kv's status once (cached in res). It holds no lock
// across the Status call: workers resolving at once each ask the server
// (the answers are the same), so that one caller waiting on a slow server
// does not hold up another whose context ends sooner, and a failed call
// caches nothing.
func resolveBucket(ctx context.Context, kv jetstream.KeyValue, res *atomic.Pointer[bucketLimits]) (bucketLimits, error) {
	if l := res.Load(); l != nil {
		return *l, nil
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return bucketLimits{}, err
	}
	l := bucketLimits{quota: -1, ttl: st.TTL()}
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo().Config.MaxBytes > 0 {
		l.quota = max(bs.StreamInfo().Config.MaxBytes/DefaultLocalQuotaShare, 1)
	}
	res.Store(&l)
	return l, nil
}

// localQuota resolves LocalQuota: negative is none.
func (s *Stores) localQuota(ctx context.Context) (int64, error) {
	if s.LocalQuota != 0 {
		return s.LocalQuota, nil
	}
	l, err := resolveBucket(ctx, s.Local, &s.localLimits)
	return l.quota, err
}

// putLocal writes a localStorage value within its principal's quota. The
// usage key (usageKey) is updated by compare-and-set, and so is the value
// (created, or updated at the revision whose size was counted), so that
// workers storing for one principal at once count every byte once: an
// increase is reserved before the value is written (given back if the
// write fails), a decrease released after. A worker dying between the two
// leaves the count too high, never too low.
func (s *Stores) putLocal(ctx context.Context, token, k string, data []byte) error {
	quota, err := s.localQuota(ctx)
	if err != nil {
		return err
	}
	if quota < 0 {
		_, err := s.Local.Put(ctx, k, data)
		return err
	}
	for range casAttempts {
		old, rev, err := s.localCurrent(ctx, k)
		if err != nil {
			return err
		}
		delta := localCharge(k, len(data)) - old
		if delta > 0 {
			if err := s.charge(ctx, token, delta, quota); err != nil {
				return err
			}
		}
		if err := putAt(ctx, s.Local, k, data, rev); err != nil {
			if delta > 0 {
				s.release(ctx, token, delta)
			}
			if casConflict(err) {
				continue
			}
			return err
		}
		if delta < 0 {
			s.release(ctx, token, -delta)
		}
		return nil
	}
	return errStoreContended
}

// DeleteLocal deletes a principal's localStorage key, freeing its bytes
// of the principal's quota; a key that is not there is no error. (A2E has
// no operation that deletes; an operator deleting keys otherwise, e.g. with
// `nats kv del`, leaves their bytes counted.)
func (s *Stores) DeleteLocal(ctx context.Context, principal, key string) error {
	if s.Local == nil {
		return permissionError("storage %s is not enabled on this server", StorageLocal)
	}
	token := scopeToken(principal)
	k := token + "." + key
	quota, err := s.localQuota(ctx)
	if err != nil {
		return storeError(StorageLocal, key, err)
	}
	for range casAttempts {
		old, rev, err := s.localCurrent(ctx, k)
		if err != nil || rev == 0 {
			return storeError(StorageLocal, key, err)
		}
		if err := s.Local.Delete(ctx, k, jetstream.LastRevision(rev)); err != nil {
			if casConflict(err) {
				continue
			}
			return storeError(StorageLocal, key, err)
		}
		if quota >= 0 {
			s.release(ctx, token, old)
		}
		return nil
	}
	return storeError(StorageLocal, key, errStoreContended)
}

// localCurrent returns the charge and revision of k's value (0, 0 when
// there is none).
func (s *Stores) localCurrent(ctx context.Context, k string) (int64, uint64, error) {
	v, rev, err := getAt(ctx, s.Local, k)
	if err != nil || rev == 0 {
		return 0, 0, err
	}
	return localCharge(k, len(v)), rev, nil
}

// charge adds delta to a principal's usage, refusing an increase past
// quota.
func (s *Stores) charge(ctx context.Context, token string, delta, quota int64) error {
	uk := usageKey(token)
	for range casAttempts {
		var used int64
		v, rev, err := getAt(ctx, s.Local, uk)
		if err != nil {
			return err
		}
		if rev != 0 {
			if used, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return fmt.Errorf("usage key %s: %w", uk, err)
			}
		}
		n := max(used+delta, 0)
		if delta > 0 && n > quota {
			return quotaError(StorageLocal, quota, used, delta, 0)
		}
		v = []byte(strconv.FormatInt(n, 10))
		if err := putAt(ctx, s.Local, uk, v, rev); err == nil || !casConflict(err) {
			return err
		}
	}
	return errStoreContended
}

// getAt reads k in kv: its value and revision (0 when k holds none).
func getAt(ctx context.Context, kv jetstream.KeyValue, k string) ([]byte, uint64, error) {
	e, err := kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return e.Value(), e.Revision(), nil
}

// putAt writes k in kv if its revision is still rev (0: k holds no value).
func putAt(ctx context.Context, kv jetstream.KeyValue, k string, v []byte, rev uint64) (err error) {
	if rev == 0 {
		_, err = kv.Create(ctx, k, v)
	} else {
		_, err = kv.Update(ctx, k, v, rev)
	}
	return err
}

// release gives back bytes, even when ctx has ended (the execution's
// time): a release lost leaves the count too high.
func (s *Stores) release(ctx context.Context, token string, n int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = s.charge(ctx, token, -n, 0)
}

// errStoreContended: every compare-and-set round of a store was lost.
var errStoreContended = errors.New("too many concurrent writes")

func casConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// quotaError is the A2E error of a store past its principal's quota of
// kind (localStorage; sessionStorage, counted per ttl).
func quotaError(kind string, quota, used, delta int64, ttl time.Duration) *Error {
	msg := fmt.Sprintf("a principal keeps at most %d bytes; this one keeps %d", quota, used)
	hint := "Overwrite localStorage keys no longer needed with smaller values (e.g. null), or ask the operator for a larger quota"
	if kind == StorageSession {
		msg = fmt.Sprintf("a principal writes at most %d bytes in %s (the time its keys are kept); this one wrote %d", quota, ttl, used)
		hint = "Store less in sessionStorage, or run the workflow again once earlier sessions have expired, or ask the operator for a larger quota"
	}
	e := newError(ExecutionError, "%s quota exceeded: %s and the value needs %d more", kind, msg, delta)
	e.Details = map[string]any{"limit": kind + "Quota", "quotaBytes": quota, "usedBytes": used, "neededBytes": delta}
	e.Suggestions = []string{hint}
	return e
}

// storeError is the A2E error of a failed KV store. A bucket full (its
// MaxBytes, shared by every principal, used up) is said so, without the
// server's words; retryable for sessionStorage only, whose keys expire
// (its bucket's TTL): nothing in localStorage expires, and A2E cannot
// delete, so running the workflow again fails the same until an operator
// frees space or raises the bound. Other failures (the server unreachable,
// a timeout) are transient: retryable.
func storeError(kind, key string, err error) error {
	var we *Error
	if err == nil || errors.As(err, &we) {
		return err
	}
	var ae *jetstream.APIError
	if errors.As(err, &ae) && ae.ErrorCode == jsErrStoreFailed && strings.Contains(ae.Description, "maximum bytes") {
		e := newError(ExecutionError, "storing %s key %q failed: %s is full (its size bound, shared by every principal, is used up)", kind, key, kind)
		e.Details = map[string]any{"limit": "storageFull", "storage": kind}
		e.Retryable = kind == StorageSession
		e.Suggestions = []string{"Ask the operator to free space or raise the bucket's bound (E2A_KV_MAX_BYTES)"}
		return e
	}
	e := newError(ExecutionError, "storing %s key %q failed: %v", kind, key, err)
	e.Retryable = true
	return e
}
