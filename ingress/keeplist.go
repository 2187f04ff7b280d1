package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// The keeper list: the turns kept longer than a look, one key of
// E2A_TASKS each (keep.<request id>), so that the turns a replica kept
// are kept by another once it stops (a restart, a deploy). The replica
// keeping a turn lists it at its first look that finds the turn running
// (a minute after the publish: the short turns cost nothing), writes the
// key again at a look once it is half of the renewal period old (about
// a write per running turn and quarter of TasksTTL once its looks are a
// quarter apart), each write a compare-and-set on the revision it
// wrote last, and deletes it when the turn is dropped (ended, no longer
// listed by its record, gone from the hot streams). Every replica's
// keeper lists the keys at each round (takeOver) and takes over a turn
// whose key was last written more than two renewal periods ago (its
// keeper gone: a live one writes it at least every period and a half)
// by a compare-and-set of the key on the revision listed, so exactly one
// replica keeps it: the one whose write the bucket stored; the others',
// and the old keeper's next write if it was only slow, are refused, and
// they keep the turn no more. A record is so written again at most
// three quarters of TasksTTL and a round after its last write (its
// keeper's last look left it less than a quarter old, the key is stale
// two quarters after that look and seen at the next round, a minute or a
// sixteenth of the TTL later), within the TTL.
// The key names what its keeper needs (keepListing), nothing secret; it
// lives in E2A_TASKS, which only ingress reads and writes
// (deploy/nats/accounts.conf: the push stage reads task.> keys only, and
// no principal reaches NATS).

// keepListPrefix is the kind of the keeper list's keys in E2A_TASKS.
const keepListPrefix = "keep"

// keepListing is the value of a kept turn's key in the keeper list:
// the turn, and what is kept with its record (keptState): whether its
// author was the open principal (no context claims are kept then) and
// the principals whose push configs of the task are kept.
type keepListing struct {
	Kind      string   `json:"kind,omitempty"`
	ID        string   `json:"id"`
	RequestID string   `json:"request_id"`
	Open      bool     `json:"open,omitempty"`
	PushTo    []string `json:"push_to,omitempty"`
}

// keepListKey is the key of requestID's turn in the keeper list.
func keepListKey(requestID string) (string, error) {
	tok, err := subjects.EncodeID(requestID)
	if err != nil {
		return "", err
	}
	return keepListPrefix + "." + tok, nil
}

// wrongRevision reports whether err is a compare-and-set's refusal: the
// key's last revision is not the one named.
func wrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// listTurn writes turn's key of the keeper list after a look found it
// running: made at the first, written again once half of every old. The
// state returned has the revision written; keep is false when another
// replica keeps the turn now (a write of the key since this replica's
// last: takeOver's).
func (s *Server) listTurn(ctx context.Context, turn keptTurn, st keptState, every time.Duration) (keptState, bool) {
	now := time.Now()
	if st.listRev != 0 && now.Sub(st.listAt) < every/2 {
		return st, true
	}
	key, err := keepListKey(turn.requestID)
	if err != nil {
		return st, true
	}
	kv := s.opts.tasks.kv
	var rev uint64
	if st.listRev == 0 {
		rev, err = kv.Create(ctx, key, st.listing(turn))
		if errors.Is(err, jetstream.ErrKeyExists) {
			// Another replica lists it (a push config stored there):
			// taken over, its principals kept too.
			rev, err = s.takeListing(ctx, key, &st)
		}
	} else {
		rev, err = kv.Update(ctx, key, st.listing(turn), st.listRev)
		if wrongRevision(err) {
			s.opts.log.Info("a running turn is kept by another replica now", "kind", turn.kind, "task_id", turn.id, "request_id", turn.requestID)
			return st, false
		}
	}
	if err != nil {
		s.opts.log.Warn("cannot list a running turn in the keeper list", "kind", turn.kind, "task_id", turn.id, "request_id", turn.requestID, "err", err)
		return st, true
	}
	st.listRev, st.listAt = rev, now
	return st, true
}

