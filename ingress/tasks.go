package ingress

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// ErrTaskNotFound reports a task, context or session the store does not know.
var ErrTaskNotFound = errors.New("ingress: task not found")

// MaxRequestsPerTask bounds the request ids kept per task record; the
// oldest are dropped first (TaskRecord.Dropped counts them: a task read
// then says its history is not whole; their requests stay in the streams
// and the audit copy, where `e2a replay` finds them).
const MaxRequestsPerTask = 256

// TaskRecord maps an A2A/AgentVault task or an ACP session onto the requests
// that served it, in order. It is what tasks/get, tasks/cancel,
// tasks/resubscribe and continued tasks read; every replica shares it
// through the E2A_TASKS bucket.
//
// A task the adapter creates is named by its first request's id
// (normalizer: DetailTaskCreated), and that request stands for its record
// until a second turn: the first turn writes nothing to the bucket (its
// request's subject and its frames' are its only subjects), and every read
// of a task without a record finds its first request in E2A_REQUESTS
// ([TaskStore.Get]: the envelope's user_id is the owner). The second turn
// creates the record from it (a create, the compare-and-set that orders it
// after the first); later turns update it on its revision.
type TaskRecord struct {
	ID        string `json:"id"`
	ContextID string `json:"context_id,omitempty"`
	Protocol  string `json:"protocol"`
	Pool      string `json:"pool"`
	Principal string `json:"principal,omitempty"`
	// Owner is the owner of the task's conversation when another than
	// Principal: the context's owner, for a task an admin started in
	// another principal's A2A context (its first turn's e2a.Envelope.Owner,
	// read by firstTurnRecord). turnOwner names it in the task's later
	// turns.
	Owner      string   `json:"owner,omitempty"`
	RequestIDs []string `json:"request_ids"`
	// Dropped counts the oldest requests no longer in RequestIDs (past
	// MaxRequestsPerTask).
	Dropped int `json:"dropped,omitempty"`
	// Writers are the other principals whose turns the record lists (an
	// admin's answer or cancel of the principal's task): their requests are
	// the record's too once only their frames are left to tell their author
	// (host.Session.Writers). At most maxWriters, the latest kept.
	Writers []string `json:"writers,omitempty"`
	// CancelTurn is the request whose cancel ends the task: its cancel
	// turn (cancelInterrupted) once appended, or the running turn that
	// tasks/cancel cancels (markCancelled, before its cancel is sent).
	// While it is the newest request the task is canceled, or will be once
	// that request's final frame is stored: an A2A message is refused as to
	// a task in a terminal state (appendAfter), at once after a cancel
	// turn, once that final frame is stored after a marked turn
	// (CancelMarked). Only the append reads it; every reader of the task's
	// state reads the frames.
	CancelTurn string `json:"cancel_turn,omitempty"`
	// CancelMarked is set when CancelTurn is a running (or queued) turn
	// that tasks/cancel marked (markCancelled), not a cancel turn: that
	// cancel may yet find it ended otherwise (completed, or interrupted),
	// so an A2A message that meets the mark awaits the marked turn's end
	// rather than be refused at once (Server.appendPastMark, markedError).
	// A record an older replica wrote has none: its mark refuses at once.
	CancelMarked bool `json:"cancel_marked,omitempty"`
	// CancelBefore, of an ACP session, is when the latest session/cancel
	// of the session was received (Unix nanoseconds, by the clock of the
	// replica that received it; host.SessionCanceler): a turn received
	// before it and appended after it is cancelled once published
	// (publishTurnIf), as the cancel would have, had it found the turn in
	// the record. It only grows; 0 in a session never cancelled.
	CancelBefore int64 `json:"cancel_before,omitempty"`
	// ContextClaimed is a time at or before which the claim of the task's
	// A2A context (KindContext, ContextID) was last written, as the task's
	// writes last found it: once it is older than
	// TaskStore.contextRefresh, the task's next write reads the claim and
	// writes it again if it is that old (keepContext).
	ContextClaimed string `json:"context_claimed,omitempty"`
	Created        string `json:"created"`
	Updated        string `json:"updated"`
	// rev is the record's revision in the bucket that appendAfter wrote
	// (0: not known), for when that write was stored (appendedAt).
	rev uint64
}

// maxWriters bounds TaskRecord.Writers.
const maxWriters = 8

// addWriter records by among the record's writers when it is not its
// principal (an admin's turn).
func (t *TaskRecord) addWriter(by tenant.Principal) {
	if by.Open || by.ID == "" || by.ID == t.Principal || slices.Contains(t.Writers, by.ID) {
		return
	}
	t.Writers = append(t.Writers, by.ID)
	if len(t.Writers) > maxWriters {
		t.Writers = t.Writers[len(t.Writers)-maxWriters:]
	}
}

// LastRequest is the newest request of the task ("" when none).
func (t *TaskRecord) LastRequest() string {
	if len(t.RequestIDs) == 0 {
		return ""
	}
	return t.RequestIDs[len(t.RequestIDs)-1]
}

// cancelled reports whether the task's newest request is its cancel turn.
func (t *TaskRecord) cancelled() bool {
	return t.CancelTurn != "" && t.LastRequest() == t.CancelTurn
}

// Before returns the request that precedes requestID in the record: the
// turn it runs after ("" when requestID is the first, or not in the
// record).
func (t *TaskRecord) Before(requestID string) string {
	i := slices.Index(t.RequestIDs, requestID)
	if i < 1 {
		return ""
	}
	return t.RequestIDs[i-1]
}

