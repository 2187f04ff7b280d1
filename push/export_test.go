package push

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// readerStage is a stage that only reads (requests, turns, frames), and
// its close.
func readerStage(nc *nats.Conn) (*stage, func(), error) {
	g, err := streams.NewDirectGetter(nc)
	if err != nil {
		return nil, nil, err
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		return nil, nil, err
	}
	return &stage{nc: nc, getter: g, metrics: m, requests: requestCache{max: 100}, mappers: map[string]*mapState{}},
		func() { g.Close() }, nil
}

// V03Takeover renders the updates of request id's stored response
// messages as a replica of the stage that gets them from the from-th on
// (0: all of them): its first message makes it read the task's earlier
// turns and catch up on the request's messages before it (loadTurns,
// catchUp), the next ones it renders one after the other (the task
// builder it started; an error if it rebuilt the task again). It returns
// each update's v0.3 body by event id, and the ids in order.
func V03Takeover(ctx context.Context, nc *nats.Conn, id string, from int) (map[string][]byte, []string, error) {
	s, done, err := readerStage(nc)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	r, err := s.requestOf(ctx, id, "", "")
	if err != nil || !r.found {
		return nil, nil, errors.Join(err, errors.New("no request "+id))
	}
	subj, err := subjects.Response(id)
	if err != nil {
		return nil, nil, err
	}
	out, ids := map[string][]byte{}, []string(nil)
	n := 0
	var state *mapState
	for raw, err := range streams.DirectGetSeq(ctx, nc, streams.ResponsesStream, subj, 0, 64) {
		if err != nil {
			return nil, nil, err
		}
		if n++; n <= from {
			continue
		}
		fs, err := frames(raw.Header, raw.Data)
		if err != nil {
			return nil, nil, err
		}
		m := &message{requestID: id, after: r.after, seq: raw.Seq, firstSeq: fs[0].Sequence, final: fs[len(fs)-1].IsFinal}
		if err := s.render(ctx, s.mappers, r, m, fs, true); err != nil {
			return nil, nil, err
		}
		// The first message read the task back; the next ones go on
		// from the state it made.
		if st := s.mappers[id]; n > from+1 && !m.final && st != state {
			return nil, nil, errors.New("the request's state was rebuilt at message " + strconv.Itoa(n))
		} else if n == from+1 {
			state = st
		}
		for _, e := range m.events {
			out[e.id] = e.v03
			ids = append(ids, e.id)
		}
	}
	return out, ids, nil
}

// V03Rebuilt renders the v0.3 bodies of request id's updates as the
// stage did before its task builder: at each update the task rebuilt by
// a2amap.BuildTask from every stored frame of its turns so far (an update
// before its frame's status update with the status before the frame).
// It returns each body by event id, and how many response messages the
// request has.
func V03Rebuilt(ctx context.Context, nc *nats.Conn, id string) (map[string][]byte, int, error) {
	s, done, err := readerStage(nc)
	if err != nil {
		return nil, 0, err
	}
	defer done()
	r, err := s.requestOf(ctx, id, "", "")
	if err != nil || !r.found {
		return nil, 0, errors.Join(err, errors.New("no request "+id))
	}
	prev, env, err := s.turns(ctx, id, r)
	if err != nil {
		return nil, 0, err
	}
	cur, err := s.storedTurn(ctx, id, env, r)
	if err != nil {
		return nil, 0, err
	}
	msgs, err := messageCount(ctx, nc, id)
	if err != nil {
		return nil, 0, err
	}
	m := a2amap.NewStreamMapper(id, r.params, 0)
	task := func(fs []*e2a.Response) *a2a03.Task {
		return a2amap.V03Task(a2amap.BuildTask(m.TaskID(), m.ContextID(), append(slices.Clone(prev), a2amap.Request{Envelope: env, Frames: fs}), nil))
	}
	out := map[string][]byte{}
	for k, f := range cur.Frames {
		evs, err := m.Events(f)
		if err != nil {
			return nil, 0, err
		}
		evs = a2aproto.FilterEvents(r.params, evs)
		statusAt := -1
		for i, ev := range evs {
			if _, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
				statusAt = i
			}
		}
		before := task(cur.Frames[:k]).Status
		t := task(cur.Frames[:k+1])
		for i := range evs {
			tt := *t
			if i < statusAt {
				tt.Status = before
			}
			b, err := json.Marshal(&tt)
			if err != nil {
				return nil, 0, err
			}
			out[id+":"+strconv.FormatInt(f.Sequence, 10)+":"+strconv.Itoa(i)] = b
		}
	}
	return out, msgs, nil
}

