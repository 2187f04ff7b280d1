package ingress

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// A record of E2A_TASKS (a task's, a session's, and with them their A2A
// context's claim) expires TasksTTL after its last write, and its turns
// write it when they are appended. A turn running longer than TasksTTL (an
// agent waiting hours on a model or a human) lost its task while it ran:
// GetTask, ListTasks, CancelTask and its next message answered not found
// (or, while the task's first request was still in E2A_REQUESTS, read the
// task as of that request: its running turn unseen, a cancel that stopped
// nothing, a next message taken and run beside the running turn). So the
// replica that published a turn to a record keeps the record
// (recordKeeper): it looks at the turn a minute after its publish
// (keepFirstLook), then at doubling waits up to a quarter of TasksTTL, and,
// while the turn runs, writes the record again, as it is, when it was last
// written a quarter of TasksTTL ago or longer (by anyone: a turn's append,
// another turn's keeper, another replica's), refreshing the context's claim
// as a task's write does (keepContext). A record is so never older than
// half of TasksTTL (and half a minute) while a turn it lists runs, and
// lives at least three quarters of it past its last turn's end (renew). A
// look costs a read of the record and of the turn's last frame (and of its
// request while it has none): about log2(TTL/4 / 1 min) + 1 looks for a
// turn until it runs a quarter of TasksTTL (18 h with the default 72 h),
// then one per quarter, and at most one write per record and quarter; a
// turn that ends is dropped at its next look. The replica stops keeping a
// turn once its final frame is stored, once the record no longer lists it
// (or is gone), and once the turn has no trace left in the hot streams
// (neither its request nor a frame: it ended unseen, or aged out silent).
// A turn found running is listed in E2A_TASKS (keeplist.go), and a turn
// running when its replica stops is taken over from that list by another
// replica, which keeps it from then on (docs/operations.md,
// "Long-running requests").
//
// What a task's turn needs past its end lives in E2A_TASKS and E2A_PUSH
// under the same TTL, and is kept at the same looks (keepAlongside), while
// the turn is found running: the task's push configs and their delivery
// cursors (push.Store.Keep: before, a turn longer than TasksTTL lost
// them, and its final status was delivered to nobody), and for a task of
// one turn, which has no record (its request stands for it), the claim
// of its A2A context (keepClaim: before, it expired while the turn ran,
// and another principal could then take the context). Each key is
// written again, as it is, when it was last written a quarter of
// TasksTTL ago or longer, by a compare-and-set on the revision read:
// nothing is created, and a key deleted meanwhile (a config the user
// deleted) stays deleted. They are so never older than half of TasksTTL
// (and half a minute) while the turn runs, and live at least half of it
// past its end. A task of one turn is kept only once a push config of it
// is stored (pushConfigCreated, by the replica that stored it), its
// context's claim then with its configs (the context read from its
// request at each look while it runs): keeping every such task cost a
// keeper entry and a look's read for each A2A message that starts a task,
// the commonest request, for turns longer than TasksTTL (72 h by
// default). Without a push config, such a task's context claim expires
// during a turn longer than TasksTTL (docs/operations.md,
// "Long-running requests").

// recordKeeper is the set of turns the server keeps the records of
// (keepRecord; its goroutine, keepRecords, runs from New until the
// server's connection is closed).
type recordKeeper struct {
	mu    sync.Mutex
	turns map[keptTurn]keptState
}

// keptTurn is a turn requestID of the record kind/id; kind "" for the
// turn of a task of one turn, id, which has no record.
type keptTurn struct{ kind, id, requestID string }

// keptState is when a kept turn is looked at next, the wait before that
// (doubled at each look, up to the renewal period), the turn's author,
// whose write refreshes the context's claim (keepContext), what is
// kept alongside the record (keepAlongside): the context whose claim is
// kept (a one-turn task's: a record's keeps its own) and the principals
// whose push configs of the task are kept, and the revision of the
// turn's key in the keeper list this replica wrote last, and when (0:
// not listed by it: keeplist.go).
type keptState struct {
	by        tenant.Principal
	next      time.Time
	wait      time.Duration
	contextID string
	pushTo    []string
	listRev   uint64
	listAt    time.Time
}

// keepTimeout bounds the reads and the write of one turn's renewal.
const keepTimeout = 10 * time.Second

// keepFirstLook is the longest a kept turn waits for its first look (less
// when the renewal period is shorter: a quarter of it, keepTick): most
// turns end sooner, and are dropped then, so that the set holds about
// the turns published in the last minute and those still running, not
// every turn of a renewal period (18 h by default). A turn found running
// is looked at again after twice the wait before, up to the renewal
// period: a few reads more per long turn.
const keepFirstLook = time.Minute

