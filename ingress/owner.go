package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// The front door's side of the ownership rule (package tenant): every path
// that deduplicates, reads, continues, cancels or subscribes to a request,
// task, context or session goes through publish, ownedRecord or
// claimContext below.

// publish publishes env for principal p. A request id another principal
// already uses is refused with ErrConflict, which reveals nothing of the
// other request (its answer would otherwise be the other's envelope and
// frames); one of p's own is a duplicate (Accepted.Duplicate), never
// published again: the publish of a chosen id expects no message on
// e2a.req.*.<id> (checkStored, for as long as E2A_REQUESTS keeps the
// request; no dedupe window is used), so the server refuses it and the
// owner is read then (origin: an id the pipeline made for the call is
// published without that check). Errors are those of Publisher.Publish,
// and ErrConflict.
//
// With the pool check on, a pool no worker ever served is ErrUnknownPool
// (nothing is published) and Accepted.Warning tells of a pool with no live
// worker.
func (s *Server) publish(ctx context.Context, p Principal, pool string, env *e2a.Envelope, origin idOrigin) (Accepted, error) {
	return s.publishAfter(ctx, p, pool, env, nil, origin, "")
}

// idOrigin tells publishAfter what is known of a request's id.
type idOrigin int

const (
	// idChosen: the client chose the id (an E2A request_id, an
	// Idempotency-Key): it may name a stored request, of anyone, however
	// old. It is published only if no pool holds it
	// (checked by the server as it stores); one stored is a duplicate
	// whose owner publishAfter then checks.
	idChosen idOrigin = iota
	// idFresh: the pipeline made the id for this call (a UUIDv7 never
	// given out before): nothing can hold it, nothing is looked up.
	idFresh
	// idUnused: a chosen id the caller looked up (checkRequestID) and
	// found unused.
	idUnused
	// idOwnStored: a chosen id the caller looked up and found stored, the
	// principal's own: the request is a duplicate.
	idOwnStored
)

// publishTimed is publishAfter, its time observed as
// e2a_ingress_publish_seconds when it stored the request (accepted, not a
// duplicate found): a refusal (413 over max_payload, an unknown pool, a
// conflict, a timeout) was counted as a publish too.
func (s *Server) publishTimed(ctx context.Context, p Principal, pool string, env *e2a.Envelope, after []string, origin idOrigin, owner string) (Accepted, error) {
	start := time.Now()
	acc, err := s.publishAfter(ctx, p, pool, env, after, origin, owner)
	if err == nil && !acc.Duplicate {
		s.metrics.publish.Observe(time.Since(start).Seconds())
	}
	return acc, err
}

