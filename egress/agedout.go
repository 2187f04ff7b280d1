package egress

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Bounds of the answered check (Service.agedOut).
const (
	// ackFloorTTL is how long a pool consumer's ack floor is reused: the
	// check runs only for a request of which no frame is stored (pending,
	// or its frames aged out, hours after its answer), so a floor a few
	// seconds old tells the one from the other as well as a fresh one,
	// and a GET of a pending request costs no round trip most of the time.
	ackFloorTTL = 5 * time.Second
	// ackFloorFailedTTL is how long a failed consumer info (no permission,
	// no answer) is remembered: the check is skipped meanwhile, not paid
	// for again by every read.
	ackFloorFailedTTL = time.Minute
	// ackFloorTimeout bounds one consumer info request (a request the
	// server refuses for want of permission gets no answer at all).
	ackFloorTimeout = 2 * time.Second
	// ackFloorPools bounds the cache (one entry per agent pool).
	ackFloorPools = 10000
)

// ackFloors caches the ack floors of the agent pools' consumers on
// E2A_REQUESTS (consumer info), per pool.
type ackFloors struct {
	js jetstream.JetStream
	mu sync.Mutex
	m  map[string]ackFloor
	// warned: a failed lookup was logged (once per Service).
	warned bool
}

// ackFloor is a pool consumer's ack floor (its stream sequence; 0 for a
// pool without a consumer) as read at at; failed: the read failed.
type ackFloor struct {
	seq    uint64
	at     time.Time
	failed bool
}

// floor returns the ack floor of pool's consumer on stream, from the
// cache when fresh; ok is false when it could not be read (recently).
func (s *Service) ackFloor(ctx context.Context, stream, pool string) (seq uint64, ok bool) {
	a := &s.floors
	now := time.Now()
	a.mu.Lock()
	e, cached := a.m[pool]
	a.mu.Unlock()
	switch {
	case cached && e.failed && now.Sub(e.at) < ackFloorFailedTTL:
		return 0, false
	case cached && !e.failed && now.Sub(e.at) < ackFloorTTL:
		return e.seq, true
	}
	name, err := streams.AgentConsumerName(pool)
	if err != nil {
		return 0, false
	}
	ictx, cancel := context.WithTimeout(ctx, ackFloorTimeout)
	defer cancel()
	e = ackFloor{at: now}
	c, err := a.js.Consumer(ictx, stream, name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		// The pool is gone: nothing tells whether it answered.
	case err != nil:
		if ctx.Err() != nil {
			return 0, false // the client went away: nothing learnt
		}
		e.failed = true
	default:
		e.seq = c.CachedInfo().AckFloor.Stream
	}
	a.mu.Lock()
	if len(a.m) >= ackFloorPools {
		clear(a.m)
	}
	a.m[pool] = e
	warn := e.failed && !a.warned
	a.warned = a.warned || e.failed
	a.mu.Unlock()
	if warn {
		s.log.Warn("egress: cannot read an agent pool's consumer info: a request whose frames aged out is taken for one not answered yet (check the permission $JS.API.CONSUMER.INFO."+stream+".agent-*)",
			"pool", pool, "err", err)
	}
	return e.seq, !e.failed
}

// agedOut reports whether request id, whose envelope message is env and of
// which E2A_RESPONSES holds no frame, was answered all the same: its
// pool's consumer acknowledged it (its ack floor is at or past the
// envelope's stream sequence; the agent acknowledges a request only once
// its final frame is stored), and the responses stream's leader confirms
// that no frame of it is stored (a replica answering the reader's direct
// get may lag it). Its frames aged out, then. It is false whenever
// something cannot be read (the envelope's sequence or pool, the consumer,
// the leader): the request is then taken for one not answered yet.
func (s *Service) agedOut(ctx context.Context, id string, env *nats.Msg) (bool, error) {
	return s.AnswerAgedOut(ctx, id, poolOf(env), headerUint(env, subjects.HeaderStreamSequence))
}

// AnswerAgedOut is the check of agedOut for request id stored at sequence
// seq of E2A_REQUESTS under pool, of which a reader found no frame in
// E2A_RESPONSES: true when the request was answered and its frames aged
// out (or were evicted from a full stream) since; false when nothing tells
// (seq 0, no pool, its consumer gone or unreadable) or it was not
// answered. The console shows such a request as expired, not pending. The
// pool's ack floor is cached a few seconds (ackFloorTTL).
func (s *Service) AnswerAgedOut(ctx context.Context, id, pool string, seq uint64) (bool, error) {
	if seq == 0 || pool == "" {
		return false, nil
	}
	names := s.streamNames()
	if floor, ok := s.ackFloor(ctx, names.requests, pool); !ok || floor < seq {
		return false, nil
	}
	subj, err := responseSubject(id)
	if err != nil {
		return false, nil
	}
	_, err = streams.LeaderLastBySubject(ctx, s.nc, names.responses, subj)
	switch {
	case errors.Is(err, streams.ErrNoMessages):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, nil // stored after all: the reader finds it
}