// keepTick is how often the keeper's rounds come for a renewal period
// every: a minute, a quarter of every when that is shorter (a TTL under
// 16 minutes), so that a turn whose keeper is gone is taken over well
// within the TTL (keeplist.go).
func keepTick(every time.Duration) time.Duration {
	return min(every/4, keepFirstLook)
}

// startKeeper starts the keeper's goroutine (keepRecords) when records
// expire and egress tells a turn's end: it keeps the turns this server
// publishes and takes over those whose keeper is gone.
func (s *Server) startKeeper() {
	every := s.opts.tasks.renewEvery()
	if every <= 0 || s.egress == nil {
		return
	}
	s.keeper.turns = map[keptTurn]keptState{}
	go s.keepRecords(every, keepTick(every))
}

// keepRecord has the record of turn kept while the turn, which st.by
// published, runs, and with it what st names (see above). Nothing when
// records never expire, without egress (which tells a turn's end), or
// for a one-turn task with nothing to keep.
func (s *Server) keepRecord(turn keptTurn, st keptState) {
	every := s.opts.tasks.renewEvery()
	if every <= 0 || s.egress == nil {
		return
	}
	if st.by.Open {
		st.contextID = "" // no claims are made
	}
	if s.opts.push == nil {
		st.pushTo = nil
	}
	if turn.kind == "" && len(st.pushTo) == 0 {
		return
	}
	tick := keepTick(every)
	k := &s.keeper
	k.mu.Lock()
	defer k.mu.Unlock()
	if cur, ok := k.turns[turn]; ok {
		// Another principal's config of the same task (an admin's).
		st.listRev, st.listAt = cur.listRev, cur.listAt
		for _, p := range cur.pushTo {
			if !slices.Contains(st.pushTo, p) {
				st.pushTo = append(st.pushTo, p)
			}
		}
		if len(st.pushTo) > len(cur.pushTo) {
			st.listAt = time.Time{} // listed again at the next look
		}
	}
	st.next, st.wait = time.Now().Add(tick), tick
	k.turns[turn] = st
}

// keepRecords looks at the kept turns every tick, and before that takes
// over the turns of the keeper list whose keeper is gone (takeOver),
// until the server's connection is closed: the turns it keeps are then
// left to the other replicas.
func (s *Server) keepRecords(every, tick time.Duration) {
	closed := s.nc.StatusChanged(nats.CLOSED)
	defer s.nc.RemoveStatusListener(closed)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-closed:
		case <-t.C:
		}
		if s.nc.IsClosed() {
			s.keeper.mu.Lock()
			clear(s.keeper.turns)
			s.keeper.mu.Unlock()
			return
		}
		s.takeOver(every)
		s.keepRound(every, tick)
	}
}

// keepRound renews the record of each kept turn due for a look
// (lookAt), drops the turns that need it no more and sets the next look
// of the others (the rounds come every tick).
func (s *Server) keepRound(every, tick time.Duration) {
	k := &s.keeper
	k.mu.Lock()
	now := time.Now()
	due := map[keptTurn]keptState{}
	for turn, st := range k.turns {
		if !st.next.After(now) {
			due[turn] = st
		}
	}
	k.mu.Unlock()
	for turn, was := range due {
		st, keep := s.lookAt(turn, was, every)
		k.mu.Lock()
		switch cur, ok := k.turns[turn]; {
		case !ok:
		case !cur.next.Equal(was.next): // kept again meanwhile (keepRecord), with what this look listed
			if keep {
				cur.listRev, cur.listAt = st.listRev, st.listAt
				k.turns[turn] = cur
			}
		case keep:
			// Due at the round's tick that wait later, not the
			// one after it.
			st.wait = min(2*st.wait, every)
			st.next = now.Add(st.wait - tick/2)
			k.turns[turn] = st
		default:
			delete(k.turns, turn)
		}
		k.mu.Unlock()
	}
}

// lookAt is one look at turn (keepRound's): keepTurn, then the turn's
// key of the keeper list written while it runs (listTurn), deleted as
// it is dropped (unlistTurn). keep is whether to look at it again: false
// too when another replica keeps it now.
func (s *Server) lookAt(turn keptTurn, st keptState, every time.Duration) (keptState, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	keep, err := s.keepTurn(ctx, turn, st, every)
	if err != nil {
		s.opts.log.Warn("cannot renew the task index record of a running turn", "kind", turn.kind, "task_id", turn.id, "request_id", turn.requestID, "err", err)
	}
	switch {
	case !keep:
		s.unlistTurn(ctx, turn, st)
		return st, false
	case err != nil:
		return st, true
	}
	if f := s.keptLook.Load(); f != nil {
		(*f)(turn.requestID)
	}
	return s.listTurn(ctx, turn, st, every)
}

