package streams

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream and bucket names.
const (
	// RequestsStream holds every request, under e2a.req.<agent>.<id>.
	RequestsStream = "E2A_REQUESTS"
	// ResponsesStream holds the response frames, under e2a.resp.<id>, and
	// republishes them to e2a.live.<id>.
	ResponsesStream = "E2A_RESPONSES"
	// ControlStream holds the last control message of each request, under
	// e2a.ctl.<id>.
	ControlStream = "E2A_CONTROL"
	// ArchiveStream keeps E2A_AUDIT's messages compressed, in batches
	// (package archive), on the one subject e2a.archive.batches.
	ArchiveStream = "E2A_ARCHIVE"
	// AuditStream sources RequestsStream and ResponsesStream into a bounded
	// set of partitions, for long retention.
	AuditStream = "E2A_AUDIT"

	// TasksBucket maps tasks and contexts to request ids and state.
	TasksBucket = "E2A_TASKS"
	// RateLimitBucket holds rate limiter state; keys expire after
	// Config.RateLimitTTL.
	RateLimitBucket = "E2A_RATELIMIT"
	// WorkflowLocalBucket, WorkflowSessionBucket and WorkflowCacheBucket
	// hold the A2E workflow executor's StoreData localStorage (no TTL),
	// sessionStorage (24 h) and its operation cache shared by every
	// workflow worker (10 min, above the longest cache TTL of 5 min). The
	// workflow pool creates or updates them at start-up.
	WorkflowLocalBucket   = "A2E_LOCAL"
	WorkflowSessionBucket = "A2E_SESSION"
	WorkflowCacheBucket   = "A2E_CACHE"
	// BridgeBucket holds the bridges' conversations (package bridge): per
	// pool, principal and conversation, the upstream's task and context ids
	// and the request ids of its turns; keys expire after Config.TasksTTL.
	// The bridge pools create or update it at start-up.
	BridgeBucket = "E2A_BRIDGE"
)

// Buckets are the key-value buckets the pipeline's processes create, each
// bounded by Config.KeyValueMaxBytes.
var Buckets = []string{TasksBucket, RateLimitBucket, WorkflowLocalBucket, WorkflowSessionBucket,
	WorkflowCacheBucket, BridgeBucket, PushBucket}

const (
	// MiB is 1 << 20 bytes.
	MiB = int64(1) << 20
	// GiB is 1 << 30 bytes.
	GiB = int64(1) << 30
	// Unlimited is the value of a size limit without limit.
	Unlimited = int64(-1)
)

