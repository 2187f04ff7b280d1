package ingress

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// Turns of one task or session never overlap. A request that is a turn of
// an A2A or AgentVault task or of an ACP session is appended to the
// record before it is published (but the first turn of a task named by its
// request, which writes no record: TaskRecord) (a compare-and-set on the record's
// revision, so two turns accepted at once, by one replica or two, are
// appended one after the other), and published naming the request the
// record held before it (subjects.HeaderAfterRequest): two concurrent
// turns form a chain, each naming the one before, never both the same
// one. The agent runtime starts a turn once the turn it names has its
// final frame (agent/turns.go). A publish that fails takes the request out
// of the record again.

// removeTimeout bounds the removal of a turn whose publish failed (the
// call's context may be the reason it failed).
const removeTimeout = 5 * time.Second

// publishTurn is publish for a turn of the record of: the request is
// appended to the record, then published after the record's previous
// request. A record that cannot be written is ErrBackpressure (nothing is
// published); the publish metric observes the publish alone. A request id
// the client chose (origin) is looked up before the record is written: one
// of another principal's is ErrConflict with nothing written, so the
// caller's task never lists, even for a moment, a request it may not read.
func (s *Server) publishTurn(ctx context.Context, p Principal, pool string, env *e2a.Envelope, of host.Turn, origin idOrigin) (Accepted, error) {
	kind := KindTask
	if of.Session {
		kind = KindSession
	}
	if of.Created && !of.Session && of.Task.ID == env.RequestID {
		// A new task named by its first request: that request is its
		// record (TaskRecord), nothing is written before it.
		start := time.Now()
		acc, err := s.publishAfter(ctx, p, pool, env, "", origin)
		s.metrics.publish.Observe(time.Since(start).Seconds())
		return acc, err
	}
	if origin == idChosen {
		var err error
		if origin, err = s.checkRequestID(ctx, p, env.RequestID); err != nil {
			return Accepted{}, err
		}
	}
	base := TaskRecord{ID: of.Task.ID, ContextID: of.Task.ContextID, Protocol: of.Task.Protocol, Pool: of.Task.Pool, Principal: p.UserID}
	appendTo := s.opts.tasks.appendRequest
	if of.Created {
		appendTo = s.opts.tasks.appendNew
	}
	rec, added, err := appendTo(ctx, kind, base, env.RequestID, p.Tenant())
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return Accepted{}, err
		}
		s.opts.log.Warn("task index update failed: request refused", "kind", kind, "task_id", of.Task.ID, "request_id", env.RequestID, "err", err)
		return Accepted{}, fmt.Errorf("%w: task index: %v", ErrBackpressure, err)
	}
	start := time.Now()
	acc, err := s.publishAfter(ctx, p, pool, env, rec.Before(env.RequestID), origin)
	s.metrics.publish.Observe(time.Since(start).Seconds())
	if err != nil && added {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		if rerr := s.opts.tasks.Remove(rctx, kind, of.Task.ID, env.RequestID); rerr != nil {
			// The next turn names this one, never stored: the agent runtime
			// runs it after a grace period (agent/turns.go).
			s.opts.log.Warn("unpublished turn left in the task index", "kind", kind, "task_id", of.Task.ID, "request_id", env.RequestID, "err", rerr)
		}
	}
	return acc, err
}