// keepTurn is one look at turn (keepRound's): its record renewed
// (TaskStore.renew; a one-turn task has none), and while it runs what st
// keeps alongside it. keep is whether to look at it again.
func (s *Server) keepTurn(ctx context.Context, turn keptTurn, st keptState, every time.Duration) (keep bool, err error) {
	running := func(ctx context.Context) (bool, error) {
		run, err := s.turnRunning(ctx, turn.requestID)
		if err != nil || !run {
			return run, err
		}
		if turn.kind == "" {
			st.contextID = s.requestContext(ctx, turn.requestID)
		}
		return true, s.keepAlongside(ctx, turn, st, every)
	}
	if turn.kind != "" {
		return s.opts.tasks.renew(ctx, turn.kind, turn.id, turn.requestID, st.by, every, running)
	}
	keep, err = running(ctx)
	return keep || err != nil, err
}

// pushConfigCreated has a task of one turn, taskID, whose request is
// named so (its id the task's), kept while its turn runs (keepRecord)
// with principal's push configs: push.Store.OnCreate's, for every config
// stored. A turn of a record is kept at its publish (publishTurnIf), its
// task's configs with it; for such a task's config this is one look
// more, which finds that request ended and drops it.
func (s *Server) pushConfigCreated(principal, taskID string) {
	s.keepRecord(keptTurn{id: taskID, requestID: taskID}, keptState{pushTo: []string{principal}})
}

// requestContext is the A2A context of requestID, whose claim is kept
// beside a task of one turn (keepAlongside), "" when it has none or its
// request cannot be read: a read of its envelope at each of the turn's
// looks, made only for a task with a push config.
func (s *Server) requestContext(ctx context.Context, requestID string) string {
	rq, err := s.egress.LoadRequestHead(ctx, requestID)
	if err != nil || rq.Envelope == nil {
		return ""
	}
	return rq.Envelope.ContextID
}

// keepAlongside writes again what st keeps beside turn's record, each key
// last written after ago or longer, never one that is gone: the claim of
// st.contextID (TaskStore.keepClaim) and the push configs of st.pushTo's
// (push.Store.Keep).
func (s *Server) keepAlongside(ctx context.Context, turn keptTurn, st keptState, after time.Duration) error {
	var errs []error
	if st.contextID != "" {
		errs = append(errs, s.opts.tasks.keepClaim(ctx, st.contextID, after))
	}
	for _, p := range st.pushTo {
		if s.opts.push != nil { // a turn taken over by a replica without push configs
			errs = append(errs, s.opts.push.Keep(ctx, p, turn.id, after))
		}
	}
	return errors.Join(errs...)
}

// turnPrincipals are the principals whose push configs follow the turn
// env of a task whose conversation owner is owner (the push stage's:
// the envelope's user, and the owner when another's).
func turnPrincipals(env *e2a.Envelope, owner string) []string {
	if owner == "" || owner == env.UserID {
		return []string{env.UserID}
	}
	return []string{env.UserID, owner}
}

// turnRunning reports whether the turn requestID may still run: no final
// frame stored, and its request or a frame of it in the hot streams.
func (s *Server) turnRunning(ctx context.Context, requestID string) (bool, error) {
	if done, err := s.egress.Finished(ctx, requestID); err != nil || done {
		return !done, err
	}
	if framed, err := s.egress.FramesStored(ctx, requestID); err != nil || framed {
		return true, err
	}
	_, _, stored, err := s.egress.Stored(ctx, requestID)
	return stored || err != nil, err
}

// renewEvery is how often the records of running turns are renewed: a
// quarter of the bucket's TTL (0: records never expire, or the TTL is not
// known).
func (s *TaskStore) renewEvery() time.Duration {
	return s.ttl / 4
}

// renew writes the record kind/id again, as it is (its context's claim
// refreshed: keepContext, by the turn's author by), when it still lists
// requestID and was last written after ago or longer; a write another
// writer came first on is left to it. keep is what running reports (the
// turn may still run), false too when the record is gone or no longer
// lists the turn; an error keeps it, for the next round. A turn found
// ended has its record written once more when it is that old, so that
// the record lives at least TTL − after past the turn's end.
func (s *TaskStore) renew(ctx context.Context, kind, id, requestID string, by tenant.Principal, after time.Duration,
	running func(context.Context) (bool, error)) (keep bool, err error) {
	key, err := taskKey(kind, id)
	if err != nil {
		return false, nil
	}
	e, err := s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return true, err
	}
	rec, err := decodeRecord(key, e.Value())
	if err != nil {
		return false, err
	}
	if !slices.Contains(rec.RequestIDs, requestID) {
		return false, nil
	}
	run, err := running(ctx)
	if err != nil {
		return true, err
	}
	now := s.now()
	if now.Sub(e.Created()) < after {
		return run, nil // written lately
	}
	if err := s.keepContext(ctx, kind, rec, by, now); err != nil {
		return true, err
	}
	_, err = s.update(ctx, key, rec, e.Revision())
	return run || err != nil, err
}