// Config sizes every stream and bucket. The zero value is not valid: start
// from DefaultConfig.
type Config struct {
	// Replicas of every stream and bucket: 1 with the embedded server, 3 in
	// production. 1..5.
	Replicas int
	// Storage of every stream and bucket, jetstream.FileStorage or
	// jetstream.MemoryStorage. It cannot be changed on existing streams.
	Storage jetstream.StorageType

	// RequestsMaxAge is how long requests are kept. Default 24h.
	RequestsMaxAge time.Duration
	// RequestsMaxBytes bounds E2A_REQUESTS; when it is full, publishes are
	// refused (DiscardNew), which is the pipeline's backpressure. Unlimited
	// (-1) or > 0. Default 1 GiB.
	RequestsMaxBytes int64
	// Duplicates is the deduplication window of requests, responses and
	// control messages that carry a Nats-Msg-Id (a direct publisher's; a
	// front door's requests and the agents' frames carry none). At most
	// each of their max ages. Default 10m.
	Duplicates time.Duration

	// ResponsesMaxAge is how long frames are kept, hence how long a finished
	// request can be replayed. Production: 1h..72h; keep it short enough that
	// the stream stays well under ~1M live subjects. Default 24h.
	ResponsesMaxAge time.Duration
	// ResponsesMaxBytes bounds E2A_RESPONSES; when it is full, the oldest
	// frames are dropped (DiscardOld: agents never stop writing, the replay
	// window shortens). Unlimited (-1) or > 0. Default 1 GiB.
	ResponsesMaxBytes int64

	// ControlMaxAge is how long a control message (cancel) is kept.
	// Default 24h.
	ControlMaxAge time.Duration
	// ControlMaxBytes bounds E2A_CONTROL (DiscardOld). Unlimited (-1) or
	// > 0. Default 64 MiB.
	ControlMaxBytes int64

	// AuditMaxAge is how long E2A_AUDIT keeps messages; 0 keeps them
	// forever (then AuditMaxBytes alone bounds it). Default 90 days.
	AuditMaxAge time.Duration
	// AuditMaxBytes bounds E2A_AUDIT. When it is full the oldest messages
	// are dropped (DiscardOld): the pipeline goes on and keeps the newest
	// history, and the retention actually held shortens (alert
	// E2AAuditRetentionShort). DiscardNew would instead stall the sourcing,
	// and the hot streams would age out what was never copied. Unlimited
	// (-1) or > 0. Default 2 GiB.
	AuditMaxBytes int64
	// AuditPartitions is the number of partitions of each of the request and
	// response halves of E2A_AUDIT. 1..1024. Default 16. It cannot change
	// once E2A_AUDIT exists: it is in the subject transforms of the audit's
	// sources, and nats-server keys a source's progress by a name built
	// from its transforms, so a source with new transforms would copy
	// everything E2A_REQUESTS and E2A_RESPONSES hold into the append-only
	// audit a second time. Apply refuses the change (ErrDriftNotUpdatable)
	// and leaves E2A_AUDIT as it is; to change it, delete E2A_AUDIT (its
	// history goes with it) and apply again.
	AuditPartitions int

	// ArchiveMaxAge is how long E2A_ARCHIVE keeps its batches (the audit
	// history, compressed; package archive); 0 keeps them forever.
	// Default 90 days.
	ArchiveMaxAge time.Duration
	// ArchiveMaxBytes bounds E2A_ARCHIVE (DiscardOld: the oldest batches go
	// first). Unlimited (-1) or > 0. Default 1 GiB.
	ArchiveMaxBytes int64

	// IndexMaxBytes bounds the console's index stream (KV_E2A_INDEX,
	// package egress/console; DiscardOld: the oldest records go first, so
	// under a rate its age does not hold the console's listing reaches
	// back less far). Unlimited (-1) or > 0. Default 512 MiB.
	IndexMaxBytes int64
	// KeyValueMaxBytes bounds each key-value bucket (KeyValueConfig:
	// E2A_TASKS, E2A_RATELIMIT, E2A_BRIDGE, the workflow's
	// A2E_LOCAL, A2E_SESSION, A2E_CACHE; PushBucketConfig's E2A_PUSH: every
	// one of Buckets). A full bucket refuses
	// new writes (a key-value bucket discards new) until entries expire or
	// are deleted: a continuing turn is answered 503, a StoreData fails
	// retryable, and no other stream is touched. Without it a bucket
	// grows into the space JetStream keeps for the bounded streams, and
	// once the server's max_file_store is used up it refuses writes to
	// every stream. Unlimited (-1) or > 0. Default 256 MiB.
	KeyValueMaxBytes int64

	// RequestsCompression, ResponsesCompression and AuditCompression are
	// the storage compression of E2A_REQUESTS, E2A_RESPONSES and E2A_AUDIT:
	// jetstream.NoCompression or jetstream.S2Compression (nats-server
	// compresses each file-store block when it is full: it reads the closed
	// block back, compresses it and rewrites it, so the cost is per block,
	// and nothing on memory storage). A change applies to an existing
	// stream through Apply (nats-server updates it in place); blocks
	// already written stay as they were. Default: none for all three. S2
	// shrinks the disk a stream uses (the audit's to about a tenth on the
	// demo) but not what its limits count, and costs the server CPU and
	// allocations (in one process: 10-20 % of the requests/s;
	// docs/capacity.md, Bytes).
	RequestsCompression  jetstream.StoreCompression
	ResponsesCompression jetstream.StoreCompression
	AuditCompression     jetstream.StoreCompression

	// TasksHistory is the number of revisions kept per key of E2A_TASKS.
	// 1..64. Default 5.
	TasksHistory uint8
	// TasksTTL is how long a task entry lives after its last update; 0 keeps
	// entries forever. Keep it at least ResponsesMaxAge. Default 72h.
	TasksTTL time.Duration
	// RateLimitTTL is how long an idle rate limiter key lives; it must cover
	// the longest window (a day). Default 25h.
	RateLimitTTL time.Duration
}

