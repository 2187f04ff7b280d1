package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// MaxTurns bounds the request ids a conversation keeps; the oldest go first.
const MaxTurns = 64

// MaxThreads bounds the tasks a conversation keeps the upstream ids of
// (Conversation.Threads); the one written longest ago goes first.
const MaxThreads = 64

// MaxThreadTurns bounds the request ids a thread keeps: its last turns,
// all that finding its last turn (other than the one being served) needs.
const MaxThreadTurns = 4

// MaxBaseline bounds the bytes of a thread's Baseline (SetBaseline keeps
// none larger).
const MaxBaseline = 4096

// Conversation is what a bridge keeps of one conversation with its
// upstream.
type Conversation struct {
	// UpstreamTaskID and UpstreamContextID are the upstream's own ids (an
	// A2A agent's task and context), so a continuation reaches them.
	UpstreamTaskID    string `json:"upstream_task_id,omitempty"`
	UpstreamContextID string `json:"upstream_context_id,omitempty"`
	// UpstreamTaskOpen was written by earlier bridges (true while the
	// upstream task accepted more messages). Whether it does is now read
	// from the last turn's final frame (Conversations.Interrupted), so
	// that a request writes its record once; a record that still has it
	// is honoured until its next write clears it.
	UpstreamTaskOpen bool `json:"upstream_task_open,omitempty"`
	// RequestIDs are the pipeline requests of the conversation's turns,
	// oldest first (at most MaxTurns).
	RequestIDs []string `json:"request_ids,omitempty"`
	Updated    string   `json:"updated,omitempty"`
	// Threads are the conversation's pipeline tasks (ThreadOf), each with
	// its own upstream task: a continuation of pipeline task T reaches T's
	// upstream task, whatever other tasks of the context did since. The
	// fields above are the conversation's latest (UpstreamContextID is
	// the one a new task of the conversation is sent in). A record an
	// earlier bridge wrote has none: its upstream task is the thread of
	// its last request (read from the request's envelope when the record
	// is read, and written as such at its next write).
	Threads map[string]*Thread `json:"threads,omitempty"`
}

// Thread is what a bridge keeps of one pipeline task of a conversation:
// its upstream task and its last turns, with the upstream task each of
// them recorded.
type Thread struct {
	// UpstreamTaskID is the upstream task the thread's latest recorded
	// turn reached (the one a continuation of an interrupted turn goes
	// to); UpstreamContextID, its context.
	UpstreamTaskID    string `json:"upstream_task_id,omitempty"`
	UpstreamContextID string `json:"upstream_context_id,omitempty"`
	// UpstreamTaskOpen is carried over from a record an earlier bridge
	// wrote (see Conversation.UpstreamTaskOpen).
	UpstreamTaskOpen bool `json:"upstream_task_open,omitempty"`
	// RequestIDs are the thread's last requests, oldest first (at most
	// MaxThreadTurns).
	RequestIDs []string `json:"request_ids,omitempty"`
	// Tasks are the upstream tasks the requests of RequestIDs recorded
	// (SetTask), by request id ("" for a request answered without a
	// task): several requests of a thread may run at once (an E2A
	// session's requests naming no task), each in an upstream task of its
	// own, and a worker taking one over finds that request's (TaskOf). A
	// thread an earlier bridge wrote has none: its upstream task is its
	// last request's (read so when the record is read).
	Tasks map[string]string `json:"upstream_tasks,omitempty"`
	// Baseline is what the upstream task held when the thread's latest
	// continuation began (SetBaseline): a worker taking that request over
	// writes only what the task got beyond it. One per thread (a thread's
	// continuations of its task run one after another: each waits for
	// its last turn's interrupt), dropped with its request from
	// RequestIDs; none in a record an earlier bridge wrote.
	Baseline *Baseline `json:"baseline,omitempty"`
	// Last is when the thread was last written (Unix nanoseconds): the
	// thread written longest ago goes first past MaxThreads.
	Last int64 `json:"last,omitempty"`
}

// Thread returns env's thread of c (nil when it has none yet). The
// returned thread is c's own: changes to it are written by Update's fn.
func (c *Conversation) Thread(env *e2a.Envelope) *Thread {
	return c.Threads[ThreadOf(env)]
}