// publishAfter is publish for a turn that runs after the request after
// (Publisher.PublishAfter; none when ""), of the conversation (task,
// context, session) of the principal owner ("": p's own). Every envelope
// the front door publishes goes through it: the owner is written in
// provenance.details (e2a.DetailConversationOwner) when it is not env's
// user_id (an admin's turn in another principal's task), and any other
// value of that detail is dropped, so that no client names an owner.
// With authentication off nobody is kept apart: nothing is written.
func (s *Server) publishAfter(ctx context.Context, p Principal, pool string, env *e2a.Envelope, after []string, origin idOrigin, owner string) (Accepted, error) {
	if p.Open {
		owner = ""
	}
	env.SetOwner(owner)
	warning, err := s.checkPool(ctx, pool)
	if err != nil {
		return Accepted{}, err
	}
	// A chosen id not looked up yet is not looked up here: the publish
	// stores it only when no pool holds the id (Publisher.publishAfter),
	// and one stored answers as a duplicate, whose owner is checked below.
	// (publishTurn looks it up first: it writes the task's record before.)
	// Its frames are looked up (checkFrames).
	if origin == idChosen || origin == idUnused {
		if origin, err = s.checkFrames(ctx, p, env.RequestID, origin); err != nil {
			return Accepted{}, err
		}
	}
	if origin == idOwnStored {
		// The stored request is the answer, the second one is not
		// published (it would become the newest message of the id, the
		// one every lookup reads). Its owner was checked by the lookup
		// that found it.
		acc := Accepted{RequestID: env.RequestID, Pool: pool, Duplicate: true, Warning: warning}
		return s.duplicate(ctx, p, acc, false)
	}
	// A call that streams the frames next subscribes to them first
	// (egress.ExpectStream): a new request then needs no read at open. A
	// failed subscription only loses that.
	pre, perr := s.egress.Prepare(ctx, env.RequestID)
	if perr != nil {
		s.opts.log.Warn("live subscription before publish failed", "request_id", env.RequestID, "err", perr)
	}
	// A chosen id is published only onto an empty subject: a request of
	// the id stored between the lookup and the publish answers as a
	// duplicate and is checked below.
	check := checkStored
	if origin == idFresh {
		check = checkNone
	}
	acc, err := s.pub.publishAfter(ctx, pool, env, after, check)
	publishSent(ctx)
	if pre != nil {
		if err != nil {
			pre.Close()
		} else {
			pre.Published(!acc.Duplicate && s.pub.js.Conn() == s.egress.Conn())
		}
	}
	acc.Warning = warning
	if err == nil && !acc.Duplicate {
		s.metrics.accepted.WithLabelValues(acceptedProtocol(env)).Inc()
		s.chargeBytes(p, acc.size)
	}
	if err != nil || !acc.Duplicate {
		return acc, err
	}
	// The server said "duplicate", so the original is stored.
	return s.duplicate(ctx, p, acc, true)
}

// duplicate completes the answer acc of a duplicate, a request whose id
// names a stored request, which nothing republished: its pool is the
// stored request's (a retry may name another pool, where nothing was
// published), and, with checkOwner and authentication on, it is
// ErrConflict unless p may write it. The stored request is looked up once
// (egress.Service.Stored, the stream's leader confirming an absence, for a
// lagging follower).
func (s *Server) duplicate(ctx context.Context, p Principal, acc Accepted, checkOwner bool) (Accepted, error) {
	owner, pool, found, err := s.egress.Stored(ctx, acc.RequestID)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return acc, err
		}
		return acc, fmt.Errorf("%w: lookup of a duplicate: %v", ErrBackpressure, err)
	}
	if pool != "" && pool != acc.Pool {
		// The warning, if any, told of the retry's pool.
		acc.Pool, acc.Warning = pool, ""
	}
	if checkOwner && !p.Open && (!found || !p.Tenant().Allows(tenant.Write, owner)) {
		return acc, ErrConflict
	}
	return acc, nil
}

// checkRequestID looks up the stored request of a request id the client
// chose, in every pool (one direct get): idUnused when there is none,
// idOwnStored when p may write it (its own, or an admin's), ErrConflict
// when it is someone else's. With authentication off every stored request
// is the one principal's. Were a request of a stored id published, its
// newest envelope is the one every lookup reads: the newcomer would take
// the id over.
func (s *Server) checkRequestID(ctx context.Context, p Principal, requestID string) (idOrigin, error) {
	owner, found, err := s.egress.StoredOwner(ctx, requestID)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return idChosen, err
		}
		return idChosen, fmt.Errorf("%w: request id lookup: %v", ErrBackpressure, err)
	}
	if !found {
		return idUnused, nil
	}
	if !p.Tenant().Allows(tenant.Write, owner) {
		return idChosen, ErrConflict
	}
	return idOwnStored, nil
}