// TaskStore keeps TaskRecords in the E2A_TASKS KV bucket. Keys are
// "<kind>.<token>" where token is the id escaped by the subjects rule, so any
// id is a valid key. It is safe for concurrent use; concurrent appends from
// several replicas are serialized by compare-and-set on the key's revision.
type TaskStore struct {
	kv  jetstream.KeyValue
	nc  *nats.Conn
	now func() time.Time
	// turns caches the first-turn records a listing reads (listTasks).
	turns firstTurns
	// direct reads the turn a record lists after another (laterTurn), on
	// a reply inbox subscribed with the store (NewTaskStore).
	direct laterReader
	// appending, set by tests only (SetAppendHook), is called when the
	// append of a turn starts (appendAfter), before the record is read: a
	// turn it holds is received and not yet recorded.
	appending atomic.Pointer[func(kind, id, requestID string)]
	// history finds a request E2A_REQUESTS no longer holds in the audit
	// history (egress.Service.HistoricRequestMsg; nil: none), for a
	// one-turn task still running when its request aged out (agedFirstTurn).
	history func(ctx context.Context, id string) (streams.RawMsg, bool, error)
	// contextRefresh is the age past which a write of a task writes the
	// claim of its context again (keepContext; a new task of the context
	// does at half of it: claimContext); negative when records never
	// expire.
	contextRefresh time.Duration
	// ttl is the bucket's TTL (0: records never expire, or not known):
	// the records of running turns are renewed at a quarter of it
	// (Server.keepRecord).
	ttl time.Duration
}

// Task record kinds.
const (
	KindTask    = "task"
	KindSession = "session"
	// KindContext records who owns an A2A context id (no request ids).
	KindContext = "context"
)

// NewTaskStore opens the E2A_TASKS bucket (provisioned by streams.Apply)
// and subscribes the reply inbox of the store's direct gets (laterTurn),
// which it keeps as long as the connection: one subscription of js's
// connection, made here, not at a first read, so that the connection's
// subscriptions do not grow at some later stream's end.
func NewTaskStore(ctx context.Context, js jetstream.JetStream) (*TaskStore, error) {
	kv, err := js.KeyValue(ctx, streams.TasksBucket)
	if err != nil {
		return nil, fmt.Errorf("ingress: task store: %w", err)
	}
	direct, err := newLaterReader(js.Conn())
	if err != nil {
		return nil, fmt.Errorf("ingress: task store: %w", err)
	}
	ts := &TaskStore{kv: kv, nc: js.Conn(), now: time.Now, direct: direct}
	if st, err := js.Stream(ctx, streams.RequestsStream); err == nil {
		ts.turns.maxAge = st.CachedInfo().Config.MaxAge
	}
	ts.contextRefresh = 0 // the bucket's TTL unknown: every write checks
	if st, err := kv.Status(ctx); err == nil {
		ts.contextRefresh = contextRefresh(st.TTL(), ts.turns.maxAge)
		ts.ttl = st.TTL()
	}
	return ts, nil
}

// contextRefresh is TaskStore.contextRefresh for a bucket whose records
// live ttl after their last write (0: forever) and requests that live
// maxAge in E2A_REQUESTS: half of what ttl leaves past maxAge. A claim is
// then written at most that long before each write of a task of its
// context, and so lives at least maxAge and as long again past it: past
// the task's requests in the hot streams.
func contextRefresh(ttl, maxAge time.Duration) time.Duration {
	if ttl <= 0 {
		return -1
	}
	return max(0, (ttl-maxAge)/2)
}

// expectNew is the header of a write that only an empty key accepts (read
// only: nats.go reads a message's header map, never changes it).
var expectNew = nats.Header{jetstream.ExpectedLastSubjSeqHeader: []string{"0"}}

// create writes data under key when the key holds nothing yet: one publish
// of the record with expected last subject sequence 0, its PubAck read by
// streams.Publish (without the reflective decode jetstream's Create does).
// Any refusal or failure is left to jetstream's Create, which tells a key
// that exists (ErrKeyExists) from one whose last entry is a delete marker
// (written over) and from the connection's errors; an attempt that landed
// after all is then found as the key existing.
func (s *TaskStore) create(ctx context.Context, key string, data []byte) error {
	_, err := s.createRev(ctx, key, data)
	return err
}

// createRev is create, returning the revision written.
func (s *TaskStore) createRev(ctx context.Context, key string, data []byte) (uint64, error) {
	m := &nats.Msg{Subject: subjects.KV(streams.TasksBucket, key), Header: expectNew, Data: data}
	if ack, err := streams.Publish(ctx, s.nc, m); err == nil {
		return ack.Seq, nil
	}
	return s.kv.Create(ctx, key, data)
}

// taskKey refuses an id outside the request-id grammar
// (subjects.ValidateRequestID): no such task, context or session can exist.
func taskKey(kind, id string) (string, error) {
	if err := subjects.ValidateRequestID(id); err != nil {
		return "", err
	}
	tok, err := subjects.EncodeID(id)
	if err != nil {
		return "", err
	}
	return kind + "." + tok, nil
}

// Get returns the record of kind/id, or ErrTaskNotFound.
func (s *TaskStore) Get(ctx context.Context, kind, id string) (*TaskRecord, error) {
	key, err := taskKey(kind, id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTaskNotFound, err)
	}
	var value []byte
	e, err := s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		// A direct get may be answered by a replica a write behind: a
		// record created a moment ago (ACP session/new, then its first
		// session/prompt) would read as missing. The bucket's leader
		// confirms the absence.
		if value, err = s.leaderValue(ctx, key); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		value = e.Value()
	}
	if value == nil && kind == KindTask {
		return s.firstTurn(ctx, id)
	}
	if value == nil {
		return nil, ErrTaskNotFound
	}
	return decodeRecord(key, value)
}

// recorded returns the record the bucket holds for kind/id, nil when none
// (a task named by its first request, ErrTaskNotFound's other case, is
// not looked for): one direct get, which a replica a write behind may
// answer.
func (s *TaskStore) recorded(ctx context.Context, kind, id string) (*TaskRecord, error) {
	key, err := taskKey(kind, id)
	if err != nil {
		return nil, nil
	}
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeRecord(key, e.Value())
}

// laterTurn is the request the record kind/id lists after after
// (TaskRecord.later), read the cheapest way, for the read every streamed
// turn of a task pays at its end (LaterTurn): laterReader.later, on the
// store's reply inbox. A replica a write behind may answer it, as
// recorded's.
func (s *TaskStore) laterTurn(ctx context.Context, kind, id, after string) (next string, rec *TaskRecord, err error) {
	return s.direct.later(ctx, kind, id, after)
}

// laterReader reads the turn a task record lists after another with one
// direct get, on a reply inbox (a streams.DirectGetter) subscribed when it
// is made (newLaterReader) and kept as long as its connection: the task
// store's (laterTurn) and TaskTurns' (the push stage's). Made at a first
// read, the subscription made the connection's subscription count grow at
// some stream's end. Safe for concurrent use.
type laterReader struct{ d *streams.DirectGetter }