// TaskOf returns the upstream task the request id recorded in th (SetTask;
// "" for an answer without a task), ok false when it recorded none or is no
// longer one of the thread's last MaxThreadTurns requests.
func (th *Thread) TaskOf(id string) (task string, ok bool) {
	if th == nil {
		return "", false
	}
	task, ok = th.Tasks[id]
	return task, ok
}

// Baseline is what the upstream task held when request Request began:
// Data, in the bridge's own encoding (at most MaxBaseline bytes).
type Baseline struct {
	Request string          `json:"request"`
	Data    json.RawMessage `json:"data"`
}

// BaselineOf returns the baseline request id recorded (SetBaseline), ok
// false when it recorded none, or the thread no longer keeps it.
func (th *Thread) BaselineOf(id string) (data json.RawMessage, ok bool) {
	if th == nil || th.Baseline == nil || th.Baseline.Request != id {
		return nil, false
	}
	return th.Baseline.Data, true
}

// SetBaseline records data as the baseline of the thread's request id,
// in place of the one an earlier request recorded; data larger than
// MaxBaseline is not kept (it reports false).
func (th *Thread) SetBaseline(id string, data json.RawMessage) bool {
	if len(data) > MaxBaseline {
		return false
	}
	th.Baseline = &Baseline{Request: id, Data: data}
	return true
}

// SetTask records task as the upstream task of the thread's request id
// (one of its RequestIDs, as Update makes env's before its fn runs).
func (th *Thread) SetTask(id, task string) {
	if th.Tasks == nil {
		th.Tasks = map[string]string{}
	}
	th.Tasks[id] = task
}

// thread returns env's thread, made when c has none, with env's request
// appended to its turns unless they have it already (the tasks of the requests it no longer keeps
// dropped).
func (c *Conversation) thread(env *e2a.Envelope, now int64) *Thread {
	key := ThreadOf(env)
	if c.Threads == nil {
		c.Threads = map[string]*Thread{}
	}
	th := c.Threads[key]
	if th == nil {
		th = &Thread{}
		c.Threads[key] = th
	}
	if !slices.Contains(th.RequestIDs, env.RequestID) {
		th.RequestIDs = append(th.RequestIDs, env.RequestID)
		if len(th.RequestIDs) > MaxThreadTurns {
			th.RequestIDs = th.RequestIDs[len(th.RequestIDs)-MaxThreadTurns:]
		}
		for id := range th.Tasks {
			if !slices.Contains(th.RequestIDs, id) {
				delete(th.Tasks, id)
			}
		}
		if th.Baseline != nil && !slices.Contains(th.RequestIDs, th.Baseline.Request) {
			th.Baseline = nil
		}
	}
	th.Last = now
	for len(c.Threads) > MaxThreads {
		oldest := ""
		for k, t := range c.Threads {
			if k != key && (oldest == "" || t.Last < c.Threads[oldest].Last) {
				oldest = k
			}
		}
		delete(c.Threads, oldest)
	}
	return th
}

// ThreadOf names the thread of its conversation env belongs to: its
// pipeline task (A2A's task, which several tasks of one context each
// have), else the conversation itself (an ACP session, an E2A session_id
// or context_id naming no task: the conversation's turns are one thread),
// "" when env names neither.
func ThreadOf(env *e2a.Envelope) string {
	if env.TaskID != "" {
		return "task:" + env.TaskID
	}
	kind, id, ok := ConversationOf(env)
	if !ok {
		return ""
	}
	return kind + ":" + id
}

// ConversationOf names the conversation env belongs to: its A2A context,
// else its session (ACP session, E2A session_id), else its task, else the
// request alone (a conversation of one turn, where a bridge still keeps the
// upstream's ids for a worker that takes the request over).
func ConversationOf(env *e2a.Envelope) (kind, id string, ok bool) {
	switch {
	case env.ContextID != "":
		return "context", env.ContextID, true
	case env.SessionID != "":
		return "session", env.SessionID, true
	case env.TaskID != "":
		return "task", env.TaskID, true
	case env.RequestID != "":
		return "request", env.RequestID, true
	}
	return "", "", false
}

