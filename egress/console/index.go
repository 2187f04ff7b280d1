package console

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Names of the index bucket and of the durable consumers that feed it.
const (
	// Bucket is the key-value bucket holding the index.
	Bucket = "E2A_INDEX"
	// RequestsConsumer is the durable consumer of E2A_REQUESTS that indexes
	// new requests. A request's progress is not indexed: it is read from
	// its frames when a page shows it.
	RequestsConsumer = "console-index-requests-v2"
	// legacyRequestsConsumer is the consumer earlier builds indexed with,
	// acknowledging a batch with one ack of its last message (AckAll);
	// shared by several processes, one's ack acknowledged the messages
	// another had fetched and not indexed, lost if that one stopped. Its
	// ack floor is where RequestsConsumer starts when it is first made;
	// the server removes it after one TTL without a reader.
	legacyRequestsConsumer = "console-index-requests"

	// DefaultIndexTTL is how long an index key lives when the streams
	// configuration does not say (it follows ResponsesMaxAge otherwise).
	DefaultIndexTTL = 24 * time.Hour

	// kvStream is the stream behind Bucket (the JetStream KV convention).
	kvStream = "KV_" + Bucket

	fetchBatch   = 256
	batchIdle    = 5 * time.Millisecond
	batchLinger  = 50 * time.Millisecond
	writeWorkers = 16

	// indexPublishTimeout bounds the wait for the index stream's ack of a
	// publish.
	indexPublishTimeout = 10 * time.Second
	// indexRetryFor is how long the indexer publishes a batch again when
	// the index stream does not take it (an ack lost or late, no leader
	// while one is elected) before it gives the batch up (counted and
	// logged: the index is best effort). A batch held that long is
	// delivered again by the consumer (ack wait 30 s) and indexed once: its
	// publishes carry message ids.
	indexRetryFor = time.Minute
	retryFirst    = 100 * time.Millisecond
	retryMost     = 5 * time.Second
)

// Request states shown by the console (those of the aggregated E2A JSON).
const (
	StatusPending   = "pending"   // indexed, no frame yet
	StatusRunning   = "running"   // frames, no final frame yet
	StatusSucceeded = "succeeded" // final frame, status succeeded
	StatusFailed    = "failed"    // final frame, status failed
	// StatusInputRequired and StatusAuthRequired: the final frame
	// interrupts the turn (e2a.Response.Interrupt); its task waits for
	// the client's answer.
	StatusInputRequired = e2a.StateInputRequired
	StatusAuthRequired  = e2a.StateAuthRequired
	// StatusExpired: answered, its answer no longer held: no frame of it
	// is left in E2A_RESPONSES (aged out, or evicted when the stream was
	// full), and its pool's consumer acknowledged it, which the agent
	// does only once its final frame is stored (egress's
	// Service.AnswerAgedOut). Its audit copy may still be read (`e2a
	// replay <id>`). A request of which nothing tells (no egress, its
	// pool gone, the consumer unreadable) stays pending.
	StatusExpired = "expired"
)

// Statuses lists the request states, for filters.
var Statuses = []string{StatusPending, StatusRunning, StatusSucceeded, StatusFailed, StatusInputRequired, StatusAuthRequired,
	StatusExpired}

// Index subjects. The index keeps no subject per request: every message
// is on a subject of a family whose size is fixed by design, many messages
// per subject (docs/capacity.md, Subjects per request).
//
//	q.<bucket>             the request record, bucket = valueBucket(user_id)
//	x.<field>.<bucket>     a pointer to a record: field task, session or
//	                       context, bucket = valueBucket(the field's value)
//
// An index written by earlier builds also holds q.<token> records (read by
// the q.* walk, as the shape is the same) and x.<field>.<hash>.<token>
// keys (not read any more; they expire with the TTL).
const (
	prefixRequest = "q."
	prefixSecond  = "x."
	// bucketDigits is the number of hex digits of a bucket: 16^3 = 4,096
	// subjects per family at most.
	bucketDigits = 3
	// MaxIndexSubjects is the most subjects the index holds: records and
	// three pointer families of 4,096 buckets each.
	MaxIndexSubjects = 4 << (4 * bucketDigits)
)

// Secondary index fields.
const (
	fieldTask    = "task"
	fieldSession = "session"
	fieldContext = "context"
)