// newLaterReader subscribes the reply inbox of a laterReader on nc; it
// fails when nc cannot subscribe (closed, draining).
func newLaterReader(nc *nats.Conn) (laterReader, error) {
	d, err := streams.NewDirectGetter(nc)
	return laterReader{d: d}, err
}

// later is the request the record kind/id lists after after
// (TaskRecord.later): one direct get naming the key in its subject, not
// the key-value API's request, and the record scanned for its request ids
// (laterScan) rather than decoded when no turn follows (the common case);
// rec is the decoded record when one does (nil otherwise). A replica a
// write behind may answer it.
func (r laterReader) later(ctx context.Context, kind, id, after string) (next string, rec *TaskRecord, err error) {
	key, err := taskKey(kind, id)
	if err != nil {
		return "", nil, nil
	}
	msg, err := r.d.GetLast(ctx, streams.KVStream(streams.TasksBucket), subjects.KV(streams.TasksBucket, key))
	if err != nil || msg == nil {
		return "", nil, err
	}
	switch msg.Header.Get("KV-Operation") {
	case "DEL", "PURGE":
		return "", nil, nil // deleted
	}
	if next, ok := laterScan(msg.Data, after); ok && next == "" {
		return "", nil, nil
	}
	rec, err = decodeRecord(key, msg.Data)
	if err != nil {
		return "", nil, err
	}
	return rec.later(after), rec, nil
}

// AppendNew is Append for a task the caller has just made up (a new task
// id): it creates the record in one step, without reading it first, and is
// Append when the record exists after all.
func (s *TaskStore) AppendNew(ctx context.Context, kind string, base TaskRecord, requestID string, by tenant.Principal) (*TaskRecord, error) {
	rec, _, err := s.appendNew(ctx, kind, base, requestID, by)
	return rec, err
}

// appendNew is AppendNew, reporting whether requestID was added (false: the
// record held it already).
func (s *TaskStore) appendNew(ctx context.Context, kind string, base TaskRecord, requestID string, by tenant.Principal) (*TaskRecord, bool, error) {
	return s.appendNewIf(ctx, kind, base, requestID, by, turnCond{})
}

// appendNewIf is appendNew, requestID appended to a record that exists
// only as cond asks (appendAfter).
func (s *TaskStore) appendNewIf(ctx context.Context, kind string, base TaskRecord, requestID string, by tenant.Principal, cond turnCond) (*TaskRecord, bool, error) {
	key, err := taskKey(kind, base.ID)
	if err != nil {
		return nil, false, err
	}
	at := s.now()
	now := e2a.FormatTime(at)
	rec := base
	rec.RequestIDs = []string{requestID}
	rec.Created, rec.Updated = now, now
	rec.ContextClaimed = s.claimedBefore(rec.ContextID, at)
	data, _ := json.Marshal(rec)
	if err := s.create(ctx, key, data); err == nil {
		return &rec, true, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, false, err
	}
	return s.appendAfter(ctx, kind, base, requestID, by, cond)
}

// Append adds requestID to the record kind/id, creating it with the other
// fields when it does not exist. Retries on a concurrent update. A request
// the record holds already is not added again (a retry): the record is
// returned as it is. An existing record that by may not continue
// (tenant.Write on its principal) is left alone and ErrTaskNotFound
// returned: the check is made on the revision the update is conditioned
// on, so no concurrent writer slips past it.
func (s *TaskStore) Append(ctx context.Context, kind string, base TaskRecord, requestID string, by tenant.Principal) (*TaskRecord, error) {
	rec, _, err := s.appendRequest(ctx, kind, base, requestID, by)
	return rec, err
}

// appendRequest is Append, reporting whether requestID was added.
func (s *TaskStore) appendRequest(ctx context.Context, kind string, base TaskRecord, requestID string, by tenant.Principal) (*TaskRecord, bool, error) {
	return s.appendAfter(ctx, kind, base, requestID, by, turnCond{})
}

// errRecordMoved reports a conditional append (appendAfter) refused: the
// record's newest request is no longer the one it was to follow.
var errRecordMoved = errors.New("ingress: the task's newest request changed")

// turnCond is what the append of a turn asks of its record (appendAfter),
// checked on the revision the write is conditioned on.
type turnCond struct {
	// after, when set, must be the record's newest request (the first
	// request of a task without a record: firstTurn), else errRecordMoved.
	after string
	// open refuses the turn when the record's newest request is the one
	// whose cancel ends the task (TaskRecord.CancelTurn: its cancel turn,
	// or a running turn tasks/cancel cancels): ErrTaskTerminal. An A2A
	// message: a task in a terminal state takes none.
	open bool
	// cancel records the turn as the task's cancel turn.
	cancel bool
	// overMark is a turn tasks/cancel marked (TaskRecord.CancelMarked)
	// whose final frame is stored and interrupts it (input-required,
	// auth-required): the cancel stopped nothing, the task is open, and the
	// mark, which says the task ends canceled with that turn, is void. An
	// open turn is appended past it (the mark taken off with it) rather than
	// refused (Server.appendPastMark).
	overMark string
	// protocol, when set, must be the record's protocol (a workflow
	// executionId joins only a workflow execution's record), else
	// errOtherProtocol with the record, nothing written.
	protocol string
	// nonWorkflow, set for a turn whose envelope's method is not
	// normalizer.MethodWorkflowExecute (publishTurnIf), refuses it on a
	// workflow execution's record (protocol normalizer.ProtocolWorkflow:
	// the executionId of an execution, indexExecution's):
	// workflowTurnError, nothing written. Appended, it would be the
	// execution's next turn, run by the workflow pool, and the execution
	// would read as that turn's answer.
	nonWorkflow bool
	// pool, when set, must be the record's pool (one naming none takes
	// any), else poolTurnError, nothing written: a turn sent through
	// another pool's door (publishTurn). The retry of a turn the record
	// holds is not refused (answered as its duplicate), nor the first
	// turn of an ACP session (see turnPool).
	pool string
	// fresh is the first turn of a new task named by an id the client
	// chose (publishTurnIf): a record that exists must list no request
	// (one whose first turn's publish failed, taken out again), else
	// ErrConflict, nothing written: the id names a task already (an E2A
	// task_id, an earlier task's record outliving its requests), whose
	// turn the new task's first would be. Its retry, which the record
	// lists, is returned as it is before the check.
	fresh bool
	// turnPool is the pool the turn goes to. The first turn of an ACP
	// session makes it the session's pool: session/new ran no agent (its
	// record holds the pool its own call was routed to), the session's
	// turns, their history, are that pool's from then on.
	turnPool string
	// waiting, when set, bounds the turns of the record that wait behind
	// its running turn (WithMaxWaitingTurns): ErrTooManyTurns, nothing
	// written, when the turn would make more than waiting.max of them
	// wait (waitBound.refusal). Not for a cancel turn, which must always
	// be taken.
	waiting *waitBound
}