// checkFrames checks a request id the client chose against the frames
// E2A_RESPONSES holds of it, in one direct get. The frames of a request
// outlive its envelope (stored after it, by the request's run time, and the
// two streams' limits drop them apart): were the id taken once the
// envelope left E2A_REQUESTS, the newcomer would read those frames as its
// answer and its worker would find its request answered. Without frames
// the id is as origin says. With frames, a stored envelope decides as
// checkRequestID does (its owner confirmed by the stream's leader: a
// client's retry of a running request is the common case); none is
// ErrConflict, for the first request's owner too, whom nothing names any
// more (with authentication off, the one principal's duplicate).
func (s *Server) checkFrames(ctx context.Context, p Principal, requestID string, origin idOrigin) (idOrigin, error) {
	stored, err := s.egress.FramesStored(ctx, requestID)
	if err == nil && stored && origin == idChosen {
		var (
			owner string
			found bool
		)
		if owner, found, err = s.egress.Owner(ctx, requestID); err == nil && found {
			if !p.Tenant().Allows(tenant.Write, owner) {
				return origin, ErrConflict
			}
			return idOwnStored, nil
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return origin, err
	case err != nil:
		return origin, fmt.Errorf("%w: request id lookup: %v", ErrBackpressure, err)
	case !stored:
		return origin, nil
	case p.Open:
		return idOwnStored, nil
	}
	return origin, fmt.Errorf("%w: an earlier request of this id is still answered from the streams", ErrConflict)
}

// freshIDs records the ids the pipeline made for one call
// (normalizer.Input.NewID): a request id among them was chosen by no
// client and is published without a lookup (idFresh). A nil *freshIDs
// makes ids without recording them; it is safe for concurrent use. It
// also records the pool the call named (its input's agent: ?agent=, a
// pool's path, an A2A tenant): a turn of a task sent so must be the task's
// pool's (submit).
type freshIDs struct {
	mu    sync.Mutex
	ids   []string
	agent string
}

// maxFreshIDs bounds what one call records (a request id, a context id,
// an A2E message id); an id past it is treated as a chosen one.
const maxFreshIDs = 8

// newFreshIDs returns the record of a call's made ids, holding the one
// ctx names (withFreshID) if any.
func newFreshIDs(ctx context.Context) *freshIDs {
	f := &freshIDs{}
	if id, ok := ctx.Value(freshIDKey{}).(string); ok {
		f.ids = append(f.ids, id)
	}
	return f
}

// newID makes a request id (a UUIDv7) and records it.
func (f *freshIDs) newID() string {
	id := newRequestID()
	if f != nil {
		f.mu.Lock()
		if len(f.ids) < maxFreshIDs {
			f.ids = append(f.ids, id)
		}
		f.mu.Unlock()
	}
	return id
}

// setAgent records agent as the pool the call named ("": none).
func (f *freshIDs) setAgent(agent string) {
	if f == nil || agent == "" {
		return
	}
	f.mu.Lock()
	f.agent = agent
	f.mu.Unlock()
}

// namedPool is the pool the call named (setAgent), "" when it named none
// or f is nil.
func (f *freshIDs) namedPool() string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.agent
}

// origin is idFresh for an id f recorded, else idChosen.
func (f *freshIDs) origin(id string) idOrigin {
	if f == nil {
		return idChosen
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Contains(f.ids, id) {
		return idFresh
	}
	return idChosen
}

// freshIDKey is the context key of a request id the pipeline made before
// the call ran (stdio fixes it to let a cancel name the request early).
type freshIDKey struct{}

// withFreshID returns ctx naming id as made by the pipeline for the call.
func withFreshID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, freshIDKey{}, id)
}

