package workflow

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Cache TTLs per operation type (spec §11); types not listed are never cached.
var CacheTTL = map[string]time.Duration{
	OpApiCall:       5 * time.Minute,
	OpFilterData:    time.Minute,
	OpTransformData: time.Minute,
}

// Cache stores operation results. Keys are hex SHA-256 hashes of the
// operation type and its resolved configuration (for ApiCall: principal,
// method, resolved URL, headers with credential ids — never values — and
// body; for FilterData and TransformData: the principal, the
// configuration and the input value). A tag groups entries that a write
// invalidates: every cached GET of a principal to one host carries the
// same tag, and a POST, PUT, PATCH or DELETE by that principal to that
// host invalidates them.
type Cache interface {
	Get(ctx context.Context, key string) (value any, ok bool, err error)
	Set(ctx context.Context, key, tag string, value any, ttl time.Duration) error
	// Invalidate removes every entry carrying tag.
	Invalidate(ctx context.Context, tag string) error
}

func hashKey(parts ...any) string {
	return hashValue(normalize(parts))
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:12])
}

// MemoryCache is a per-process Cache: each worker process has its own, so
// a hit happens only when the same process ran the same configuration
// before. Use [KVCache] to share entries between workers.
type MemoryCache struct {
	Clock Clock
	// MaxEntries bounds the cache (default 10,000); the entries set longest
	// ago are dropped first.
	MaxEntries int

	mu      sync.Mutex
	entries map[string]*memEntry
	tags    map[string]map[string]bool
	order   list.List // the live keys, set longest ago first
}

type memEntry struct {
	value   any
	tag     string
	expires time.Time
	at      *list.Element // the key in order
}

// NewMemoryCache returns an empty per-process cache.
func NewMemoryCache(clock Clock) *MemoryCache {
	if clock == nil {
		clock = RealClock{}
	}
	return &MemoryCache{Clock: clock, MaxEntries: 10000, entries: map[string]*memEntry{}, tags: map[string]map[string]bool{}}
}

// Get implements Cache.
func (c *MemoryCache) Get(_ context.Context, key string) (any, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false, nil
	}
	if !c.Clock.Now().Before(e.expires) {
		c.remove(key)
		return nil, false, nil
	}
	return e.value, true, nil
}

func (c *MemoryCache) remove(key string) {
	e, ok := c.entries[key]
	if !ok {
		return
	}
	delete(c.entries, key)
	c.order.Remove(e.at)
	if t := c.tags[e.tag]; t != nil {
		delete(t, key)
		if len(t) == 0 {
			delete(c.tags, e.tag)
		}
	}
}

// Set implements Cache.
func (c *MemoryCache) Set(_ context.Context, key, tag string, value any, ttl time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(key)
	c.entries[key] = &memEntry{value: value, tag: tag, expires: c.Clock.Now().Add(ttl), at: c.order.PushBack(key)}
	if c.tags[tag] == nil {
		c.tags[tag] = map[string]bool{}
	}
	c.tags[tag][key] = true
	max := c.MaxEntries
	if max <= 0 {
		max = 10000
	}
	for len(c.entries) > max {
		c.remove(c.order.Front().Value.(string))
	}
	return nil
}

// Invalidate implements Cache.
func (c *MemoryCache) Invalidate(_ context.Context, tag string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.tags[tag] {
		c.remove(k)
	}
	return nil
}

// KVCache is a Cache on a JetStream key-value bucket shared by every
// worker. An entry is stored under "e.<key>" and recording its own expiry
// (per-type TTLs in one bucket); a marker "t.<tag hash>.<key>" lets
// Invalidate find the entries of a tag. The bucket's MaxAge (at least the
// longest TTL, 5 minutes) collects old entries. Values are operation
// results, which never hold credential values (responses are redacted).
// A lookup is one direct get; only invalidation lists keys.
type KVCache struct {
	KV    jetstream.KeyValue
	Clock Clock
}

type kvEntry struct {
	Expires int64           `json:"exp"`
	Value   json.RawMessage `json:"v"`
}

func (c *KVCache) clock() Clock {
	if c.Clock == nil {
		return RealClock{}
	}
	return c.Clock
}

// Get implements Cache.
func (c *KVCache) Get(ctx context.Context, key string) (any, bool, error) {
	e, err := c.KV.Get(ctx, "e."+key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var ent kvEntry
	if err := json.Unmarshal(e.Value(), &ent); err != nil {
		return nil, false, nil
	}
	if c.clock().Now().UnixNano() >= ent.Expires {
		return nil, false, nil
	}
	v, err := decodeJSON(ent.Value)
	if err != nil {
		return nil, false, nil
	}
	return v, true, nil
}

// Set implements Cache.
func (c *KVCache) Set(ctx context.Context, key, tag string, value any, ttl time.Duration) error {
	b, err := json.Marshal(value)
	if err != nil {
		return err
	}
	ent, _ := json.Marshal(kvEntry{Expires: c.clock().Now().Add(ttl).UnixNano(), Value: b})
	if _, err := c.KV.Put(ctx, "t."+shortHash(tag)+"."+key, nil); err != nil {
		return err
	}
	_, err = c.KV.Put(ctx, "e."+key, ent)
	return err
}

// Invalidate implements Cache.
func (c *KVCache) Invalidate(ctx context.Context, tag string) error {
	prefix := "t." + shortHash(tag) + "."
	keys, err := c.KV.ListKeysFiltered(ctx, prefix+"*")
	if err != nil {
		return err
	}
	var all []string
	for k := range keys.Keys() {
		all = append(all, k)
	}
	_ = keys.Stop()
	for _, k := range all {
		for _, kk := range []string{"e." + k[len(prefix):], k} {
			if err := c.KV.Purge(ctx, kk); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				return err
			}
		}
	}
	return nil
}