// waitBound is turnCond.waiting: at most max turns of a record wait
// behind its running turn, which unfinished tells (Server.turnUnfinished:
// no final frame stored). ended is the replica's memo of the turns found
// ended, by record.
type waitBound struct {
	max        int
	unfinished func(ctx context.Context, requestID string) (bool, error)
	ended      *endedTurns
}

// refusal is ErrTooManyTurns when rec (its key in E2A_TASKS, by which
// the memo knows it), with the new turn appended last,
// lists max+1 turns before it and the earliest of those (the turn max+1
// places before the new one) has not ended: turns run in order, so it
// and the max after it are all unfinished, one running and max waiting,
// and the new turn would be one more waiting. Checked only when the
// record lists that many turns, with no read when the memo holds a turn
// of the record at or after that one found ended (every turn before an
// ended one has ended); else it reads the newest turn before the new one
// (ended: none waits, and the memo then covers the next max turns: a
// session whose turns come one after another pays a read every max+1
// turns), and, when that one runs, the earliest of the max+1. It is
// checked on the revision the append is conditioned on, so two turns
// appended at once are counted one after the other; a turn recorded
// whose publish has not landed yet counts as ended when its id is the
// client's (Server.turnUnfinished), so the bound may be passed by such
// turns appended within a publish's time of each other.
func (b *waitBound) refusal(ctx context.Context, key string, rec *TaskRecord) error {
	if b == nil || b.max <= 0 {
		return nil
	}
	i := len(rec.RequestIDs) - 1 - (b.max + 1)
	if i < 0 || b.ended.covers(key, rec.RequestIDs, i) {
		return nil
	}
	for _, j := range []int{len(rec.RequestIDs) - 2, i} {
		unfinished, err := b.unfinished(ctx, rec.RequestIDs[j])
		if err != nil {
			return fmt.Errorf("%w: task state: %v", ErrBackpressure, err)
		}
		if !unfinished {
			b.ended.put(key, rec.RequestIDs[j])
			return nil
		}
	}
	return fmt.Errorf("%w (at most %d)", ErrTooManyTurns, b.max)
}

// endedTurns is a replica's memo of one turn found ended per record
// (waitBound), at most maxEndedTurns records: a turn that ended stays
// ended, so the memo is never wrong, only incomplete.
type endedTurns struct {
	mu sync.Mutex
	m  map[string]string
}

// maxEndedTurns bounds the records endedTurns remembers (an arbitrary one
// is forgotten for a new one past it).
const maxEndedTurns = 4096

// covers reports whether the memo holds a turn of the record key that is
// ids[i] or a later one of ids.
func (e *endedTurns) covers(key string, ids []string, i int) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	id, ok := e.m[key]
	e.mu.Unlock()
	return ok && slices.Index(ids, id) >= i
}

// put remembers requestID, a turn of the record key, as ended.
func (e *endedTurns) put(key, requestID string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]string{}
	}
	if _, ok := e.m[key]; !ok && len(e.m) >= maxEndedTurns {
		for k := range e.m {
			delete(e.m, k)
			break
		}
	}
	e.m[key] = requestID
}

// poolRefusal is poolTurnError when cond.pool is not rec's pool (kind its
// kind); nil for a session without turns yet (turnCond.turnPool).
func (cond turnCond) poolRefusal(kind string, rec *TaskRecord) error {
	if kind == KindSession && len(rec.RequestIDs) == 0 {
		return nil
	}
	if cond.pool != "" && rec.Pool != "" && rec.Pool != cond.pool {
		return poolTurnError{kind: kind, id: rec.ID, pool: rec.Pool}
	}
	return nil
}

// protocolRefusal is why cond refuses a turn of rec for the record's
// protocol, nil when it takes it: errOtherProtocol (turnCond.protocol),
// workflowTurnError (turnCond.nonWorkflow).
func (cond turnCond) protocolRefusal(rec *TaskRecord) error {
	switch {
	case cond.protocol != "" && rec.Protocol != cond.protocol:
		return errOtherProtocol
	case cond.nonWorkflow && rec.Protocol == normalizer.ProtocolWorkflow:
		return workflowTurnError{id: rec.ID}
	}
	return nil
}

// refusal is why cond refuses a turn after rec's newest request (key
// its record's key), nil when it takes it.
func (cond turnCond) refusal(rec *TaskRecord, key string) error {
	if cond.open && rec.cancelled() {
		switch {
		case !rec.CancelMarked:
			return taskTerminal(rec.ID) // its cancel turn: canceled
		case rec.CancelTurn != cond.overMark:
			return markedError{id: rec.ID, turn: rec.CancelTurn}
		}
	}
	if cond.after != "" && rec.LastRequest() != cond.after {
		return fmt.Errorf("%w: task %s", errRecordMoved, key)
	}
	if cond.fresh && len(rec.RequestIDs) > 0 {
		return fmt.Errorf("%w: task %s exists", ErrConflict, rec.ID)
	}
	return nil
}

// markedError is the refusal of an A2A message (turnCond.open) by the
// mark of the running turn turn of the task id that tasks/cancel is
// cancelling (TaskRecord.CancelMarked): ErrTaskTerminal, as the task is
// canceled once that turn's final frame is stored, unless the cancel
// finds it ended otherwise; Server.appendPastMark awaits that end.
type markedError struct{ id, turn string }

