package streams

import (
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// base returns the fields every stream shares; unset limits are explicit so
// that a definition compares equal to what the server reports.
func (c Config) base(name, description string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              name,
		Description:       description,
		Retention:         jetstream.LimitsPolicy,
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          Unlimited,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        -1,
		Storage:           c.Storage,
		Replicas:          c.Replicas,
		Discard:           jetstream.DiscardOld,
		Compression:       jetstream.NoCompression,
	}
}

// hot returns base with what the hot streams (E2A_REQUESTS, E2A_RESPONSES,
// E2A_CONTROL) share: their one subject filter, their age and byte limits,
// the Duplicates window, direct gets allowed.
func (c Config) hot(name, description, subject string, maxAge time.Duration, maxBytes int64) jetstream.StreamConfig {
	s := c.base(name, description)
	s.Subjects = []string{subject}
	s.MaxAge, s.MaxBytes = maxAge, maxBytes
	s.Duplicates = c.Duplicates
	s.AllowDirect = true
	return s
}

// RequestsStreamConfig returns the definition of E2A_REQUESTS: subjects
// e2a.req.*.* (subjects.RequestSubjects), limits retention, RequestsMaxAge, the Duplicates window, and
// DiscardNew with RequestsMaxBytes so that a full stream refuses new
// requests instead of dropping accepted ones. Direct gets are allowed (cheap
// existence checks).
func (c Config) RequestsStreamConfig() jetstream.StreamConfig {
	s := c.hot(RequestsStream, "E2A requests, e2a.req.<agent>.<request_id>",
		subjects.RequestSubjects, c.RequestsMaxAge, c.RequestsMaxBytes)
	s.Discard = jetstream.DiscardNew
	s.Compression = c.RequestsCompression
	return s
}

// ResponsesStreamConfig returns the definition of E2A_RESPONSES: subjects
// e2a.resp.> (messages of one frame or a burst of frames on e2a.resp.<id>;
// e2a.resp.<id>.lease the lease a worker stores when it takes a
// redelivered request over, fencing what an earlier delivery's writer may
// still publish: agent's resume),
// limits retention, ResponsesMaxAge and ResponsesMaxBytes (DiscardOld), the
// Duplicates window, direct gets allowed, fast batch publishing allowed
// (workers of earlier versions wrote frames in fast batches fenced on the
// lease: kept so that a rolling upgrade does not change their path; the
// runtime now stores a burst as one message), and every stored message on
// e2a.resp.<id> republished
// by the server to e2a.live.<id> with the headers Nats-Stream, Nats-Subject,
// Nats-Sequence, Nats-Time-Stamp and Nats-Last-Sequence (stream sequence of
// the previous message on the same subject, 0 for the first).
func (c Config) ResponsesStreamConfig() jetstream.StreamConfig {
	s := c.hot(ResponsesStream, "E2A response frames, e2a.resp.<request_id>, republished to e2a.live.<request_id>",
		subjects.AllResponses, c.ResponsesMaxAge, c.ResponsesMaxBytes)
	s.AllowBatchPublish = true
	s.RePublish = &jetstream.RePublish{Source: subjects.AllResponseFrames, Destination: subjects.LiveOfFrames}
	s.Compression = c.ResponsesCompression
	return s
}

// ControlStreamConfig returns the definition of E2A_CONTROL: subjects
// e2a.ctl.>, one message per subject (the latest control message of a
// request survives until its worker reads it), ControlMaxAge and
// ControlMaxBytes (DiscardOld), direct gets allowed.
func (c Config) ControlStreamConfig() jetstream.StreamConfig {
	s := c.hot(ControlStream, "E2A control messages (cancel), e2a.ctl.<request_id>",
		subjects.AllControl, c.ControlMaxAge, c.ControlMaxBytes)
	s.MaxMsgsPerSubject = 1
	return s
}

// AuditStreamConfig returns the definition of E2A_AUDIT. It has no subjects
// of its own: it sources E2A_REQUESTS and E2A_RESPONSES with subject
// transforms e2a.req.*.* → e2a.audit.req.{{partition(N,2)}} and
// e2a.resp.* → e2a.audit.resp.{{partition(N,1)}}, N = AuditPartitions, so
// it holds at most 2N subjects whatever its age. Sourced messages keep their
// headers (E2A-Request-Id, E2A-Sequence, E2A-Frames, a direct publisher's
// Nats-Msg-Id) and gain Nats-Stream-Source with the original subject. DenyDelete and DenyPurge
// make it append-only; it does not deduplicate (sourcing is exactly once).
// AuditMaxAge and AuditMaxBytes bound it, dropping the oldest messages
// (DiscardOld, see Config.AuditMaxBytes). Its blocks are compressed as
// Config.AuditCompression says (none by default); the limits count bytes
// before compression.
//
// On one server (Replicas 1, file storage) it is written in nats-server's
// async persist mode: its copies reach the disk in batches a moment after
// they are stored, instead of one write per message. A hard kill of the
// server may lose the newest copies; the sources copy them again at restart,
// from where E2A_AUDIT's stored messages end, out of E2A_REQUESTS and
// E2A_RESPONSES, which are written before each PubAck. Replicated, the
// stream keeps the default mode (its writes go through the cluster's log).
func (c Config) AuditStreamConfig() jetstream.StreamConfig {
	s := c.base(AuditStream, "E2A audit: requests and frames in bounded partitions")
	rs, rd := subjects.AuditRequestMapping(c.AuditPartitions)
	ps, pd := subjects.AuditResponseMapping(c.AuditPartitions)
	// OptStartSeq 1: a source that has copied nothing yet starts at the
	// first message of its stream. Without it, nats-server starts such a
	// source at the time of E2A_AUDIT's last message once E2A_AUDIT has
	// dropped its first (FirstSeq > 1, i.e. after DiscardOld at its byte
	// limit), skipping every message the other source's traffic overtook:
	// the loss TestFullStreams/audit used to log.
	s.Sources = []*jetstream.StreamSource{
		{Name: RequestsStream, OptStartSeq: 1, SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: rs, Destination: rd}}},
		{Name: ResponsesStream, OptStartSeq: 1, SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: ps, Destination: pd}}},
	}
	s.MaxAge = c.AuditMaxAge
	s.MaxBytes = c.AuditMaxBytes
	s.DenyDelete = true
	s.DenyPurge = true
	s.AllowDirect = true
	s.Compression = c.AuditCompression
	if c.Replicas <= 1 && c.Storage == jetstream.FileStorage {
		s.PersistMode = jetstream.AsyncPersistMode
	}
	return s
}

