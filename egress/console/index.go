package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
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
	RequestsConsumer = "console-index-requests"

	// DefaultIndexTTL is how long an index key lives when the streams
	// configuration does not say (it follows ResponsesMaxAge otherwise).
	DefaultIndexTTL = 24 * time.Hour

	// kvStream is the stream behind Bucket (the JetStream KV convention).
	kvStream = "KV_" + Bucket

	fetchBatch   = 256
	batchIdle    = 5 * time.Millisecond
	batchLinger  = 50 * time.Millisecond
	writeWorkers = 16
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
)

// Statuses lists the request states, for filters.
var Statuses = []string{StatusPending, StatusRunning, StatusSucceeded, StatusFailed, StatusInputRequired, StatusAuthRequired}

// Index key families. Every key ends with the request id token
// (subjects.EncodeID), which is a legal KV key.
//
//	q.<token>                    the request record (written once)
//	x.<field>.<hash>.<token>     secondary keys, empty values: field task,
//	                             session, context or user; hash = first 12
//	                             bytes of SHA-256(value), hex
const (
	prefixRequest = "q."
	prefixSecond  = "x."
)

// Secondary index fields.
const (
	fieldTask    = "task"
	fieldSession = "session"
	fieldContext = "context"
	fieldUser    = "user"
)

// kvSubject is the subject of key in Bucket (the JetStream KV convention
// $KV.<bucket>.<key>; keys here are built from subject-safe tokens).
func kvSubject(key string) string { return subjects.KV(Bucket, key) }

func keyFromSubject(subj string) string { k, _ := subjects.KVKey(Bucket, subj); return k }

func valueHash(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:12])
}

func secondaryPrefix(field, value string) string {
	return prefixSecond + field + "." + valueHash(value) + "."
}

// record is the stored value of q.<token>.
type record struct {
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
	Seq       uint64    `json:"seq"` // E2A_REQUESTS stream sequence
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
	RequestID  string     `json:"request_id"`
	Time       time.Time  `json:"time"`
	Pool       string     `json:"pool"`
	Protocol   string     `json:"protocol,omitempty"`
	Method     string     `json:"method,omitempty"`
	Principal  string     `json:"principal,omitempty"`
	TaskID     string     `json:"task_id,omitempty"`
	SessionID  string     `json:"session_id,omitempty"`
	ContextID  string     `json:"context_id,omitempty"`
	Channel    string     `json:"channel,omitempty"`
	Stream     bool       `json:"stream,omitempty"`
	Status     string     `json:"status"`
	Frames     int64      `json:"frames"`
	FirstFrame *time.Time `json:"first_frame,omitempty"`
	Finished   *time.Time `json:"finished,omitempty"`
	// DurationMS is from acceptance to the final frame (absent while running).
	DurationMS *float64 `json:"duration_ms,omitempty"`
	ErrorCode  string   `json:"error_code,omitempty"`
	// Cursor is the position of the entry in the index (for paging).
	Cursor uint64 `json:"cursor,omitempty"`
}