func (e markedError) Error() string { return taskTerminal(e.id).Error() }

func (e markedError) Unwrap() error { return ErrTaskTerminal }

// errOtherProtocol reports a conditional append (appendAfter, with
// turnCond.protocol) refused: the record is a task of another protocol.
var errOtherProtocol = errors.New("ingress: the task is another protocol's")

// appendAfter is appendRequest, requestID appended only as cond asks;
// when it refuses, nothing is written. A record that holds requestID
// already is returned as it is (a retry).
func (s *TaskStore) appendAfter(ctx context.Context, kind string, base TaskRecord, requestID string, by tenant.Principal, cond turnCond) (*TaskRecord, bool, error) {
	key, err := taskKey(kind, base.ID)
	if err != nil {
		return nil, false, err
	}
	if f := s.appending.Load(); f != nil {
		(*f)(kind, base.ID, requestID)
	}
	for attempt := 0; attempt < maxAppendAttempts; attempt++ {
		if err := updateBackoff(ctx, attempt); err != nil {
			return nil, false, err
		}
		at := s.now()
		now := e2a.FormatTime(at)
		e, err := s.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			rec, write, err := s.newRecord(ctx, kind, base, requestID, by, now)
			if err != nil {
				return nil, false, err
			}
			if err := cond.protocolRefusal(rec); err != nil {
				return rec, false, err
			}
			if !write {
				return rec, false, nil // the first turn again: its request is the record
			}
			if err := cond.poolRefusal(kind, rec); err != nil {
				return nil, false, err
			}
			if cond.after != "" && rec.Before(requestID) != cond.after {
				return nil, false, fmt.Errorf("%w: task %s", errRecordMoved, key)
			}
			if cond.cancel {
				rec.CancelTurn, rec.CancelMarked = requestID, false
			}
			if err := s.keepContext(ctx, kind, rec, by, at); err != nil {
				return nil, false, err
			}
			data, _ := json.Marshal(rec)
			rev, err := s.createRev(ctx, key, data)
			if err != nil {
				if errors.Is(err, jetstream.ErrKeyExists) {
					continue
				}
				return nil, false, err
			}
			rec.rev = rev
			return rec, true, nil
		case err != nil:
			return nil, false, err
		}
		var rec TaskRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return nil, false, err
		}
		if !by.Allows(tenant.Write, rec.Principal) {
			return nil, false, ErrTaskNotFound
		}
		if err := cond.protocolRefusal(&rec); err != nil {
			return &rec, false, err
		}
		if slices.Contains(rec.RequestIDs, requestID) {
			return &rec, false, nil // idempotent retry
		}
		if err := cond.addTurn(kind, &rec, key, requestID, base.ContextID, by); err != nil {
			return nil, false, err
		}
		if err := cond.waiting.refusal(ctx, key, &rec); err != nil {
			return nil, false, err
		}
		if err := s.keepContext(ctx, kind, &rec, by, at); err != nil {
			return nil, false, err
		}
		rec.Updated = now
		if ok, err := s.update(ctx, key, &rec, e.Revision()); err != nil {
			return nil, false, err
		} else if ok {
			return &rec, true, nil
		}
	}
	return nil, false, fmt.Errorf("ingress: task %s: too many concurrent updates", key)
}

// addTurn appends requestID, by's turn, to rec, a record that exists, as
// cond asks (appendAfter); when the record's pool or cond refuses it,
// rec is left as it was. contextID is the task's context when the record
// holds none.
func (cond turnCond) addTurn(kind string, rec *TaskRecord, key, requestID, contextID string, by tenant.Principal) error {
	if err := cond.poolRefusal(kind, rec); err != nil {
		return err
	}
	if err := cond.refusal(rec, key); err != nil {
		return err
	}
	if kind == KindSession && len(rec.RequestIDs) == 0 && cond.turnPool != "" {
		rec.Pool = cond.turnPool
	}
	if rec.CancelMarked && cond.overMark != "" && rec.CancelTurn == cond.overMark {
		rec.CancelTurn, rec.CancelMarked = "", false // void: the turn ended interrupted
	}
	rec.RequestIDs = append(rec.RequestIDs, requestID)
	rec.addWriter(by)
	if cond.cancel {
		rec.CancelTurn, rec.CancelMarked = requestID, false
	}
	if n := len(rec.RequestIDs) - MaxRequestsPerTask; n > 0 {
		rec.RequestIDs = rec.RequestIDs[n:]
		rec.Dropped += n
	}
	if rec.ContextID == "" {
		rec.ContextID = contextID
	}
	return nil
}

// markCancelled records the request after, the newest of the task id, as
// the request whose cancel ends the task (TaskRecord.CancelTurn): from
// then on no A2A message is appended after it (appendAfter). A task named
// by its first request gets its record (newRecord's, without a request
// added). errRecordMoved, with nothing written, when after is no longer
// the task's newest request; ErrTaskNotFound when there is no such task or
// by may not write it.
func (s *TaskStore) markCancelled(ctx context.Context, id, after string, by tenant.Principal) error {
	key, err := taskKey(KindTask, id)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTaskNotFound, err)
	}
	mark := func(rec *TaskRecord, at time.Time) (bool, error) {
		if !by.Allows(tenant.Write, rec.Principal) {
			return false, ErrTaskNotFound
		}
		if rec.LastRequest() != after {
			return false, fmt.Errorf("%w: task %s", errRecordMoved, key)
		}
		if rec.CancelTurn == after {
			return false, nil // marked, or its cancel turn
		}
		rec.CancelTurn, rec.CancelMarked = after, true
		return true, s.keepContext(ctx, KindTask, rec, by, at)
	}
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		found, err := s.modify(ctx, key, mark)
		if found || err != nil {
			return err
		}
		rec, err := s.firstTurn(ctx, id)
		if err != nil {
			return err
		}
		at := s.now()
		if created, err := e2a.ParseTime(rec.Created); err == nil {
			rec.ContextClaimed = s.claimedBefore(rec.ContextID, created)
		}
		if _, err := mark(rec, at); err != nil {
			return err
		}
		rec.Updated = e2a.FormatTime(at)
		data, _ := json.Marshal(rec)
		if err := s.create(ctx, key, data); !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
	}
	return fmt.Errorf("ingress: task %s: too many concurrent updates", key)
}