// InConversation reports whether env belongs to a conversation a later
// request can continue (an A2A context, a session, a task). A request
// naming none is a conversation of its own one turn: no later request has
// its id, so an upstream that sends earlier turns (the HTTP and OpenAI
// upstreams' WithHistory) has none to read and none worth recording.
// Skipping it saves the record's read, read-again and write: three NATS
// round trips and a stored message per request.
func InConversation(env *e2a.Envelope) bool {
	kind, _, ok := ConversationOf(env)
	return ok && kind != "request"
}

// HistoryError is a failure to read or record the pipeline's own history
// of a conversation (history_unavailable): retryable, and not the
// upstream's. A nil err is nil.
func HistoryError(err error) error {
	if err == nil {
		return nil
	}
	return agent.Errorf("history_unavailable", true, "the conversation's earlier turns could not be read: %v", err)
}

// HistoryOption is an upstream's WithHistory option: set, given a pool and
// a conversation store (both needed; either missing is refused with
// ErrInvalidOption).
func HistoryOption[C any](pool string, c *Conversations, set func(*C)) func(*C) error {
	return option.Check(ErrInvalidOption, pool != "" && c != nil, set, "history needs a pool and a conversation store")
}

// MaxHistoryTurnsOption is an upstream's WithMaxHistoryTurns option: set,
// given n earlier turns in 0..MaxTurns (a conversation keeps no more;
// others are refused with ErrInvalidOption).
func MaxHistoryTurnsOption[C any](n int, set func(*C)) func(*C) error {
	return option.Check(ErrInvalidOption, n >= 0 && n <= MaxTurns, set, "max history turns %d (want 0..%d)", n, MaxTurns)
}

// DefaultMaxHistoryBytes is the default bound on the stored bytes of the
// earlier turns History reads (WithMaxHistoryBytes of the OpenAI bridge):
// 4 MiB, the newest turns that fit.
const DefaultMaxHistoryBytes = 4 << 20

// MaxHistoryBytesLimit bounds MaxHistoryBytesOption: 256 MiB.
const MaxHistoryBytesLimit = 256 << 20

// MaxHistoryBytesOption is an upstream's WithMaxHistoryBytes option: set,
// given a bound of n bytes in 0..MaxHistoryBytesLimit on the earlier turns
// read (History's maxBytes; others are refused with ErrInvalidOption).
func MaxHistoryBytesOption[C any](n int, set func(*C)) func(*C) error {
	return option.Check(ErrInvalidOption, n >= 0 && n <= MaxHistoryBytesLimit, set,
		"max history bytes %d (want 0..%d)", n, MaxHistoryBytesLimit)
}

// Conversations keeps conversations in the E2A_BRIDGE bucket. Keys are
// c.<pool>.<hash of the pool, the conversation's owner and the
// conversation>: a principal naming another's context or session id
// reaches a conversation of its own, never the other's. The owner is
// e2a.Envelope.Owner: the request's principal (user_id), or the principal
// whose task, context or session an admin's turn continues, as the ingress
// wrote it after its ownership check (e2a.DetailConversationOwner; no
// client can set it), so that an admin's answer or cancel reaches the
// owner's upstream task. It is safe for concurrent use; concurrent updates
// are serialized by compare-and-set.
type Conversations struct {
	kv jetstream.KeyValue
	js jetstream.JetStream
}

// OpenConversations creates or updates the E2A_BRIDGE bucket (cfg's
// replicas, storage and TasksTTL) and returns its store.
func OpenConversations(ctx context.Context, js jetstream.JetStream, cfg streams.Config) (*Conversations, error) {
	kvc, err := cfg.KeyValueConfig(streams.BridgeBucket)
	if err != nil {
		return nil, err
	}
	var kv jetstream.KeyValue
	err = streams.RetryPlacement(ctx, func(ctx context.Context) (err error) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, kvc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bridge: conversations bucket: %w", err)
	}
	return &Conversations{kv: kv, js: js}, nil
}

// JetStream is the store's JetStream context (the bridges read stored
// frames with its connection).
func (c *Conversations) JetStream() jetstream.JetStream { return c.js }

