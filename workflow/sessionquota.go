package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The sessionStorage quota (Stores.SessionQuota).
//
// A2E_SESSION's keys expire by the bucket's TTL without any write, so a
// count kept like localStorage's (usage up on a store, down on a delete)
// would only grow: nothing tells the pool a key is gone. Keeping each
// key's size and expiry in the principal's usage record would follow the
// keys exactly, but the record grows with the principal's keys (thousands
// of small values: a record past the bucket's value bound). Listing the
// principal's keys at each store reads up to its quota every time.
//
// So the quota bounds what a principal WRITES within the TTL, which bounds
// what it can hold (every key it holds was written within the TTL): its
// usage record ("=usage.<principal>", in A2E_SESSION) counts the bytes
// written per window of TTL/sessionWindows, each write in full (an
// overwrite counts again: the old value's bytes stay counted until their
// window ages out). A window counts until a whole window past its end +
// TTL, when every key written in it has expired; the record is pruned of
// older windows when read, so it holds at most sessionWindows+2 numbers.
// It is updated by compare-and-set, like localStorage's: workers storing
// for one principal at once count each byte once; an increase is reserved
// before the write and given back to its window if the write fails. The
// record is rewritten on each store, so it expires (TTL after its last
// write) no sooner than the keys it counted, but for the time that key's
// Put took after its reservation. A bucket with no TTL keeps one window forever:
// the count of every byte written, as nothing expires.
//
// The bound is conservative: a principal that overwrites one key N times
// counts N values for up to TTL + 2 windows, i.e. the quota is "bytes
// written per day" at the pool's 24 h TTL.
const sessionWindows = 4

// sessionUsage is a principal's usage record: bytes written per window
// (the window's index: Unix nanoseconds / window length).
type sessionUsage map[int64]int64

// sessionLimitsOf resolves SessionQuota (negative: none) and the bucket's TTL.
func (s *Stores) sessionLimitsOf(ctx context.Context) (bucketLimits, error) {
	l, err := resolveBucket(ctx, s.Session, &s.sessionLimits)
	if err == nil && s.SessionQuota != 0 {
		l.quota = s.SessionQuota
	}
	return l, err
}

// putSession writes a sessionStorage value within its principal's quota.
func (s *Stores) putSession(ctx context.Context, token, k string, data []byte) error {
	l, err := s.sessionLimitsOf(ctx)
	if err != nil {
		return err
	}
	if l.quota < 0 {
		_, err := s.Session.Put(ctx, k, data)
		return err
	}
	n := localCharge(k, len(data))
	w, err := s.chargeSession(ctx, token, l, -1, n)
	if err != nil {
		return err
	}
	if _, err := s.Session.Put(ctx, k, data); err != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = s.chargeSession(ctx, token, l, w, -n)
		return err
	}
	return nil
}

// chargeSession adds n bytes to a principal's window w (-1: the current
// one, returned), refusing an increase that takes the windows still
// counted past l.quota.
func (s *Stores) chargeSession(ctx context.Context, token string, l bucketLimits, w, n int64) (int64, error) {
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	uk := usageKey(token)
	for range casAttempts {
		var u sessionUsage
		v, rev, err := getAt(ctx, s.Session, uk)
		if err != nil {
			return 0, err
		}
		if rev != 0 {
			if err := json.Unmarshal(v, &u); err != nil {
				return 0, fmt.Errorf("usage key %s: %w", uk, err)
			}
		}
		cur, used := u.prune(now(), l.ttl)
		if w < 0 {
			w = cur
		}
		if n > 0 && used+n > l.quota {
			return 0, quotaError(StorageSession, l.quota, used, n, l.ttl)
		}
		if _, ok := u[w]; ok || n > 0 { // a window pruned meanwhile has nothing to give back
			u[w] = max(u[w]+n, 0)
		}
		v, _ = json.Marshal(u)
		if err := putAt(ctx, s.Session, uk, v, rev); err == nil || !casConflict(err) {
			return w, err
		}
	}
	return 0, errStoreContended
}

// prune drops the windows whose keys have all expired at now (bucket TTL
// ttl) and returns the current window and the bytes still counted. u nil
// is made.
func (u *sessionUsage) prune(now time.Time, ttl time.Duration) (cur, used int64) {
	if *u == nil {
		*u = sessionUsage{}
	}
	if ttl <= 0 { // nothing expires: one window
		for _, b := range *u {
			used += b
		}
		return 0, used
	}
	win := max(int64(ttl)/sessionWindows, 1)
	cur = now.UnixNano() / win
	for w, b := range *u {
		// keys written in w expire by (w+1)*win + ttl; one window more
		// covers a write finishing after its reservation
		if (w+2)*win+int64(ttl) <= now.UnixNano() {
			delete(*u, w)
			continue
		}
		used += b
	}
	return cur, used
}