func joinEntry(r record, p *progress, cursor uint64) Entry {
	e := Entry{RequestID: r.RequestID, Time: r.Time, Pool: r.Pool, Protocol: r.Protocol, Method: r.Method,
		Principal: r.Principal, TaskID: r.TaskID, SessionID: r.SessionID, ContextID: r.ContextID,
		Channel: r.Channel, Stream: r.Stream, Status: StatusPending, Cursor: cursor}
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

// BucketConfig returns the definition of the index bucket for the streams
// configuration cfg: its replicas and storage, one revision per key, and
// keys expiring after ttl (cfg.ResponsesMaxAge when ttl is 0: a request
// whose frames are gone cannot be opened anyway). Pass it to streams.Apply
// with streams.WithKeyValue to provision it with the rest.
func BucketConfig(cfg streams.Config, ttl time.Duration) jetstream.KeyValueConfig {
	kv, err := cfg.KeyValueConfig(Bucket)
	if err != nil { // the name is valid: only a zero Config gets here
		kv = jetstream.KeyValueConfig{Bucket: Bucket, History: 1, Replicas: 1}
	}
	if kv.Replicas < 1 {
		kv.Replicas = 1
	}
	if ttl <= 0 {
		ttl = cfg.ResponsesMaxAge
	}
	if ttl <= 0 {
		ttl = DefaultIndexTTL
	}
	kv.Description = "E2A console index of recent requests"
	kv.TTL = ttl
	return kv
}

// indexer feeds the index from the durable consumer of E2A_REQUESTS.
type indexer struct {
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	ttl     time.Duration
	log     *slog.Logger
	indexed *prometheus.CounterVec
	errors  *prometheus.CounterVec
}

// ensureBucket creates or updates the index bucket.
func ensureBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err == nil {
		st, err := kv.Status(ctx)
		if err == nil && st.TTL() == cfg.TTL {
			return kv, nil
		}
	}
	kv, err = js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("console: index bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
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
	c, err = s.CreateConsumer(ctx, streams.IndexConsumerConfig(name, filter, desc, ix.ttl, time.Now(), 16*fetchBatch))
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
// streams by milliseconds when idle and batches under load. A batch is
// acknowledged with one ack of its last message (ack-all).
func (ix *indexer) loop(ctx context.Context, c jetstream.Consumer, kind string, handle func(context.Context, []jetstream.Msg) error) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		it, err := c.Messages(jetstream.PullMaxMessages(2 * fetchBatch))
		if err != nil {
			ix.errors.WithLabelValues(kind).Inc()
			ix.log.Warn("console: index consumer failed", "consumer", kind, "err", err)
			sleep(ctx, backoff)
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
		if err := handle(ctx, msgs); err != nil {
			if ctx.Err() != nil {
				return
			}
			// The index is best effort: count, log and move on rather than
			// block on a message that cannot be indexed.
			ix.errors.WithLabelValues(kind).Inc()
			ix.log.Warn("console: index update failed", "consumer", kind, "messages", len(msgs), "err", err)
		}
		ix.indexed.WithLabelValues(kind).Add(float64(len(msgs)))
		if err := msgs[len(msgs)-1].Ack(); err != nil && ctx.Err() == nil {
			ix.log.Debug("console: index ack failed", "consumer", kind, "err", err)
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
		} `json:"details"`
	} `json:"provenance"`
}

type write struct {
	key   string
	value []byte
}

// indexRequests writes the request record and the secondary keys of each
// request message.
func (ix *indexer) indexRequests(ctx context.Context, msgs []jetstream.Msg) error {
	var writes []write
	for _, m := range msgs {
		pool, id, err := subjects.ParseRequest(m.Subject())
		if err != nil {
			continue
		}
		tok, err := subjects.EncodeID(id)
		if err != nil {
			continue
		}
		var f envelopeFields
		_ = json.Unmarshal(m.Data(), &f) // an undecodable envelope is still listed
		r := record{RequestID: id, Pool: pool, Method: f.Method, Principal: f.UserID, TaskID: f.TaskID,
			SessionID: f.SessionID, ContextID: f.ContextID, Channel: f.Channel, Stream: f.IsStream}
		if f.Provenance != nil {
			// the finer origin (agentvault, a2e, agent_request) when there is one
			r.Protocol = f.Provenance.SourceProtocol
			if o, ok := f.Provenance.Details.IngressProtocol.(string); ok && o != "" {
				r.Protocol = o
			}
		}
		if md, err := m.Metadata(); err == nil {
			r.Time, r.Seq = md.Timestamp.UTC(), md.Sequence.Stream
		}
		val, err := json.Marshal(r)
		if err != nil {
			return err
		}
		writes = append(writes, write{prefixRequest + tok, val})
		for _, s := range []struct{ field, value string }{
			{fieldTask, r.TaskID}, {fieldSession, r.SessionID}, {fieldContext, r.ContextID}, {fieldUser, r.Principal},
		} {
			if s.value != "" {
				writes = append(writes, write{secondaryPrefix(s.field, s.value) + tok, nil})
			}
		}
	}
	return ix.createAll(ctx, writes)
}

// createAll creates the keys of writes, in order, with asynchronous
// publishes on the bucket's subjects expecting no previous value (what
// KeyValue.Create does, without one round trip per key): request records
// land in the index stream in the order of E2A_REQUESTS, which is the order
// the list walks. A key that exists already (a redelivered batch) is left
// as it is.
func (ix *indexer) createAll(ctx context.Context, writes []write) error {
	futures := make([]jetstream.PubAckFuture, 0, len(writes))
	var first error
	for _, w := range writes {
		f, err := ix.js.PublishAsync(kvSubject(w.key), w.value, jetstream.WithExpectLastSequencePerSubject(0))
		if err != nil {
			first = err
			break
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if !isConflict(err) && first == nil {
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

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