// ArchiveStreamConfig returns the definition of E2A_ARCHIVE: the one
// subject e2a.archive.batches, each message a zstd batch of consecutive
// E2A_AUDIT messages written by package archive's archiver (which sends
// each with the subject's expected last sequence, so two archivers never
// store the same messages twice), ArchiveMaxAge and ArchiveMaxBytes
// (DiscardOld), append-only (DenyDelete, DenyPurge), direct gets allowed.
// Its payloads are compressed already: no storage compression. Its limits
// count compressed bytes, which is what lets the shipped volumes keep 90
// days of history (docs/capacity.md).
func (c Config) ArchiveStreamConfig() jetstream.StreamConfig {
	s := c.base(ArchiveStream, "E2A archive: E2A_AUDIT's messages in compressed batches")
	s.Subjects = []string{subjects.ArchiveBatches}
	s.MaxAge = c.ArchiveMaxAge
	s.MaxBytes = c.ArchiveMaxBytes
	// No message id is sent (the expected last sequence fences batches);
	// the server's default window, written out so that the definition
	// compares equal to what it reports.
	s.Duplicates = 2 * time.Minute
	if s.MaxAge > 0 && s.MaxAge < s.Duplicates {
		s.Duplicates = s.MaxAge
	}
	s.DenyDelete = true
	s.DenyPurge = true
	s.AllowDirect = true
	return s
}

// StreamConfigs returns every stream definition: the hot streams, then
// E2A_AUDIT (which sources them), then E2A_ARCHIVE (which the archiver
// fills from E2A_AUDIT).
//
// It returns ErrInvalidConfig when c is invalid.
func (c Config) StreamConfigs() ([]jetstream.StreamConfig, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return []jetstream.StreamConfig{
		c.RequestsStreamConfig(),
		c.ResponsesStreamConfig(),
		c.ControlStreamConfig(),
		c.AuditStreamConfig(),
		c.ArchiveStreamConfig(),
	}, nil
}

var validBucket = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// KeyValueConfig returns the definition of bucket with the Replicas and
// Storage of c. The well-known buckets get their settings:
//
//   - E2A_TASKS: TasksHistory revisions per key, TasksTTL.
//   - E2A_RATELIMIT: one revision, RateLimitTTL.
//   - A2E_LOCAL (no TTL), A2E_SESSION (24 h), A2E_CACHE (10 min): the
//     workflow executor's buckets, created by the workflow pool.
//   - E2A_BRIDGE: one revision, TasksTTL; created by the bridge pools.
//
// Every bucket is bounded by KeyValueMaxBytes. Any other valid bucket
// name gets one revision and no TTL; adjust the returned value as needed
// and pass it to Apply with WithKeyValue.
//
// It returns ErrInvalidConfig when bucket is not a valid bucket name
// ([a-zA-Z0-9_-]+).
func (c Config) KeyValueConfig(bucket string) (jetstream.KeyValueConfig, error) {
	if !validBucket.MatchString(bucket) {
		return jetstream.KeyValueConfig{}, fmt.Errorf("%w: bucket name %q", ErrInvalidConfig, bucket)
	}
	kv := jetstream.KeyValueConfig{
		Bucket:   bucket,
		History:  1,
		Storage:  c.Storage,
		Replicas: c.Replicas,
		MaxBytes: c.KeyValueMaxBytes,
	}
	switch bucket {
	case TasksBucket:
		kv.Description = "E2A tasks and contexts: request ids and state"
		kv.History = c.TasksHistory
		kv.TTL = c.TasksTTL
	case RateLimitBucket:
		kv.Description = "E2A rate limiter state"
		kv.TTL = c.RateLimitTTL
	case WorkflowLocalBucket:
		kv.Description = "A2E workflow StoreData localStorage"
	case WorkflowSessionBucket:
		kv.Description = "A2E workflow StoreData sessionStorage"
		kv.TTL = 24 * time.Hour
	case WorkflowCacheBucket:
		kv.Description = "A2E workflow operation cache"
		kv.TTL = 10 * time.Minute
	case BridgeBucket:
		kv.Description = "E2A bridges: upstream task and context ids and turns per conversation"
		kv.TTL = c.TasksTTL
	}
	return kv, nil
}

// KeyValueConfigs returns the definitions of E2A_TASKS and E2A_RATELIMIT.
//
// It returns ErrInvalidConfig when c is invalid.
func (c Config) KeyValueConfigs() ([]jetstream.KeyValueConfig, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var out []jetstream.KeyValueConfig
	for _, b := range []string{TasksBucket, RateLimitBucket} {
		kv, err := c.KeyValueConfig(b)
		if err != nil {
			return nil, err
		}
		out = append(out, kv)
	}
	return out, nil
}