// key is the conversation's key, "" when env names none.
func conversationKey(pool string, env *e2a.Envelope) string {
	kind, id, ok := ConversationOf(env)
	if !ok {
		return ""
	}
	if subjects.ValidatePool(pool) != nil {
		return ""
	}
	h := sha256.New()
	for _, s := range []string{pool, env.Owner(), kind, id} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	// The pool in clear too: a pool's NATS user may be allowed its own
	// records only ($KV.E2A_BRIDGE.c.<pool>.*).
	return "c." + pool + "." + hex.EncodeToString(h.Sum(nil)[:20])
}

// Get returns env's conversation in pool (found false when it has none
// yet, or env names none).
func (c *Conversations) Get(ctx context.Context, pool string, env *e2a.Envelope) (conv Conversation, found bool, err error) {
	key := conversationKey(pool, env)
	if key == "" {
		return Conversation{}, false, nil
	}
	e, err := c.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Conversation{}, false, nil
	}
	if err != nil {
		return Conversation{}, false, fmt.Errorf("bridge: conversation: %w", err)
	}
	if err := json.Unmarshal(e.Value(), &conv); err != nil {
		return Conversation{}, false, fmt.Errorf("bridge: conversation record: %w", err)
	}
	if err := c.migrate(ctx, pool, env, &conv); err != nil {
		return Conversation{}, false, err
	}
	return conv, true, nil
}

// migrate reads a record earlier bridges wrote as this one writes it.
// A record without threads (an upstream task) gets its one thread: that
// of its last request, whose envelope is read (env's own thread when env
// is that request). A last request no longer stored, or of another
// owner's conversation, leaves the record without a thread: its upstream context is
// still the one the conversation's new tasks go to. A thread without
// Tasks (an upstream task) gets its upstream task as its last request's,
// the request that recorded it.
func (c *Conversations) migrate(ctx context.Context, pool string, env *e2a.Envelope, conv *Conversation) error {
	if err := c.migrateThreads(ctx, pool, env, conv); err != nil {
		return err
	}
	for _, th := range conv.Threads {
		if th == nil || th.Tasks != nil || th.UpstreamTaskID == "" || len(th.RequestIDs) == 0 {
			continue
		}
		th.SetTask(th.RequestIDs[len(th.RequestIDs)-1], th.UpstreamTaskID)
	}
	return nil
}

// migrateThreads gives a record without threads its one thread (migrate).
func (c *Conversations) migrateThreads(ctx context.Context, pool string, env *e2a.Envelope, conv *Conversation) error {
	n := len(conv.RequestIDs)
	if conv.Threads != nil || conv.UpstreamTaskID == "" || n == 0 {
		return nil
	}
	last := conv.RequestIDs[n-1]
	conv.Threads = map[string]*Thread{}
	key := ""
	if last == env.RequestID {
		key = ThreadOf(env)
	} else if subj, err := subjects.Request(pool, last); err == nil {
		m, err := streams.LastBySubject(ctx, c.js.Conn(), streams.RequestsStream, subj)
		switch {
		case errors.Is(err, streams.ErrNoMessages):
		case err != nil:
			return fmt.Errorf("bridge: conversation: the last request of an earlier record: %w", err)
		default:
			if prev, err := e2a.FromJSON(m.Data); err == nil && prev.Owner() == env.Owner() {
				key = ThreadOf(prev)
			}
		}
	}
	if key != "" {
		conv.Threads[key] = &Thread{UpstreamTaskID: conv.UpstreamTaskID, UpstreamContextID: conv.UpstreamContextID,
			UpstreamTaskOpen: conv.UpstreamTaskOpen, RequestIDs: []string{last}}
	}
	return nil
}