// markCancelBefore records on the session id of protocol that its turns
// received before received are cancelled (TaskRecord.CancelBefore, raised
// to received, never lowered) and returns the record as written: the
// compare-and-set on the record's revision orders the mark with every
// append of a turn, so a turn appended before it is in the record returned
// and a turn appended after it reads the mark (appendAfter). The record is
// written even when the mark is not raised, for that record.
// ErrTaskNotFound, with nothing written, when there is no such session or
// by may not write it.
func (s *TaskStore) markCancelBefore(ctx context.Context, protocol, id string, received time.Time, by tenant.Principal) (*TaskRecord, error) {
	key, err := taskKey(KindSession, id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTaskNotFound, err)
	}
	var marked *TaskRecord
	found, err := s.modify(ctx, key, func(rec *TaskRecord, _ time.Time) (bool, error) {
		if rec.Protocol != protocol || !by.Allows(tenant.Write, rec.Principal) {
			return false, ErrTaskNotFound
		}
		rec.CancelBefore = max(rec.CancelBefore, received.UnixNano())
		marked = rec
		return true, nil
	})
	if err == nil && !found {
		err = ErrTaskNotFound
	}
	if err != nil {
		return nil, err
	}
	return marked, nil
}

// cancelledBefore reports whether a turn of rec received at received is
// one a session/cancel received after it cancels (TaskRecord.CancelBefore).
func (t *TaskRecord) cancelledBefore(received time.Time) bool {
	return t.CancelBefore != 0 && !received.IsZero() && received.UnixNano() < t.CancelBefore
}

// markStands reports whether the record of the task id (as the bucket's
// leader holds it) still has the mark of turn as its newest request's
// (TaskRecord.CancelMarked): false once it is taken back, or the record
// has moved on (the turn taken out of it again, a cancel turn after it).
func (s *TaskStore) markStands(ctx context.Context, kind, id, turn string) (bool, error) {
	rec, err := s.leaderRecord(ctx, kind, id)
	if err != nil || rec == nil {
		return false, err
	}
	return rec.cancelled() && rec.CancelMarked && rec.CancelTurn == turn, nil
}

// leaderRecord is the record kind/id as the bucket's leader holds it; nil
// when there is none (or id is not a valid key).
func (s *TaskStore) leaderRecord(ctx context.Context, kind, id string) (*TaskRecord, error) {
	key, err := taskKey(kind, id)
	if err != nil {
		return nil, nil
	}
	data, err := s.leaderValue(ctx, key)
	if err != nil || data == nil {
		return nil, err
	}
	return decodeRecord(key, data)
}

// unmarkCancelled takes back markCancelled's mark of requestID on the task
// id (its cancel found nothing to stop, or did not end it canceled): a
// record whose CancelTurn is another request (a cancel turn's), or none,
// is left alone.
func (s *TaskStore) unmarkCancelled(ctx context.Context, id, requestID string) error {
	key, err := taskKey(KindTask, id)
	if err != nil {
		return nil
	}
	_, err = s.modify(ctx, key, func(rec *TaskRecord, _ time.Time) (bool, error) {
		if rec.CancelTurn != requestID {
			return false, nil
		}
		rec.CancelTurn, rec.CancelMarked = "", false
		return true, nil
	})
	return err
}

// modify applies change to the record under key and writes it back with
// a compare-and-set, read again and changed again while another writer
// comes first; nothing is written when change reports no change or an
// error (returned). found is false, with nothing done, when there is no
// record. Updated is set to change's at on a change.
func (s *TaskStore) modify(ctx context.Context, key string, change func(rec *TaskRecord, at time.Time) (bool, error)) (found bool, err error) {
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		if err := updateBackoff(ctx, attempt); err != nil {
			return true, err
		}
		at := s.now()
		e, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return false, nil
		}
		if err != nil {
			return true, err
		}
		var rec TaskRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return true, err
		}
		if changed, err := change(&rec, at); !changed || err != nil {
			return true, err
		}
		rec.Updated = e2a.FormatTime(at)
		if ok, err := s.update(ctx, key, &rec, e.Revision()); err != nil || ok {
			return true, err
		}
	}
	return true, fmt.Errorf("ingress: task %s: too many concurrent updates", key)
}

// maxUpdateAttempts bounds the compare-and-set retries of one record
// update.
const maxUpdateAttempts = 16

// maxAppendAttempts bounds the compare-and-set retries of one turn's
// append (appendAfter): enough for a burst of about a hundred turns of
// one task at once, each append waiting for the others (updateBackoff),
// bounded so that a store that never takes the write still fails (after
// about two seconds of backoff).
const maxAppendAttempts = 64

// The backoff between two compare-and-set attempts on one record
// (updateBackoff): its window doubles from updateBackoffMin with each
// attempt, up to updateBackoffMax.
const (
	updateBackoffMin = time.Millisecond
	updateBackoffMax = 32 * time.Millisecond
)