// takeListing writes key, another replica's listing of st's turn, with
// st's principals added to its own, by a compare-and-set on the revision
// read.
func (s *Server) takeListing(ctx context.Context, key string, st *keptState) (uint64, error) {
	kv := s.opts.tasks.kv
	e, err := kv.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	var l keepListing
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return 0, err
	}
	for _, p := range l.PushTo {
		if !slices.Contains(st.pushTo, p) {
			st.pushTo = append(st.pushTo, p)
		}
	}
	l.PushTo = st.pushTo
	data, _ := json.Marshal(l)
	return kv.Update(ctx, key, data, e.Revision())
}

// listing is the keeper list's value of turn kept as st.
func (st keptState) listing(turn keptTurn) []byte {
	data, _ := json.Marshal(keepListing{Kind: turn.kind, ID: turn.id, RequestID: turn.requestID, Open: st.by.Open, PushTo: st.pushTo})
	return data
}

// unlistTurn deletes turn's key of the keeper list when this replica
// listed it (and no other has written it since), as the turn is
// dropped.
func (s *Server) unlistTurn(ctx context.Context, turn keptTurn, st keptState) {
	if st.listRev == 0 {
		return
	}
	key, err := keepListKey(turn.requestID)
	if err != nil {
		return
	}
	if err := s.opts.tasks.kv.Purge(ctx, key, jetstream.LastRevision(st.listRev)); err != nil && !wrongRevision(err) {
		s.opts.log.Warn("cannot delete a dropped turn from the keeper list", "kind", turn.kind, "task_id", turn.id, "request_id", turn.requestID, "err", err)
	}
}

// takeOver lists the keeper list and takes over each turn whose key was
// last written more than two renewal periods (every) ago and that this
// replica does not keep: a compare-and-set of the key, as it is, on the
// revision listed; the turn is then looked at in this round. A listing
// costs an ordered consumer on the keys (none when there are none).
func (s *Server) takeOver(every time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	listed, err := s.keepListed(ctx)
	if err != nil {
		if !s.nc.IsClosed() {
			s.opts.log.Warn("cannot read the keeper list", "err", err)
		}
		return
	}
	now := s.opts.tasks.now()
	for _, e := range listed {
		if now.Sub(e.Created()) > 2*every {
			s.takeListed(ctx, e, every)
		}
	}
}

// takeListed takes over the turn of e, a key of the keeper list found
// stale, unless this replica keeps it: a compare-and-set of the key, as it
// is, on e's revision; taken is whether this replica keeps it now (the
// write stored: another replica's, on the same revision, is refused).
func (s *Server) takeListed(ctx context.Context, e jetstream.KeyValueEntry, every time.Duration) (taken bool) {
	var l keepListing
	if json.Unmarshal(e.Value(), &l) != nil {
		return false
	}
	turn := keptTurn{l.Kind, l.ID, l.RequestID}
	k := &s.keeper
	k.mu.Lock()
	_, kept := k.turns[turn]
	k.mu.Unlock()
	if kept {
		return false
	}
	rev, err := s.opts.tasks.kv.Update(ctx, e.Key(), e.Value(), e.Revision())
	if err != nil {
		if !wrongRevision(err) { // else another replica took it
			s.opts.log.Warn("cannot take over a running turn from the keeper list", "key", e.Key(), "err", err)
		}
		return false
	}
	s.opts.log.Info("took over the keeping of a running turn", "kind", turn.kind, "task_id", turn.id, "request_id", turn.requestID,
		"last_kept", e.Created())
	at := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.turns[turn]; !ok {
		k.turns[turn] = keptState{by: tenant.Principal{Open: l.Open}, pushTo: l.PushTo, next: at, wait: every, listRev: rev, listAt: at}
	}
	return true
}

// keepListed are the keys of the keeper list, as they are.
func (s *Server) keepListed(ctx context.Context) ([]jetstream.KeyValueEntry, error) {
	w, err := s.opts.tasks.kv.Watch(ctx, keepListPrefix+".>", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var out []jetstream.KeyValueEntry
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				return out, nil
			}
			out = append(out, e)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