// Update applies fn to env's conversation in pool (the zero Conversation
// when there is none yet) and stores the result, retrying on a concurrent
// update. A request that names no conversation is a no-op. The request's
// id is appended to RequestIDs and to its thread's (the thread made when
// there is none, Conversation.Thread(env)) before fn sees it, unless they
// have it already: a retried upstream call or a worker taking the request
// over is the same turn, recorded once.
//
// A failure of the bucket's cluster (no server answering while the
// bucket's leader is elected, an attempt unanswered: streams.Retryable) is
// retried for up to maxUpdateWait (or until ctx ends), each attempt
// bounded by kvAttemptTimeout: a NATS node's crash leaves E2A_BRIDGE
// without a leader for seconds, and a turn not recorded then lost its
// upstream ids (the a2a bridge's next turn of the conversation could not
// find its upstream task) or its place in the history.
func (c *Conversations) Update(ctx context.Context, pool string, env *e2a.Envelope, fn func(*Conversation)) error {
	key := conversationKey(pool, env)
	if key == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, maxUpdateWait)
	defer cancel()
	failures := 0
	for attempt := 0; attempt < conversationAttempts; {
		if err := sleepctx.Backoff(ctx, attempt, time.Millisecond, 32*time.Millisecond); err != nil {
			return fmt.Errorf("bridge: conversation update: %w", err)
		}
		stored, err := c.updateOnce(ctx, pool, env, key, fn)
		switch {
		case err == nil && stored:
			return nil
		case err == nil: // another update came first
			attempt++
		case ctx.Err() == nil && streams.Retryable(err):
			failures++
			if werr := sleepctx.Backoff(ctx, failures, 50*time.Millisecond, time.Second); werr != nil {
				return fmt.Errorf("%w (then %w)", err, werr)
			}
		default:
			return err
		}
	}
	return errors.New("bridge: conversation update: too many concurrent updates")
}

// maxUpdateWait bounds an Update's retries of transient failures: above
// a NATS cluster's election after a server's crash or a quorum's return
// (4-9 s measured: docs/recovery.md, and TestConversationUpdateWaitsForTheBucketsLeader).
const maxUpdateWait = 20 * time.Second

// kvAttemptTimeout bounds each read and write of an Update's attempt: a
// write sent to a server that stops under it is never answered, and the
// next attempt reaches the bucket's new leader.
const kvAttemptTimeout = 2 * time.Second

// updateOnce is one attempt of Update: stored false (and no error) when
// another update of key came first.
func (c *Conversations) updateOnce(ctx context.Context, pool string, env *e2a.Envelope, key string, fn func(*Conversation)) (stored bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, kvAttemptTimeout)
	defer cancel()
	var conv Conversation
	var rev uint64
	e, err := c.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return false, fmt.Errorf("bridge: conversation: %w", err)
	default:
		rev = e.Revision()
		if err := json.Unmarshal(e.Value(), &conv); err != nil {
			return false, fmt.Errorf("bridge: conversation record: %w", err)
		}
		if err := c.migrate(ctx, pool, env, &conv); err != nil {
			return false, err
		}
	}
	// A request already recorded (a retried upstream call, a worker
	// taking the request over, an attempt stored but unanswered) is the
	// same turn: recorded once.
	if !slices.Contains(conv.RequestIDs, env.RequestID) {
		conv.RequestIDs = append(conv.RequestIDs, env.RequestID)
		if len(conv.RequestIDs) > MaxTurns {
			conv.RequestIDs = conv.RequestIDs[len(conv.RequestIDs)-MaxTurns:]
		}
	}
	now := time.Now()
	conv.thread(env, now.UnixNano())
	fn(&conv)
	conv.Updated = now.UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(conv)
	if rev == 0 {
		_, err = c.kv.Create(ctx, key, b)
	} else {
		_, err = c.kv.Update(ctx, key, b, rev)
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyExists), isWrongSeq(err):
		return false, nil
	}
	return false, fmt.Errorf("bridge: conversation update: %w", err)
}

// conversationAttempts bounds the compare-and-sets of one Update: the
// concurrent turns of one conversation (a client fanning out requests of
// one session) each write its record, and one that another came first
// on tries again after sleepctx.Backoff (below 1 ms, doubling to 32 ms):
// 64 writers at once all land (TestConversationUpdatesUnderContention).
const conversationAttempts = 64

