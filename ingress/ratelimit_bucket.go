package ingress

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
)

// RateLimitBucket is the JetStream KV bucket of the rate limiter, defined
// in streams with the other buckets.
const RateLimitBucket = streams.RateLimitBucket

// RateLimitBucketTTL is the bucket's MaxAge (streams' default): a key
// expires this long after its last write. It must exceed the longest window
// (a day), or an idle principal's day count would be forgotten before the
// day ends.
var RateLimitBucketTTL = streams.DefaultConfig().RateLimitTTL

// minRateLimitTTL is the shortest bucket TTL that can hold the day window.
const minRateLimitTTL = 24 * time.Hour

// BucketOption configures EnsureRateLimitBucket.
type BucketOption func(*jetstream.KeyValueConfig)

// WithBucketReplicas sets the bucket's replicas (1 embedded, 3 in
// production).
func WithBucketReplicas(n int) BucketOption {
	return func(c *jetstream.KeyValueConfig) { c.Replicas = n }
}

// WithBucketStorage sets the bucket's storage (default memory: counters are
// short-lived and the limiter fails open, so losing them on a full cluster
// restart is acceptable and memory is faster).
func WithBucketStorage(s jetstream.StorageType) BucketOption {
	return func(c *jetstream.KeyValueConfig) { c.Storage = s }
}

// RateLimitBucketConfig returns the bucket's configuration: streams'
// definition (one revision, RateLimitTTL), values bounded to 256 bytes,
// memory storage and one replica unless the options say otherwise. It is
// used only when no one provisioned the bucket (streams.Apply normally
// does).
func RateLimitBucketConfig(opts ...BucketOption) jetstream.KeyValueConfig {
	c, _ := streams.DefaultConfig().KeyValueConfig(RateLimitBucket) // a valid, constant name
	c.MaxValueSize = 256
	c.Storage = jetstream.MemoryStorage
	c.Replicas = 1
	for _, o := range opts {
		if o != nil { // a nil option is none
			o(&c)
		}
	}
	return c
}

// EnsureRateLimitBucket returns the rate limit bucket, creating it if it
// does not exist. An existing bucket is used as is (whoever provisioned it
// owns its storage and replicas) provided its TTL is 0 or at least 24 h;
// otherwise it returns the bucket AND an error wrapping ErrRateLimitBucket:
// the bucket works, but a principal idle for longer than its TTL loses its
// day count (the caller may log that and go on, or refuse to start).
// It is safe to call from several replicas at once.
func EnsureRateLimitBucket(ctx context.Context, js jetstream.JetStream, opts ...BucketOption) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, RateLimitBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, RateLimitBucketConfig(opts...))
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, RateLimitBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ingress: rate limit bucket: %w", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("ingress: rate limit bucket status: %w", err)
	}
	if ttl := st.TTL(); ttl != 0 && ttl < minRateLimitTTL {
		return kv, fmt.Errorf("%w: %s has TTL %v; it must be 0 or at least %v to hold the day window", ErrRateLimitBucket, RateLimitBucket, ttl, minRateLimitTTL)
	}
	return kv, nil
}