// messageCount is how many response messages request id has stored.
func messageCount(ctx context.Context, nc *nats.Conn, id string) (int, error) {
	subj, err := subjects.Response(id)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, err := range streams.DirectGetSeq(ctx, nc, streams.ResponsesStream, subj, 0, 64) {
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// SetCreateGap has s's creates run f after they read the stream's last
// sequence and before they write the config.
func SetCreateGap(s *Store, f func()) { s.gap = f }

// SetReserved makes s run f after a create took its task's slot, before
// it writes the task key: an error ends the create there (a crash).
func SetReserved(s *Store, f func() error) { s.reserved = f }

// SetSlotGrace replaces slotGrace for s.
func SetSlotGrace(s *Store, d time.Duration) { s.slotGrace = d }

// SlotsKey is the key of principal's task slots in E2A_PUSH.
func SlotsKey(principal string) string { return slotsKey(principal) }

// TaskKey is the key of principal's task's configs in E2A_PUSH.
func TaskKey(principal, taskID string) string { return taskKey(principal, taskID) }

// WithBeforeIntake has the stage run f first in its consumer's callback,
// for each response message: a callback held there keeps the message
// delivered and not in progress, as a slow intake or a full pull buffer
// does.
func WithBeforeIntake(f func(jetstream.Msg)) Option {
	return func(o *options) error { o.beforeIntake = f; return nil }
}

// ParkMessage parks principal's config configID of task taskID with
// request requestID's response message stored at seq, as a replica does
// with a message its config cannot take now (park), and reports whether
// the cursor it left is parked and holds a settle time (cursor.Settle).
// opts are the replica's.
func ParkMessage(ctx context.Context, nc *nats.Conn, principal, taskID, configID, requestID string, seq uint64,
	opts ...Option) (parked, settle bool, err error) {
	o, err := buildOptions(opts)
	if err != nil {
		return false, false, err
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		return false, false, err
	}
	s, err := newStage(ctx, nc, o, m)
	if err != nil {
		return false, false, err
	}
	defer s.getter.Close()
	if err := s.refreshEpoch(ctx); err != nil {
		return false, false, err
	}
	epoch := s.epoch.Load()
	ref := configRef{principal, taskID, configID}
	tc, _, err := readConfigs(ctx, s.kv, taskKey(principal, taskID), nil)
	if err != nil {
		return false, false, err
	}
	i := slices.IndexFunc(tc.Configs, func(c Config) bool { return c.ID == configID })
	if i < 0 {
		return false, false, errors.New("no config " + configID)
	}
	cfg := tc.Configs[i]
	cfg.From = cfg.fromIn(s.epochAt(epoch))
	r, err := s.requestOf(ctx, requestID, "", "")
	if err != nil || !r.found {
		return false, false, errors.Join(err, errors.New("no request "+requestID))
	}
	subj, err := subjects.Response(requestID)
	if err != nil {
		return false, false, err
	}
	page, _, err := streams.DirectGetBatch(ctx, nc, streams.ResponsesStream, subj, seq, 1)
	if err != nil {
		return false, false, err
	}
	fs, err := frames(page[0].Header, page[0].Data)
	if err != nil {
		return false, false, err
	}
	msg := &message{requestID: requestID, after: r.after, seq: page[0].Seq, firstSeq: fs[0].Sequence,
		final: fs[len(fs)-1].IsFinal, stored: page[0].Time}
	if _, err := s.park(item{job: &job{m: msg, epoch: epoch}, cfg: cfg, ref: ref}); err != nil {
		return false, false, err
	}
	cur, _, err := readCursor(ctx, s.kv, ref.cursorKey())
	return cur.parked(), cur.Settle != 0, err
}

// CursorKey is the key of the delivery cursor of principal's config id
// of task taskID in E2A_PUSH.
func CursorKey(principal, taskID, id string) string {
	return configRef{principal, taskID, id}.cursorKey()
}