// ownedRecord returns the task or session record kind/id when p may have
// access a to it, and ErrTaskNotFound both when there is none and when it
// belongs to someone else (the caller answers the protocol's not found).
func (s *Server) ownedRecord(ctx context.Context, p Principal, kind, id string, a tenant.Access) (*TaskRecord, error) {
	rec, err := s.opts.tasks.Get(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	if !p.Tenant().Allows(a, rec.Principal) {
		return nil, ErrTaskNotFound
	}
	return rec, nil
}

// session is the record rec as the protocol packages read it for p: its
// principal, whose requests alone are the record's (host.Session.Owns), is
// none with authentication off (every request is the one principal's).
func (p Principal) session(rec *TaskRecord) host.Session {
	s := host.Session{ID: rec.ID, Protocol: rec.Protocol, Pool: rec.Pool, Principal: rec.Principal, Writers: rec.Writers,
		RequestIDs: rec.RequestIDs, Dropped: rec.Dropped}
	if p.Open {
		s.Principal = ""
	}
	return s
}

// taskOpen checks that an A2A task named by a new message can take it:
// ErrTaskTerminal when its last request has finished (completed, failed,
// canceled; an interrupted turn, input-required or auth-required, leaves
// the task open: the message is the answer), ErrBackpressure when that
// cannot be read. rec was read before the frames: a turn appended since,
// while its last request ran (taken: queued behind it), runs next, and
// the task is not terminal. So a task read finished has its record read
// again (the turn it lists after its last request, one direct get: as a
// stream at its turn's end) and is open when it lists one: the message's
// append and its check once recorded (stillOpen) decide. Refused, the
// message was answered as to a finished task while that turn ran.
func (s *Server) taskOpen(ctx context.Context, rec *TaskRecord) error {
	last := rec.LastRequest()
	if last == "" {
		return nil
	}
	open, err := s.egress.Continuable(ctx, last)
	if err != nil {
		return fmt.Errorf("%w: task state: %v", ErrBackpressure, err)
	}
	if !open {
		if next, _, err := s.opts.tasks.laterTurn(ctx, KindTask, rec.ID, last); err == nil && next != "" {
			return nil
		}
		return taskTerminal(rec.ID)
	}
	return nil
}

// taskTerminal is ErrTaskTerminal for the task id.
func taskTerminal(id string) error {
	return fmt.Errorf("%w (task %s has finished); send the message without taskId, with its contextId to continue the conversation", ErrTaskTerminal, id)
}

// claimContext records p as the owner of an A2A context id the client chose,
// or checks that p owns it already, and returns its owner (p's own id, or
// the principal whose context an admin joins; "" with authentication off).
// A context p may not write is ErrConflict: joining it would let the agent
// answer from someone else's conversation. A claim that exists is read,
// and written again when older than half of contextRefresh (the new task
// of the context then leaves it at most that old: TaskStore.claimedBefore).
// made is the revision of the claim when this call made it (none existed),
// else 0.
func (s *Server) claimContext(ctx context.Context, p Principal, contextID string) (owner string, made uint64, err error) {
	if p.Open || contextID == "" {
		return "", 0, nil
	}
	key, err := taskKey(KindContext, contextID)
	if err != nil {
		return "", 0, errContextConflict
	}
	now := s.opts.now()
	data, _ := json.Marshal(contextRecord(contextID, p.UserID, now))
	if rev, err := s.opts.tasks.createRev(ctx, key, data); err == nil {
		return p.UserID, rev, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return "", 0, fmt.Errorf("%w: context index: %v", ErrBackpressure, err)
	}
	refresh := s.opts.tasks.contextRefresh
	if refresh > 0 {
		refresh /= 2 // negative: never (records do not expire); -1/2 would be 0, every time
	}
	owner, _, err = s.opts.tasks.refreshContext(ctx, contextID, p.UserID, now, refresh)
	if err != nil {
		return "", 0, fmt.Errorf("%w: context index: %v", ErrBackpressure, err)
	}
	if !p.Tenant().Allows(tenant.Write, owner) {
		return "", 0, errContextConflict
	}
	return owner, 0, nil
}

// errContextConflict is claimContext's ErrConflict: a context id another
// principal holds (host.ErrContextConflict to the front doors).
var errContextConflict = fmt.Errorf("%w: the context id", ErrConflict)

// publishSentKey is the context key of a function publish calls once its
// publish was sent (whatever its outcome).
type publishSentKey struct{}

// withPublishSent returns ctx carrying f, which publish calls once the
// request's publish was sent: a stdio cancel that overtook its request
// waits for it.
func withPublishSent(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, publishSentKey{}, f)
}

func publishSent(ctx context.Context) {
	if f, ok := ctx.Value(publishSentKey{}).(func()); ok {
		f()
	}
}
