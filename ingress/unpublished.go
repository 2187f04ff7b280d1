package ingress

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// A turn is appended to its record before its publish (publishTurnIf),
// and taken out again when the publish fails or the turn is refused once
// recorded (stillOpen); a workflow execution not accepted is taken out of
// its executionId's record the same way (unindexExecution). That removal
// (TaskStore.Remove) is tried once before the caller is answered: the
// answer (a 503, retryable) must come within the publish's bound, and a
// store without a leader (a crash's election, seconds) fails it at once
// ("no responders"). Left listed, the turn, never stored, held the task's
// next turn: its check (stillOpen) awaited it for host.AwaitPublish, and
// the agent runtime, the next turn naming it, for its turnGrace again
// (about 24 s, measured). So a removal that fails is retried in the
// background (takeOutLater), with back-off, until it succeeds (or finds
// the record gone or without the turn), until removeRetryFor has passed,
// or until the server's connection is closed. Each attempt is Remove, a
// compare-and-set on the record's revision that takes out that request
// alone: turns appended meanwhile stay. Meanwhile, the turns this
// replica appends to the record do not name the turn (turnsBefore
// leaves it out, as if taken out already): the task's next turn, sent
// when the store answers again, may come before the retry does.
//
// A retry of the turn itself (its request id, an Idempotency-Key) ends
// the retried removal first when it comes to this replica
// (keepUnpublished); one to another replica is published under the
// listing left (it finds the turn listed), and the removal stops at its
// next attempt, which finds the request stored. Rather than this, the
// next turn could have dropped a turn it finds listed and never stored:
// it cannot tell one whose publish failed from one whose publish is still
// under way (within host.AwaitPublish) but by waiting that long, which is
// the wait to avoid.

// removeRetryFor bounds the background retries of a removal: past it
// the turn stays listed, and the next turn waits for it as before
// (stillOpen, agent turnGrace). A store without a leader for longer
// takes no turn either (every append fails).
const removeRetryFor = time.Minute

// The back-off between two background attempts: doubling from the first
// to the second.
const (
	removeRetryMin = 50 * time.Millisecond
	removeRetryMax = 2 * time.Second
)

// maxUnpublished bounds the removals retried at once: a turn is recorded
// and its publish then fails only in the moment a store loses its
// leader (past it, the appends fail too); more are left listed, logged.
const maxUnpublished = 256

// unpublishedTurns are the removals this server retries in the
// background, by turn.
type unpublishedTurns struct {
	mu    sync.Mutex
	turns map[keptTurn]*unpublishedTurn
}

// unpublishedTurn is one retried removal: stop ends it, done is closed
// when it has.
type unpublishedTurn struct {
	stop context.CancelFunc
	done chan struct{}
}

// takeOut takes requestID out of the record kind/id (a turn never
// published, refused, or an execution not accepted), once now and, when
// that fails, again in the background (takeOutLater); what says what the
// request is in the log.
func (s *Server) takeOut(ctx context.Context, kind, id, requestID, what string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	err := s.opts.tasks.Remove(rctx, kind, id, requestID)
	if err != nil {
		s.opts.log.Warn(what+" left in the task index: retrying its removal", "kind", kind, "task_id", id, "request_id", requestID, "err", err)
		s.takeOutLater(keptTurn{kind, id, requestID})
	}
	return err
}

// takeOutLater retries the removal of turn in the background (see above).
func (s *Server) takeOutLater(turn keptTurn) {
	u := &s.unpublished
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.turns[turn]; ok || s.nc.IsClosed() {
		return
	}
	if len(u.turns) >= maxUnpublished {
		s.opts.log.Warn("too many removals retried: the turn stays listed", "kind", turn.kind, "task_id", turn.id, "request_id", turn.requestID)
		return
	}
	if u.turns == nil {
		u.turns = map[keptTurn]*unpublishedTurn{}
	}
	ctx, stop := context.WithTimeout(context.Background(), removeRetryFor)
	t := &unpublishedTurn{stop: stop, done: make(chan struct{})}
	u.turns[turn] = t
	go func() {
		defer close(t.done)
		defer stop()
		s.retryRemoval(ctx, turn)
		u.mu.Lock()
		if u.turns[turn] == t {
			delete(u.turns, turn)
		}
		u.mu.Unlock()
	}()
}

// retryRemoval is takeOutLater's loop, until ctx ends or the server's
// connection is closed.
func (s *Server) retryRemoval(ctx context.Context, turn keptTurn) {
	closed := s.nc.StatusChanged(nats.CLOSED)
	defer s.nc.RemoveStatusListener(closed)
	wait := removeRetryMin
	log := s.opts.log.With("kind", turn.kind, "task_id", turn.id, "request_id", turn.requestID)
	for {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				log.Warn("unpublished turn left in the task index: the next turn waits for it")
			}
			return
		case <-closed:
			timer.Stop()
			return
		case <-timer.C:
		}
		if s.nc.IsClosed() {
			return
		}
		wait = min(2*wait, removeRetryMax)
		if stored, err := s.removeOnce(ctx, turn); err == nil {
			if stored {
				log.Info("a request whose removal was retried is stored (a retry of it, published since): left in the task index")
			} else {
				log.Info("unpublished turn taken out of the task index")
			}
			return
		}
	}
}

// removeOnce is one attempt of retryRemoval, within removeTimeout: the
// removal of turn unless its request is stored (stored, nothing done).
func (s *Server) removeOnce(ctx context.Context, turn keptTurn) (stored bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	_, _, stored, err = s.egress.Stored(ctx, turn.requestID)
	if err != nil || stored {
		return stored, err
	}
	err = s.opts.tasks.Remove(ctx, turn.kind, turn.id, turn.requestID)
	return false, err
}

// keepUnpublished ends the background removal of turn, if any, and
// waits until it has: the turn is about to be appended and published
// again (a retry of its request id).
func (s *Server) keepUnpublished(turn keptTurn) {
	u := &s.unpublished
	u.mu.Lock()
	t := u.turns[turn]
	delete(u.turns, turn)
	u.mu.Unlock()
	if t != nil {
		t.stop()
		<-t.done
	}
}

// unpublishedIn returns the turns of the record kind/id whose removal
// this server retries (nil when none).
func (s *Server) unpublishedIn(kind, id string) map[string]bool {
	u := &s.unpublished
	u.mu.Lock()
	defer u.mu.Unlock()
	var out map[string]bool
	for turn := range u.turns {
		if turn.kind == kind && turn.id == id {
			if out == nil {
				out = map[string]bool{}
			}
			out[turn.requestID] = true
		}
	}
	return out
}
