package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/push"
)

// NextTurn waits until the record of kind/id holds a request after
// after (the request that follows it; the newest when after is no longer
// in the record, trimmed by MaxRequestsPerTask) and returns it. It watches
// the record's key, whose first value is the record as it stands, so a
// turn appended before the watch began is found too. ErrTaskNotFound when
// the record is deleted; the context's error when it ends first.
func (s *TaskStore) NextTurn(ctx context.Context, kind, id, after string) (string, error) {
	key, err := taskKey(kind, id)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrTaskNotFound, err)
	}
	w, err := s.kv.Watch(ctx, key)
	if err != nil {
		return "", err
	}
	defer func() { _ = w.Stop() }()
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case e = <-w.Updates():
		}
		if e == nil {
			continue // the initial values delivered
		}
		if e.Operation() != jetstream.KeyValuePut {
			return "", ErrTaskNotFound
		}
		var rec TaskRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return "", fmt.Errorf("ingress: task record %s: %w", key, err)
		}
		if next := nextAfter(rec.RequestIDs, after); next != "" {
			return next, nil
		}
	}
}

// nextAfter is the request after after in ids ("" when none; the newest
// when after is not in ids).
func nextAfter(ids []string, after string) string {
	i := slices.Index(ids, after)
	switch {
	case len(ids) == 0:
		return ""
	case i < 0:
		return ids[len(ids)-1]
	case i < len(ids)-1:
		return ids[i+1]
	}
	return ""
}

// NextTurn is TaskStore.NextTurn for the caller's task t (read already
// under the ownership rule).
func (c caller) NextTurn(ctx context.Context, t *host.Task, after string) (string, error) {
	id, err := c.s.opts.tasks.NextTurn(ctx, KindTask, t.ID, after)
	return id, hostError(err)
}

// LaterTurn is the request after after in the record of the caller's
// task t (read already under the ownership rule) as it is now: "" when
// the task has no record (one turn: its request stands for it), or after
// is its newest or not in it.
func (c rpcCaller) LaterTurn(ctx context.Context, t *host.Task, after string) (string, error) {
	// One direct get (TaskStore.laterTurn): every streamed turn of a task
	// pays it at its end. A record a replica has not yet got (created a
	// moment ago, by a turn accepted as this one ended) reads as none.
	if f := c.s.laterReading.Load(); f != nil {
		(*f)(t.ID)
	}
	next, rec, err := c.s.opts.tasks.laterTurn(ctx, KindTask, t.ID, after)
	if err != nil {
		return "", hostError(err)
	}
	if f := c.s.laterRead.Load(); f != nil {
		(*f)(t.ID, next)
	}
	if next == "" {
		return "", nil
	}
	// The stream shows it to the caller: it must be the task's own
	// (host.Session.OwnRequests: an admin's answer is, another principal's
	// request stored under an id the record lists is not).
	rq, err := c.s.egress.LoadRequestHead(ctx, next)
	if errors.Is(err, egress.ErrNotFound) {
		// Recorded before it is published: its publish, by a writer the
		// record's append checked, is under way. The stream serves it
		// next, and a request not stored yet is one the stream cannot
		// find: wait for it, no longer than a publish takes (one that
		// failed: nothing follows), nor once the record lists it no longer
		// (refused once recorded, stillOpen: nothing follows).
		stored, werr := c.s.egress.AwaitListed(ctx, []string{next}, host.AwaitPublish, c.s.opts.tasks.listing(KindTask, t.ID))
		if werr != nil || !stored {
			return "", hostError(werr)
		}
		if rq, err = c.s.egress.LoadRequestHead(ctx, next); errors.Is(err, egress.ErrNotFound) {
			return next, nil // stored, on a replica this read missed
		}
	}
	if err != nil {
		return "", hostError(err)
	}
	if c.p.Open {
		return next, nil
	}
	sess := c.p.session(rec)
	if _, err := sess.OwnRequests([]egress.StoredRequest{rq}); err != nil {
		return "", nil // not the task's own: nothing of it follows
	}
	return next, nil
}

// later is the request the record r lists after after: "" when r is
// nil (no record: one turn, its request stands for it), or after is its
// newest or not in it.
func (r *TaskRecord) later(after string) string {
	if r == nil || !slices.Contains(r.RequestIDs, after) {
		return ""
	}
	return nextAfter(r.RequestIDs, after)
}

// TaskTurns reads the turn a task's record lists after another for the
// push stage (push.WithTaskTurns), as a turn's stream reads it at its end
// (LaterTurn): one direct get of the record, a replica a write behind
// possibly answering, with no bucket to open first. It does not check
// who owns the turns: the stage does, against the request it renders.
// Safe for concurrent use.
type TaskTurns struct {
	r laterReader
}

var _ push.TaskTurns = (*TaskTurns)(nil)

// NewTaskTurns returns the TaskTurns of the records on nc's server. It
// subscribes the reply inbox of its reads, kept as long as nc (one
// subscription, made here, not at a first read, as the task store's:
// NewTaskStore), and fails when nc cannot subscribe (closed, draining).
func NewTaskTurns(nc *nats.Conn) (*TaskTurns, error) {
	r, err := newLaterReader(nc)
	if err != nil {
		return nil, fmt.Errorf("ingress: task turns: %w", err)
	}
	return &TaskTurns{r: r}, nil
}

// LaterTurn is the request the record of A2A task taskID lists after
// after: "" when the task has no record, or after is its newest or not in
// it.
func (t *TaskTurns) LaterTurn(ctx context.Context, taskID, after string) (string, error) {
	next, _, err := t.r.later(ctx, KindTask, taskID, after)
	return next, err
}

// laterScan is TaskRecord.later of the record data read without decoding
// it: ok is false when the scan cannot tell what encoding/json would
// read (a request_ids member other than one array of plain strings under
// that exact name, more than one, a request id written with escapes before
// the answer is known, data that is no object): decode it then. Data that
// encoding/json refuses may scan: the read is then as for no record.
func laterScan(data []byte, after string) (next string, ok bool) {
	seen := false
	ok = jsonstr.Members(data, func(key, val []byte) bool {
		if !bytes.EqualFold(key, []byte("request_ids")) {
			return true
		}
		if seen || string(key) != "request_ids" {
			return false
		}
		seen = true
		var good bool
		next, good = scanLater(val, after)
		return good
	})
	return next, ok
}

// scanLater reads a request_ids value (an array of plain strings, or
// null) for the id after after (nextAfter's, once after is in it).
func scanLater(val []byte, after string) (string, bool) {
	if string(val) == "null" {
		return "", true
	}
	if len(val) < 2 || val[0] != '[' {
		return "", false
	}
	found := false
	for i := 1; ; {
		i = jsonstr.SkipSpace(val, i)
		switch {
		case i >= len(val):
			return "", false
		case val[i] == ']':
			return "", true
		case val[i] == ',':
			i++
			continue
		case val[i] != '"':
			return "", false
		}
		end := jsonstr.SkipString(val, i)
		if end > len(val) {
			return "", false
		}
		id, ok := jsonstr.Plain(val[i:end])
		switch {
		case !ok:
			return "", false
		case found:
			return string(id), true
		case string(id) == after:
			found = true
		}
		i = end
	}
}

// LaterTurn is rpcCaller's.
func (c caller) LaterTurn(ctx context.Context, t *host.Task, after string) (string, error) {
	return rpcCaller{s: c.s, p: c.p, fresh: c.fresh}.LaterTurn(ctx, t, after)
}