func isWrongSeq(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Turn is one earlier turn of a conversation as the pipeline stored it:
// the request's envelope and its final frame (nil while it runs or when
// its frames have expired).
type Turn struct {
	Envelope *e2a.Envelope
	Final    *e2a.Response
}

// History returns the stored turns of conv's request ids in pool, oldest
// first, each once: those before env's own request when conv lists it (a
// retried call or a redelivered request is the same turn: the turns
// recorded since are later ones), leaving out any whose envelope is no
// longer stored. Only requests of env's conversation
// owner are returned (e2a.Envelope.Owner: the conversation key already
// scopes them; each envelope's owner is checked again), so an admin's
// turn in another principal's session gets that session's turns, and the
// owner's turns get the admin's turns in it, never another principal's.
//
// The turns are read newest first, and their stored bytes (each turn's
// envelope and its final frame, as stored) are at most maxBytes: the turn
// that would pass it ends the reading, left out with every older one (cut
// is then true), its envelope never decoded. A conversation of MaxTurns
// large turns so costs one request about maxBytes, not every stored turn.
func (c *Conversations) History(ctx context.Context, pool string, env *e2a.Envelope, conv Conversation, maxBytes int) (turns []Turn, cut bool, err error) {
	nc := c.js.Conn()
	seen := map[string]bool{env.RequestID: true}
	ids := conv.RequestIDs
	if i := slices.Index(ids, env.RequestID); i >= 0 {
		ids = ids[:i]
	}
	size := 0
	for k := len(ids) - 1; k >= 0; k-- {
		id := ids[k]
		if seen[id] {
			// The request being served, or one a record written before
			// Update recorded each request once lists again.
			continue
		}
		seen[id] = true
		reqSubj, err := subjects.Request(pool, id)
		if err != nil {
			continue
		}
		m, err := streams.LastBySubject(ctx, nc, streams.RequestsStream, reqSubj)
		if errors.Is(err, streams.ErrNoMessages) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("bridge: history: %w", err)
		}
		if size+len(m.Data) > maxBytes {
			cut = true
			break
		}
		prev, err := e2a.FromJSON(m.Data)
		if err != nil || prev.Owner() != env.Owner() {
			continue
		}
		final, n, err := c.final(ctx, id)
		if err != nil {
			return nil, false, fmt.Errorf("bridge: history: %w", err)
		}
		if size+len(m.Data)+n > maxBytes {
			cut = true
			break
		}
		size += len(m.Data) + n
		turns = append(turns, Turn{Envelope: prev, Final: final})
	}
	slices.Reverse(turns)
	return turns, cut, nil
}

// Final returns the final frame of the request id (nil while it runs, or
// when its frames have expired).
func (c *Conversations) Final(ctx context.Context, id string) (*e2a.Response, error) {
	f, _, err := c.final(ctx, id)
	return f, err
}

// final is Final with the bytes of the frame as stored (0 for none).
func (c *Conversations) final(ctx context.Context, id string) (*e2a.Response, int, error) {
	respSubj, err := subjects.Response(id)
	if err != nil {
		return nil, 0, err
	}
	r, err := streams.LastBySubject(ctx, c.js.Conn(), streams.ResponsesStream, respSubj)
	if errors.Is(err, streams.ErrNoMessages) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	last, _, err := e2a.LastInBurst(r.Header.Get(subjects.HeaderFrames), r.Data)
	if err != nil {
		return nil, 0, nil
	}
	if f, err := e2a.ResponseFromJSON(last); err == nil && f.IsFinal {
		return f, len(last), nil
	}
	return nil, 0, nil
}

// Interrupted reports whether the upstream task of env's thread waits
// for env's message: the thread's last turn other than env's ended
// input-required or auth-required (its final frame says so), or an
// earlier bridge recorded it open. Another task of the conversation,
// interrupted or not, is not env's: env's message goes to its own task's
// upstream task, or starts a new one.
func (c *Conversations) Interrupted(ctx context.Context, env *e2a.Envelope, conv Conversation) (bool, error) {
	th := conv.Thread(env)
	if th == nil || th.UpstreamTaskID == "" {
		return false, nil
	}
	if th.UpstreamTaskOpen {
		return true, nil
	}
	ids := th.RequestIDs
	if n := len(ids); n > 0 && ids[n-1] == env.RequestID {
		ids = ids[:n-1]
	}
	if len(ids) == 0 {
		return false, nil
	}
	f, err := c.Final(ctx, ids[len(ids)-1])
	if err != nil || f == nil {
		return false, err
	}
	_, _, open := f.Interrupt()
	return open, nil
}