// updateBackoff waits before the compare-and-set attempt attempt (from
// 0) on one record, which another writer came first on: nothing before
// the first, then a random time within a window that doubles with each
// attempt (updateBackoffMin, at most updateBackoffMax), so that writers
// that collided do not collide again at once. It returns ctx's error
// when ctx ends first.
func updateBackoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	window := updateBackoffMax
	if attempt <= 5 {
		window = min(updateBackoffMin<<(attempt-1), updateBackoffMax)
	}
	t := time.NewTimer(window/2 + rand.N(window/2+1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// update writes rec under key if the key is still at revision rev: false
// (no error) when another writer came first.
func (s *TaskStore) update(ctx context.Context, key string, rec *TaskRecord, rev uint64) (bool, error) {
	data, _ := json.Marshal(rec)
	next, err := s.kv.Update(ctx, key, data, rev)
	if err == nil {
		rec.rev = next
	}
	if err != nil {
		if wrongRevision(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// appendedAt is when the bucket stored revision rev of the record kind/id.
// When that revision is not known (rev 0) or no longer kept (the bucket's
// history), it is the record's current revision's time, no earlier than
// it: what ended after that ended after the turn was recorded.
func (s *TaskStore) appendedAt(ctx context.Context, kind, id string, rev uint64) (time.Time, error) {
	key, err := taskKey(kind, id)
	if err != nil {
		return time.Time{}, err
	}
	if rev != 0 {
		if e, err := s.kv.GetRevision(ctx, key, rev); err == nil {
			return e.Created(), nil
		}
	}
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return time.Time{}, err
	}
	return e.Created(), nil
}

// listing is the egress.Listing of the record kind/id: the requests it
// lists as the bucket's leader holds it (a replica a write behind could
// read a turn just appended as taken out), for a reader awaiting the store
// of a turn it found listed (egress.Service.AwaitListed): one refused
// (stillOpen) or whose publish failed is taken out again (Remove), and is
// not awaited further. No record lists nothing.
func (s *TaskStore) listing(kind, id string) egress.Listing {
	return func(ctx context.Context) ([]string, error) {
		rec, err := s.leaderRecord(ctx, kind, id)
		if err != nil || rec == nil {
			return nil, err
		}
		return rec.RequestIDs, nil
	}
}

// Remove takes requestID out of the record kind/id: a turn appended before
// its publish, which then failed, so that the task's next turn does not
// wait for a request that does not exist. A record without it (or none at
// all) is left alone.
func (s *TaskStore) Remove(ctx context.Context, kind, id, requestID string) error {
	key, err := taskKey(kind, id)
	if err != nil {
		return err
	}
	_, err = s.modify(ctx, key, func(rec *TaskRecord, _ time.Time) (bool, error) {
		i := slices.Index(rec.RequestIDs, requestID)
		if i < 0 {
			return false, nil
		}
		rec.RequestIDs = slices.Delete(rec.RequestIDs, i, i+1)
		if rec.CancelTurn == requestID {
			rec.CancelTurn, rec.CancelMarked = "", false // a cancel turn never published
		}
		return true, nil
	})
	return err
}

// list returns the records of kind that keep accepts, reading at most max
// keys (the bucket is scanned: no secondary index).
func (s *TaskStore) list(ctx context.Context, kind string, max int, keep func(*TaskRecord) bool) ([]*TaskRecord, error) {
	keys, err := s.kv.ListKeysFiltered(ctx, kind+".>")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, err
	}
	defer func() { _ = keys.Stop() }()
	var out []*TaskRecord
	n := 0
	for key := range keys.Keys() {
		if n++; n > max {
			break
		}
		e, err := s.kv.Get(ctx, key)
		if err != nil {
			continue // expired or deleted since listed
		}
		var rec TaskRecord
		if json.Unmarshal(e.Value(), &rec) != nil {
			continue
		}
		if keep(&rec) {
			out = append(out, &rec)
		}
	}
	return out, nil
}

// leaderValue reads key's value as the bucket stream's leader holds it
// (streams.LeaderLastBySubject): nil when the key holds nothing, or its last
// entry is a delete or purge marker.
func (s *TaskStore) leaderValue(ctx context.Context, key string) ([]byte, error) {
	m, err := streams.LeaderLastBySubject(ctx, s.nc, streams.KVStream(streams.TasksBucket), subjects.KV(streams.TasksBucket, key))
	if errors.Is(err, streams.ErrNoMessages) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ingress: task record %s: %w", key, err)
	}
	if op := m.Header.Get(subjects.HeaderKVOperation); op == "DEL" || op == "PURGE" {
		return nil, nil
	}
	return m.Data, nil
}

// newRecord is the record a task's or session's first write creates: base
// with requestID, or, for a task named by its first request (a second
// turn; firstTurnRecord: the envelope says it created the task), that
// request's record with requestID after it,
// its owner the first request's (by must be allowed to write it, else
// ErrTaskNotFound). write is false when requestID is that first request
// (a retry of the first turn): its request is the record, nothing to
// write.
func (s *TaskStore) newRecord(ctx context.Context, kind string, base TaskRecord, requestID string, by tenant.Principal, now string) (rec *TaskRecord, write bool, err error) {
	fresh := base
	fresh.RequestIDs = []string{requestID}
	fresh.Created, fresh.Updated = now, now
	if kind != KindTask {
		return &fresh, true, nil
	}
	first, err := s.firstTurn(ctx, base.ID)
	switch {
	case errors.Is(err, ErrTaskNotFound):
		return &fresh, true, nil
	case err != nil:
		return nil, false, err
	case !by.Allows(tenant.Write, first.Principal):
		return nil, false, ErrTaskNotFound
	case requestID == first.ID:
		return first, false, nil
	}
	first.RequestIDs = append(first.RequestIDs, requestID)
	first.addWriter(by)
	first.Updated = now
	if first.ContextID == "" {
		first.ContextID = base.ContextID
	}
	if at, err := e2a.ParseTime(first.Created); err == nil {
		first.ContextClaimed = s.claimedBefore(first.ContextID, at)
	}
	return first, true, nil
}

// firstTurn returns the record that the first request of the task id
// stands for when the task has none yet: the request whose id is id, in
// E2A_REQUESTS, when its envelope says it created the A2A or AgentVault
// task id (firstTurnRecord). A direct get reads it; when it finds none the
// stream's leader confirms the absence (a follower may trail it).
// ErrTaskNotFound when there is no such request.
func (s *TaskStore) firstTurn(ctx context.Context, id string) (*TaskRecord, error) {
	subj, err := subjects.RequestAnyPool(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTaskNotFound, err)
	}
	m, err := streams.LastBySubject(ctx, s.nc, streams.RequestsStream, subj)
	if errors.Is(err, streams.ErrNoMessages) {
		m, err = streams.LeaderLastBySubject(ctx, s.nc, streams.RequestsStream, subj)
	}
	if errors.Is(err, streams.ErrNoMessages) {
		if m, err = s.agedFirstTurn(ctx, id); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ingress: first request of task %q: %w", id, err)
	}
	rec, ok := firstTurnRecord(m)
	if !ok {
		return nil, ErrTaskNotFound
	}
	return rec, nil
}

// agedFirstTurn is the stored request id that E2A_REQUESTS no longer
// holds while E2A_RESPONSES still holds a frame of it, as the history
// holds it (TaskStore.history): the first request of a task that ran, or
// still runs, longer than E2A_REQUESTS_MAX_AGE (the envelope, stored
// first, ages out first). Without it such a task was not found while it
// ran: GetTask, CancelTask, SubscribeToTask and a message continuing it
// answered TaskNotFound, the agent ran on uncancellable. A miss costs one
// direct get on E2A_RESPONSES; the history is asked only when a frame is
// there (an unknown task id, or one whose frames aged out too, asks
// nothing more). ErrTaskNotFound when neither holds it.
func (s *TaskStore) agedFirstTurn(ctx context.Context, id string) (streams.RawMsg, error) {
	if s.history == nil {
		return streams.RawMsg{}, ErrTaskNotFound
	}
	subj, err := subjects.Response(id)
	if err != nil {
		return streams.RawMsg{}, ErrTaskNotFound
	}
	if _, err := streams.LastBySubject(ctx, s.nc, streams.ResponsesStream, subj); errors.Is(err, streams.ErrNoMessages) {
		return streams.RawMsg{}, ErrTaskNotFound
	} else if err != nil {
		return streams.RawMsg{}, fmt.Errorf("ingress: frames of task %q: %w", id, err)
	}
	m, found, err := s.history(ctx, id)
	switch {
	case err != nil:
		return streams.RawMsg{}, fmt.Errorf("ingress: first request of task %q in the history: %w", id, err)
	case !found:
		return streams.RawMsg{}, ErrTaskNotFound
	}
	return m, nil
}

// firstTurnProbe is what firstTurnRecord reads of a stored envelope.
type firstTurnProbe struct {
	RequestID  string `json:"request_id"`
	TaskID     string `json:"task_id"`
	ContextID  string `json:"context_id"`
	UserID     string `json:"user_id"`
	Provenance *struct {
		SourceProtocol string `json:"source_protocol"`
		// Details are read by their exact keys, as e2a.Envelope's are
		// (Owner): a struct's fields would take any spelling.
		Details map[string]any `json:"details"`
	} `json:"provenance"`
}

// detail is the string details[key] of p ("" for none or another type).
func (p *firstTurnProbe) detail(key string) string {
	s, _ := p.Provenance.Details[key].(string)
	return s
}

// taskCreatedMark is in every envelope that created a task (a cheap test
// before the decode; the decode decides).
var taskCreatedMark = []byte(`"task_created":true`)

// firstTurnRecord reads the stored request m as the record of the task it
// created: a request whose envelope says it created the task named by its
// own request id (normalizer.DetailTaskCreated: A2A's and AgentVault's
// adapters). Its protocol is the envelope's (details.ingress_protocol, else
// source_protocol), its owner the envelope's user_id, its pool the
// subject's, its times the time it was stored. ok is false for any other
// request.
func firstTurnRecord(m streams.RawMsg) (rec *TaskRecord, ok bool) {
	if !bytes.Contains(m.Data, taskCreatedMark) {
		return nil, false
	}
	pool, id, err := subjects.ParseRequest(m.Subject)
	if err != nil {
		return nil, false
	}
	var p firstTurnProbe
	if json.Unmarshal(m.Data, &p) != nil || p.RequestID != id || p.TaskID != id || p.Provenance == nil ||
		p.Provenance.Details[normalizer.DetailTaskCreated] != true || p.Provenance.SourceProtocol == "" {
		return nil, false
	}
	at := e2a.FormatTime(m.Time)
	rec = &TaskRecord{ID: id, ContextID: p.ContextID, Protocol: cmp.Or(p.detail(e2a.DetailIngressProtocol), p.Provenance.SourceProtocol),
		Pool: pool, Principal: p.UserID, RequestIDs: []string{id}, Created: at, Updated: at}
	if o := p.detail(e2a.DetailConversationOwner); o != p.UserID {
		rec.Owner = o
	}
	return rec, true
}

// listTasks is list for the task records and the tasks that have none
// yet: those of the newest max requests of E2A_REQUESTS that created a
// task (firstTurnRecord) whose record the listing did not read, read once
// per replica (firstTurns). keep is called once per task that owns
// accepts (the caller may read it: a pure test of the record, made
// first). A first turn the replica read that has aged out of E2A_REQUESTS
// since is listed as long as GetTask finds it (firstTurn, as Get reads
// it: agedFirstTurn, a frame of it in E2A_RESPONSES and its request in
// the history), and forgotten once it does not (a listing with
// E2A_REQUESTS empty reads the ones held): looked up only when owns
// accepts it, so a listing costs no reads of another principal's aged
// tasks, nor their lookups in the history's per-principal budget. A
// replica that did not read it before it aged out (one started since)
// does not list it: the history is looked up by id only.
func (s *TaskStore) listTasks(ctx context.Context, max int, owns, keep func(*TaskRecord) bool) ([]*TaskRecord, error) {
	seen := map[string]bool{}
	out, err := s.list(ctx, KindTask, max, func(r *TaskRecord) bool {
		seen[r.ID] = true
		return owns(r) && keep(r)
	})
	if err != nil {
		return nil, err
	}
	var lastSeq uint64
	last, err := streams.LastBySubject(ctx, s.nc, streams.RequestsStream, subjects.AllRequests)
	switch {
	case errors.Is(err, streams.ErrNoMessages):
		if lastSeq = s.turns.lastRead(); lastSeq == 0 {
			return out, nil
		}
	case err != nil:
		return nil, err
	default:
		lastSeq = last.Seq
	}
	firsts, err := s.turns.newest(ctx, s, lastSeq, max)
	if err != nil {
		return nil, err
	}
	for i := range firsts {
		rec := &firsts[i].rec
		if seen[rec.ID] {
			continue
		}
		seen[rec.ID] = true
		if !owns(rec) {
			continue
		}
		if s.turns.aged(firsts[i], s.now()) {
			if _, err := s.firstTurn(ctx, rec.ID); errors.Is(err, ErrTaskNotFound) {
				s.turns.forget(firsts[i].seq)
				continue
			} else if err != nil {
				continue // not known now: listed when the history answers
			}
		}
		if keep(rec) {
			out = append(out, rec)
		}
	}
	return out, nil
}

// listPage is the direct get batch of listTasks' read of E2A_REQUESTS.
const listPage = 256