// DefaultConfig returns the defaults with one replica on file storage: every
// stream bounded by age and bytes, 5.06 GiB in all (and the console's
// index 512 MiB, each key-value bucket 256 MiB), small enough for the
// embedded server on a laptop (JetStream reserves each stream's MaxBytes on
// every server holding a replica). Set Replicas to 3 for a production
// cluster, and size the byte limits to its volumes (README, "Capacity";
// deploy/k8s/config.yaml).
func DefaultConfig() Config {
	return Config{
		Replicas:          1,
		Storage:           jetstream.FileStorage,
		RequestsMaxAge:    24 * time.Hour,
		RequestsMaxBytes:  1 * GiB,
		Duplicates:        10 * time.Minute,
		ResponsesMaxAge:   24 * time.Hour,
		ResponsesMaxBytes: 1 * GiB,
		ControlMaxAge:     24 * time.Hour,
		ControlMaxBytes:   64 * MiB,
		AuditMaxAge:       90 * 24 * time.Hour,
		AuditMaxBytes:     2 * GiB,
		AuditPartitions:   16,
		AuditCompression:  jetstream.NoCompression,
		ArchiveMaxAge:     90 * 24 * time.Hour,
		ArchiveMaxBytes:   1 * GiB,
		IndexMaxBytes:     512 * MiB,
		KeyValueMaxBytes:  256 * MiB,
		TasksHistory:      5,
		TasksTTL:          72 * time.Hour,
		RateLimitTTL:      25 * time.Hour,
	}
}

// minAge is the smallest max age or window the server accepts.
const minAge = 100 * time.Millisecond

// Validate returns an error wrapping ErrInvalidConfig, listing every field
// out of range, or nil.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		bad("Replicas %d not in 1..5", c.Replicas)
	}
	if c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage {
		bad("Storage %d is neither file nor memory", c.Storage)
	}
	age := func(name string, d time.Duration, zeroOK bool) {
		switch {
		case d == 0 && zeroOK:
		case d < minAge:
			bad("%s %v below %v", name, d, minAge)
		}
	}
	age("RequestsMaxAge", c.RequestsMaxAge, false)
	age("ResponsesMaxAge", c.ResponsesMaxAge, false)
	age("ControlMaxAge", c.ControlMaxAge, false)
	age("AuditMaxAge", c.AuditMaxAge, true)
	age("ArchiveMaxAge", c.ArchiveMaxAge, true)
	age("Duplicates", c.Duplicates, false)
	for _, a := range []struct {
		name string
		d    time.Duration
	}{{"RequestsMaxAge", c.RequestsMaxAge}, {"ResponsesMaxAge", c.ResponsesMaxAge}, {"ControlMaxAge", c.ControlMaxAge}} {
		if c.Duplicates > a.d && a.d > 0 {
			bad("Duplicates %v longer than %s %v", c.Duplicates, a.name, a.d)
		}
	}
	size := func(name string, n int64) {
		if n != Unlimited && n <= 0 {
			bad("%s %d: use a positive size or Unlimited (-1)", name, n)
		}
	}
	size("RequestsMaxBytes", c.RequestsMaxBytes)
	size("ResponsesMaxBytes", c.ResponsesMaxBytes)
	size("ControlMaxBytes", c.ControlMaxBytes)
	size("AuditMaxBytes", c.AuditMaxBytes)
	size("ArchiveMaxBytes", c.ArchiveMaxBytes)
	size("IndexMaxBytes", c.IndexMaxBytes)
	size("KeyValueMaxBytes", c.KeyValueMaxBytes)
	for _, z := range []struct {
		name string
		c    jetstream.StoreCompression
	}{{"RequestsCompression", c.RequestsCompression}, {"ResponsesCompression", c.ResponsesCompression}, {"AuditCompression", c.AuditCompression}} {
		if z.c != jetstream.NoCompression && z.c != jetstream.S2Compression {
			bad("%s %d is neither none nor s2", z.name, z.c)
		}
	}
	if c.AuditPartitions < 1 || c.AuditPartitions > 1024 {
		bad("AuditPartitions %d not in 1..1024", c.AuditPartitions)
	}
	if c.TasksHistory < 1 || c.TasksHistory > jetstream.KeyValueMaxHistory {
		bad("TasksHistory %d not in 1..%d", c.TasksHistory, jetstream.KeyValueMaxHistory)
	}
	age("TasksTTL", c.TasksTTL, true)
	age("RateLimitTTL", c.RateLimitTTL, false)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
}