// kvSubject is the subject of key in the index stream ($KV.<bucket>.<key>:
// the stream keeps the subjects of the former key-value bucket, which the
// stages' NATS permissions name).
func kvSubject(key string) string { return subjects.KV(Bucket, key) }

// valueBucket returns the bucket of v: the first bucketDigits hex digits
// of SHA-256(v).
func valueBucket(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:2])[:bucketDigits]
}

// recordKey is the subject key of the records of user's requests.
func recordKey(user string) string { return prefixRequest + valueBucket(user) }

// pointerKey is the subject key of the pointers of field = value.
func pointerKey(field, value string) string { return prefixSecond + field + "." + valueBucket(value) }

// pointer is the value of an x.<field>.<bucket> message: the id it
// indexes, the stream sequence of the request record and the record's
// principal, so that a search skips another principal's pointer without
// reading its record (the reads then do not tell another's id from an
// unused one). Owner is nil in pointers of earlier builds (their record is
// read to learn whose it is) and set, "" included, in every new one.
type pointer struct {
	Value string  `json:"v"`
	Seq   uint64  `json:"s"`
	Owner *string `json:"o,omitempty"`
}

// RequestInfo is what a request's message in E2A_REQUESTS says of it: the
// part of an [Entry] the index stores.
type RequestInfo struct {
	RequestID string    `json:"request_id"`
	Time      time.Time `json:"time"`
	Pool      string    `json:"pool"`
	Protocol  string    `json:"protocol,omitempty"`
	Method    string    `json:"method,omitempty"`
	Principal string    `json:"principal,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	ContextID string    `json:"context_id,omitempty"`
	Channel   string    `json:"channel,omitempty"`
	Stream    bool      `json:"stream,omitempty"`
}

// record is the stored value of q.<token>.
type record struct {
	RequestInfo
	Seq uint64 `json:"seq"` // E2A_REQUESTS stream sequence
}

// progress is what a request's frames say of it: read from its first and
// last message in E2A_RESPONSES (the last frame of a burst) when a page
// shows the request (lister.progress).
type progress struct {
	Status     string
	Frames     int64
	FirstFrame time.Time
	Finished   time.Time
	ErrorCode  string
}

// Entry is one request as the list shows it: the request record joined
// with its progress. It never holds credentials or payloads.
type Entry struct {
	RequestInfo
	Status     string     `json:"status"`
	Frames     int64      `json:"frames"`
	FirstFrame *time.Time `json:"first_frame,omitempty"`
	Finished   *time.Time `json:"finished,omitempty"`
	// DurationMS is from acceptance to the final frame (absent while running).
	DurationMS *float64 `json:"duration_ms,omitempty"`
	ErrorCode  string   `json:"error_code,omitempty"`
	// TaskLatest is set on an interrupted turn (status input-required or
	// auth-required) of a task that has a later turn (the client
	// answered): the task's newest turn and its status, the task's current
	// state. Status stays the turn's own outcome. Absent while the turn is
	// its task's newest (the task still waits for the answer).
	TaskLatest *TaskTurn `json:"task_latest,omitempty"`
	// Cursor is the position of the entry in the index (for paging).
	Cursor uint64 `json:"cursor,omitempty"`
}

// TaskTurn names a turn of a task: its request and the request's status.
type TaskTurn struct {
	RequestID string `json:"request_id"`
	Status    string `json:"status"`
}

func joinEntry(r record, p *progress, cursor uint64) Entry {
	e := Entry{RequestInfo: r.RequestInfo, Status: StatusPending, Cursor: cursor}
	if p == nil {
		return e
	}
	if p.Status != "" {
		e.Status = p.Status
	}
	e.Frames, e.ErrorCode = p.Frames, p.ErrorCode
	if !p.FirstFrame.IsZero() {
		t := p.FirstFrame
		e.FirstFrame = &t
	}
	if !p.Finished.IsZero() {
		t := p.Finished
		e.Finished = &t
		d := float64(p.Finished.Sub(r.Time)) / float64(time.Millisecond)
		e.DurationMS = &d
	}
	return e
}

// IndexStreamConfig returns the definition of the index stream
// (KV_E2A_INDEX) for the streams configuration cfg: its replicas and
// storage, no limit of messages per subject (its subjects are shared by
// many requests), a duplicate window for a redelivered batch, direct gets,
// messages expiring after ttl (cfg.ResponsesMaxAge when ttl is 0: a
// request whose frames are gone cannot be opened anyway) and bounded by
// cfg.IndexMaxBytes, the oldest dropped first (0: unlimited). Pass it to
// streams.Apply with streams.WithStream to provision it with the rest: on
// a stream an earlier build made as a key-value bucket (one message per
// subject), Apply lifts the limit in place.
func IndexStreamConfig(cfg streams.Config, ttl time.Duration) jetstream.StreamConfig {
	if ttl <= 0 {
		ttl = cfg.ResponsesMaxAge
	}
	if ttl <= 0 {
		ttl = DefaultIndexTTL
	}
	replicas := max(cfg.Replicas, 1)
	maxBytes := cfg.IndexMaxBytes
	if maxBytes <= 0 {
		maxBytes = -1
	}
	return jetstream.StreamConfig{
		Name:              kvStream,
		Description:       "E2A console index of recent requests",
		Subjects:          []string{kvSubject(">")},
		Retention:         jetstream.LimitsPolicy,
		MaxMsgsPerSubject: -1,
		MaxMsgs:           -1,
		MaxBytes:          maxBytes,
		MaxMsgSize:        -1,
		MaxConsumers:      -1,
		MaxAge:            ttl,
		Discard:           jetstream.DiscardOld,
		Storage:           cfg.Storage,
		Replicas:          replicas,
		Duplicates:        min(indexDuplicates, ttl),
		AllowDirect:       true,
		AllowRollup:       true,
		DenyDelete:        true,
	}
}

// indexDuplicates is the index stream's duplicate window: longer than the
// index consumer's ack wait (30 s), after which a batch whose ack was lost
// is delivered again.
const indexDuplicates = 2 * time.Minute

// indexer feeds the index from the durable consumer of E2A_REQUESTS.
type indexer struct {
	js      jetstream.JetStream
	ttl     time.Duration
	log     *slog.Logger
	indexed *prometheus.CounterVec
	errors  *prometheus.CounterVec
}

// ensureIndex checks the index stream, creating or updating it when it is
// missing, keeps one message per subject (a key-value bucket of an earlier
// build) or has another max age or byte bound. A stream that keeps one message per
// subject and cannot be updated (a NATS user without the right) is an
// error: records on shared subjects would replace each other.
func ensureIndex(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, cfg.Name)
	if err == nil {
		have := s.CachedInfo().Config
		if have.MaxMsgsPerSubject <= 0 && have.MaxAge == cfg.MaxAge && have.MaxBytes == cfg.MaxBytes {
			return nil
		}
	}
	if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("console: index stream %s (run e2a streams apply of this version): %w", cfg.Name, err)
	}
	return nil
}

// consumer returns the durable consumer name of stream, creating it when
// it does not exist.
func (ix *indexer) consumer(ctx context.Context, stream, name, filter, desc string) (jetstream.Consumer, error) {
	s, err := ix.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("console: stream %s: %w", stream, err)
	}
	c, err := s.Consumer(ctx, name)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("console: consumer %s: %w", name, err)
	}
	cfg := streams.IndexConsumerConfig(name, filter, desc, ix.ttl, time.Now(), 16*fetchBatch)
	if name == RequestsConsumer {
		// Upgraded from a build that indexed with the legacy consumer: go
		// on after what it acknowledged (a message past it is indexed
		// again, its Nats-Msg-Id dropping the copy), not one TTL back.
		if old, err := s.Consumer(ctx, legacyRequestsConsumer); err == nil && old.CachedInfo().AckFloor.Stream > 0 {
			cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartSequencePolicy, nil
			cfg.OptStartSeq = old.CachedInfo().AckFloor.Stream + 1
		}
	}
	c, err = s.CreateConsumer(ctx, cfg)
	if err != nil {
		// Another egress process created it first.
		if c2, err2 := s.Consumer(ctx, name); err2 == nil {
			return c2, nil
		}
		return nil, fmt.Errorf("console: create consumer %s: %w", name, err)
	}
	return c, nil
}

// run feeds the index until ctx ends.
func (ix *indexer) run(ctx context.Context, ready chan<- error) {
	reqs, err := ix.consumer(ctx, streams.RequestsStream, RequestsConsumer, subjects.AllRequests, "E2A console: index of new requests")
	if err != nil {
		ready <- err
		return
	}
	ready <- nil
	ix.loop(ctx, reqs, "requests", ix.indexRequests)
}

// loop reads c continuously and hands it to handle in small batches: a
// batch closes when 256 messages are in, or when no message came for
// batchIdle (at most batchLinger after its first), so the index trails the
// streams by milliseconds when idle and batches under load. Each message
// of a batch is acknowledged once the batch is indexed (explicit acks,
// not waited for: a lost ack delivers the message again, its record
// dropped as a duplicate): the consumer is shared, and one process's
// ack-all acknowledged what another had fetched and not indexed.
func (ix *indexer) loop(ctx context.Context, c jetstream.Consumer, kind string, handle func(context.Context, []jetstream.Msg) error) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		it, err := c.Messages(jetstream.PullMaxMessages(2*fetchBatch), jetstream.PullHeartbeat(streams.PullHeartbeat))
		if err != nil {
			ix.errors.WithLabelValues(kind).Inc()
			ix.log.Warn("console: index consumer failed", "consumer", kind, "err", err)
			_ = sleepctx.Sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		ix.consume(ctx, it, kind, handle)
		it.Stop()
	}
}

func (ix *indexer) consume(ctx context.Context, it jetstream.MessagesContext, kind string, handle func(context.Context, []jetstream.Msg) error) {
	for ctx.Err() == nil {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				ix.log.Debug("console: index iterator ended", "consumer", kind, "err", err)
			}
			return
		}
		msgs := []jetstream.Msg{m}
		linger := time.Now().Add(batchLinger)
		for len(msgs) < fetchBatch {
			wait := min(time.Until(linger), batchIdle)
			if wait <= 0 {
				break
			}
			m, err := it.Next(jetstream.NextMaxWait(wait))
			if err != nil {
				break
			}
			msgs = append(msgs, m)
		}
		if !ix.handleRetrying(ctx, msgs, kind, handle) {
			return
		}
		ix.indexed.WithLabelValues(kind).Add(float64(len(msgs)))
		for _, m := range msgs {
			if err := m.Ack(); err != nil && ctx.Err() == nil {
				ix.log.Debug("console: index ack failed", "consumer", kind, "err", err)
				break
			}
		}
	}
}

// handleRetrying hands msgs to handle, again after a failure (with a
// growing pause) for up to indexRetryFor: a publish the index stream did
// not acknowledge (lost, or no leader yet) is published again, the ones it
// stored dropped as duplicates. Each failure is counted and logged; a batch
// still failing then is given up rather than block the index on messages
// that cannot be indexed. false when ctx ended.
func (ix *indexer) handleRetrying(ctx context.Context, msgs []jetstream.Msg, kind string, handle func(context.Context, []jetstream.Msg) error) bool {
	giveUp := time.Now().Add(indexRetryFor)
	for pause := retryFirst; ; pause = min(2*pause, retryMost) {
		err := handle(ctx, msgs)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			return true
		}
		ix.errors.WithLabelValues(kind).Inc()
		if time.Now().Add(pause).After(giveUp) {
			ix.log.Warn("console: index update failed, batch given up", "consumer", kind, "messages", len(msgs), "err", err)
			return true
		}
		ix.log.Warn("console: index update failed, retrying", "consumer", kind, "messages", len(msgs), "retry_in", pause, "err", err)
		if sleepctx.Sleep(ctx, pause) != nil {
			return false
		}
	}
}

// envelopeFields are the envelope fields the index keeps.
type envelopeFields struct {
	Method     string `json:"method"`
	UserID     string `json:"user_id"`
	TaskID     string `json:"task_id"`
	SessionID  string `json:"session_id"`
	ContextID  string `json:"context_id"`
	Channel    string `json:"channel"`
	IsStream   bool   `json:"is_stream"`
	Provenance *struct {
		SourceProtocol string `json:"source_protocol"`
		Details        struct {
			IngressProtocol any `json:"ingress_protocol"`
			A2AVersion      any `json:"a2a_version"`
		} `json:"details"`
	} `json:"provenance"`
}

// recordOf returns the record of a request message stored in E2A_REQUESTS
// under subj at seq and t; false when subj is not a request subject.
func recordOf(subj string, data []byte, t time.Time, seq uint64) (record, bool) {
	pool, id, err := subjects.ParseRequest(subj)
	if err != nil {
		return record{}, false
	}
	var f envelopeFields
	_ = json.Unmarshal(data, &f) // an undecodable envelope is still listed
	r := record{RequestInfo: RequestInfo{RequestID: id, Pool: pool, Method: f.Method, Principal: f.UserID,
		TaskID: f.TaskID, SessionID: f.SessionID, ContextID: f.ContextID, Channel: f.Channel,
		Stream: f.IsStream, Time: t.UTC()}, Seq: seq}
	if f.Provenance != nil {
		// the finer origin (agentvault, a2e, agent_request) when there is one
		r.Protocol = f.Provenance.SourceProtocol
		if o, ok := f.Provenance.Details.IngressProtocol.(string); ok && o != "" {
			r.Protocol = o
		}
		// an A2A call names the version it came in: a2a/v1.0, a2a/v0.3
		if v, ok := f.Provenance.Details.A2AVersion.(string); ok && r.Protocol == e2a.SourceA2A && versionLike(v) {
			r.Protocol += "/v" + v
		}
	}
	return r, true
}

// versionLike reports whether v is a short version number (digits and
// dots: "1.0", "0.3").
func versionLike(v string) bool {
	if v == "" || len(v) > 16 {
		return false
	}
	for _, c := range v {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// indexRequests indexes a batch of request messages in two rounds of
// asynchronous publishes: the records first, in the order of E2A_REQUESTS
// (the order the list walks), then, once each record's sequence is known,
// the pointers of its task, session and context. A record carries the
// request's E2A_REQUESTS sequence as its Nats-Msg-Id, and each pointer
// that and its field: a batch delivered again (an ack lost, or an indexer
// stopped between the two rounds) within the duplicate window is not
// indexed twice, and a record the stream reports as a duplicate still gets
// its pointers (at the first copy's sequence, which the duplicate's ack
// gives), the ones already stored dropped as duplicates in their turn.
func (ix *indexer) indexRequests(ctx context.Context, msgs []jetstream.Msg) error {
	recs := make([]record, 0, len(msgs))
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	var first error
	for _, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		r, ok := recordOf(m.Subject(), m.Data(), md.Timestamp, md.Sequence.Stream)
		if !ok {
			continue
		}
		val, err := json.Marshal(r)
		if err != nil {
			return err
		}
		f, err := ix.js.PublishAsync(kvSubject(recordKey(r.Principal)), val,
			jetstream.WithMsgID("ix."+strconv.FormatUint(r.Seq, 10)))
		if err != nil {
			first = err
			break
		}
		recs, futures = append(recs, r), append(futures, f)
	}
	var ptrs []jetstream.PubAckFuture
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if err := ix.publishPointers(recs[i], ack.Sequence, &ptrs); err != nil && first == nil {
				first = err
			}
		case err := <-f.Err():
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return cmp.Or(first, wait(ctx, ptrs))
}

// publishPointers publishes the pointers of r (stored at seq) and appends
// their futures to out.
func (ix *indexer) publishPointers(r record, seq uint64, out *[]jetstream.PubAckFuture) error {
	for _, s := range []struct{ field, value string }{
		{fieldTask, r.TaskID}, {fieldSession, r.SessionID}, {fieldContext, r.ContextID},
	} {
		if s.value == "" {
			continue
		}
		val, err := json.Marshal(pointer{Value: s.value, Seq: seq, Owner: &r.Principal})
		if err != nil {
			return err
		}
		f, err := ix.js.PublishAsync(kvSubject(pointerKey(s.field, s.value)), val,
			jetstream.WithMsgID("ix."+strconv.FormatUint(r.Seq, 10)+"."+s.field))
		if err != nil {
			return err
		}
		*out = append(*out, f)
	}
	return nil
}

// wait waits for every publish of futures, returning the first error.
func wait(ctx context.Context, futures []jetstream.PubAckFuture) error {
	var first error
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

// frameFields are the frame fields a request's progress is read from.
type frameFields struct {
	Sequence int64  `json:"sequence"`
	IsFinal  bool   `json:"is_final"`
	Status   string `json:"status"`
	Kind     string `json:"response_kind"`
	Body     struct {
		Code string `json:"code"`
	} `json:"body"`
}
