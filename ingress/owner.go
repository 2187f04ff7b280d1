package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// The front door's side of the ownership rule (package tenant): every path
// that deduplicates, reads, continues, cancels or subscribes to a request,
// task, context or session goes through publish, ownedRecord or
// claimContext below.

// publish publishes env for principal p. A duplicate of a request another
// principal owns is refused with ErrConflict, which reveals nothing of the
// other request (its answer would otherwise be the other's envelope and
// frames). Errors are those of Publisher.Publish, and ErrConflict.
//
// With the pool check on, a pool no worker ever served is ErrUnknownPool
// (nothing is published) and Accepted.Warning tells of a pool with no live
// worker.
func (s *Server) publish(ctx context.Context, p Principal, pool string, env *e2a.Envelope) (Accepted, error) {
	return s.publishAfter(ctx, p, pool, env, "")
}

// publishAfter is publish for a turn that runs after the request after
// (Publisher.PublishAfter; none when "").
func (s *Server) publishAfter(ctx context.Context, p Principal, pool string, env *e2a.Envelope, after string) (Accepted, error) {
	warning, err := s.checkPool(ctx, pool)
	if err != nil {
		return Accepted{}, err
	}
	// A call that streams the frames next subscribes to them first
	// (egress.ExpectStream): a new request then needs no read at open. A
	// failed subscription only loses that.
	pre, perr := s.egress.Prepare(ctx, env.RequestID)
	if perr != nil {
		s.opts.log.Warn("live subscription before publish failed", "request_id", env.RequestID, "err", perr)
	}
	acc, err := s.pub.PublishAfter(ctx, pool, env, after)
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
	}
	if err != nil || !acc.Duplicate || p.Open {
		return acc, err
	}
	// The server said "duplicate", so the original is stored; Owner looks
	// again a few times if a lagging follower answers first.
	owner, found, err := s.egress.Owner(ctx, acc.RequestID)
	if err != nil {
		return acc, fmt.Errorf("%w: owner of a duplicate: %v", ErrBackpressure, err)
	}
	if !found || !p.Tenant().Allows(tenant.Write, owner) {
		return acc, ErrConflict
	}
	return acc, nil
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

// taskOpen checks that an A2A task named by a new message can take it:
// ErrTaskTerminal when its last request has finished (completed, failed,
// canceled; an interrupted turn, input-required or auth-required, leaves
// the task open: the message is the answer), ErrBackpressure when that
// cannot be read.
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
		return fmt.Errorf("%w (task %s has finished); send the message without taskId, with its contextId to continue the conversation", ErrTaskTerminal, rec.ID)
	}
	return nil
}

// claimContext records p as the owner of an A2A context id the client chose,
// or checks that p owns it already. A context of another principal is
// ErrConflict: joining it would let the agent answer from someone else's
// conversation.
func (s *Server) claimContext(ctx context.Context, p Principal, contextID string) error {
	if p.Open || contextID == "" {
		return nil
	}
	key, err := taskKey(KindContext, contextID)
	if err != nil {
		return ErrConflict
	}
	rec := TaskRecord{ID: contextID, Protocol: "a2a", Principal: p.UserID, RequestIDs: []string{},
		Created: e2a.FormatTime(s.opts.now())}
	rec.Updated = rec.Created
	data, _ := json.Marshal(rec)
	if err := s.opts.tasks.create(ctx, key, data); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: context index: %v", ErrBackpressure, err)
	}
	got, err := s.opts.tasks.Get(ctx, KindContext, contextID)
	if err != nil {
		return fmt.Errorf("%w: context index: %v", ErrBackpressure, err)
	}
	if !p.Tenant().Allows(tenant.Write, got.Principal) {
		return ErrConflict
	}
	return nil
}

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
