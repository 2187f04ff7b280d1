package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	a2a "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// event is one task update of a stored response message, rendered for
// the generations of the task's configs.
type event struct {
	// id is stable across redeliveries: <request_id>:<frame sequence>:<n>
	// (the n-th update its frame maps to).
	id   string
	v1   []byte // A2A v1.0 StreamResponse JSON
	v03  []byte // A2A v0.3: the Task as tasks/get answers it after the update
	time time.Time
}

func (e event) body(version string) []byte {
	if version == V03 {
		return e.v03
	}
	return e.v1
}

// message is a stored response message of a task with configs.
type message struct {
	requestID string
	seq       uint64
	after     string // the task's previous turn (E2A-After-Request)
	firstSeq  int64  // e2a sequence of its first frame
	final     bool   // it holds the request's final frame
	stored    time.Time
	events    []event
}

// renderedCache keeps the messages the stage rendered until they are
// settled: a message looked at again (it waits for the one before it, or
// its webhook backs off) is not rendered again, which rebuilt its
// request's mapper and read the request's earlier messages back each
// time. A message rendered without the v0.3 task bodies is rendered again
// once its task has a v0.3 config. A message handed to a parked config
// stays for its drain and is not forgotten when settled: the cache holds
// at most maxRenderedMsgs messages and maxRenderedBytes of their
// updates' bodies (a v0.3 body is the whole task, its earlier turns
// included), then it starts over (a drain renders what it does not find).
// Safe for concurrent use.
type renderedCache struct {
	mu    sync.Mutex
	msgs  map[uint64]renderedMessage
	bytes int
}

// Bounds of renderedCache.
const (
	maxRenderedMsgs  = 10000
	maxRenderedBytes = 64 << 20
)

type renderedMessage struct {
	m     *message
	tasks bool
	size  int
}

// get is the message rendered for stream sequence seq, when it is the
// message of requestID stored at stored: E2A_RESPONSES made again under
// the stage (restored from a backup, or removed and applied again)
// numbers its messages from there again, so the message kept for a
// sequence may be another request's (another tenant's) or another frame's.
func (c *renderedCache) get(seq uint64, requestID string, stored time.Time, tasks bool) *message {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.msgs[seq]; ok && (r.tasks || !tasks) && r.m.requestID == requestID && r.m.stored.Equal(stored) {
		return r.m
	}
	return nil
}

func (c *renderedCache) put(m *message, tasks bool) {
	size := 0
	for _, e := range m.events {
		size += len(e.v1) + len(e.v03) + len(e.id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.msgs[m.seq]; ok {
		c.bytes -= old.size
	}
	if c.msgs == nil || len(c.msgs) >= maxRenderedMsgs || c.bytes+size > maxRenderedBytes {
		c.msgs, c.bytes = map[uint64]renderedMessage{}, 0
	}
	c.msgs[m.seq] = renderedMessage{m: m, tasks: tasks, size: size}
	c.bytes += size
}

func (c *renderedCache) forget(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.msgs[seq]; ok {
		c.bytes -= r.size
		delete(c.msgs, seq)
	}
}

// request is what the stage knows of a request from its envelope: its
// principal (the envelope's user_id) and task; found when the envelope is
// stored and names a task.
type request struct {
	principal, taskID, contextID string
	// owner is the owner of the conversation the request belongs to
	// (e2a.Envelope.Owner): its principal, or for an admin's turn of
	// another principal's task that principal.
	owner  string
	after  string // the previous turn of the task
	params a2amap.Params
	found  bool
}

// same reports whether r and o map alike: the same principal, task,
// context and previous turn. A mapper built for one serves the other; not
// one built for an earlier request under the same id of another principal
// or task.
func (r *request) same(o *request) bool {
	return r.principal == o.principal && r.owner == o.owner && r.taskID == o.taskID && r.contextID == o.contextID && r.after == o.after
}

// principals are the principals whose configs follow r's task: its
// principal, and the owner of its conversation when another.
func (r *request) principals() []string {
	if r.owner == "" || r.owner == r.principal {
		return []string{r.principal}
	}
	return []string{r.principal, r.owner}
}

// ownedBy reports whether principal is one of r's principals.
func (r *request) ownedBy(principal string) bool {
	return principal == r.principal || r.owner != "" && principal == r.owner
}

// turnOf reports whether env is a turn of r's task: the same task, its
// principal or its conversation's owner one of r's (an admin's turn of
// alice's task and alice's own turns are each other's).
func (r *request) turnOf(env *e2a.Envelope) bool {
	return env != nil && env.TaskID != "" && env.TaskID == r.taskID && (r.ownedBy(env.UserID) || r.ownedBy(env.Owner()))
}

// mapState is the mapper of one request (req), fed up to stream sequence fed.
// With tasks (the task has a v0.3 config) it also keeps the task built so
// far (tb: the task's earlier turns, read once by loadTurns, and the
// request's frames fed so far), so that each update's body costs its own
// frame and not a rebuild of the task.
type mapState struct {
	req   *request
	m     *a2amap.Mapper
	fed   uint64
	tasks bool
	tb    *a2amap.TaskBuilder
}

// envelope reads the envelope of requestID and its headers (nil when
// the stream no longer holds it, or it does not decode).
func (s *stage) envelope(ctx context.Context, requestID string) (*e2a.Envelope, nats.Header, error) {
	subj, err := subjects.RequestAnyPool(requestID)
	if err != nil {
		return nil, nil, nil
	}
	msg, err := s.getter.GetLast(ctx, streams.RequestsStream, subj)
	if err == nil && msg == nil {
		msg, err = s.getter.ConfirmLast(ctx, streams.RequestsStream, subj)
	}
	if err != nil || msg == nil {
		return nil, nil, err
	}
	env, err := e2a.FromJSON(msg.Data)
	if err != nil {
		return nil, nil, nil
	}
	return env, msg.Header, nil
}

// requestOf reads (and caches) what the stage needs of requestID's
// envelope, for a message whose frames carry user and task (namedBy). A
// request id may be taken again once the hot streams no longer hold its
// request, so a cached entry may be an earlier request's: it serves only
// a message whose frames name the entry's user and task (none, for a
// request without a user_id: authentication off). For any other (frames
// naming another user or task, or none where the entry has one, as an
// integrator's frames may) the envelope is read again, and so it is for
// every message of an admin's turn of another principal's task (its owner
// is not in its frames: a request id taken again under the same user and
// task by an admin answering another owner's task must not be sent to the
// first owner's configs).
func (s *stage) requestOf(ctx context.Context, requestID, user, task string) (*request, error) {
	if r, ok := s.requests.get(requestID); ok && user == r.principal && task == r.taskID && (r.owner == "" || r.owner == r.principal) {
		return r, nil
	}
	env, h, err := s.envelope(ctx, requestID)
	if err != nil {
		return nil, err
	}
	r := requestFrom(env, h)
	s.requests.put(requestID, r)
	return r, nil
}

// requestFrom is what the stage needs of an envelope env with headers h
// (nil: not stored).
func requestFrom(env *e2a.Envelope, h nats.Header) *request {
	r := &request{}
	if env != nil {
		r.principal, r.owner, r.taskID = env.UserID, env.Owner(), env.TaskID
		if env.TaskID != "" {
			r.contextID, r.after, r.found = env.ContextID, h.Get(subjects.HeaderAfterRequest), true
			// A webhook follows its task, as a continued task's stream does
			// (Continued): the agent's direct answer (agent.Reply) is the
			// task's final status-update carrying it, never a bare Message.
			r.params = a2amap.Params{TaskID: env.TaskID, ContextID: env.ContextID, Continued: true,
				AcceptedOutputModes: env.ExpectedOutputModes, Interaction: a2aproto.Interaction(nil, env)}
		}
	}
	return r
}

// frames decodes a stored response message.
func frames(h nats.Header, data []byte) ([]*e2a.Response, error) {
	return e2a.BurstResponses(h.Get(subjects.HeaderFrames), data)
}

// namedBy is the user_id and task_id every frame of a stored response
// message carries (its envelope's: e2a.ResponseFor copies them), read
// without decoding the frames (jsonstr.Members over each frame's top-level
// members): what prepare checks a cached request with, before it knows
// whether the request's task has configs at all. Both are empty when the
// frames do not all carry the same, or do not scan (escaped member names,
// values that are not plain strings): the envelope is read then.
func namedBy(h nats.Header, data []byte) (user, task string) {
	n, err := e2a.CheckBurst(h.Get(subjects.HeaderFrames), data)
	if err != nil {
		return "", ""
	}
	rest := data
	for i := range n {
		frame := rest
		if n > 1 {
			frame, rest, _ = bytes.Cut(rest, []byte{'\n'})
		}
		var u, t []byte
		ok := jsonstr.Members(frame, func(key, val []byte) bool {
			var good bool
			switch string(key) {
			case "user_id":
				u, good = jsonstr.Plain(val)
				return good
			case "task_id":
				t, good = jsonstr.Plain(val)
				return good
			}
			return true
		})
		switch {
		case !ok:
			return "", ""
		case i == 0:
			user, task = string(u), string(t)
		case string(u) != user || string(t) != task:
			return "", ""
		}
	}
	return user, task
}

// render maps the frames of message seq of requestID to its task updates,
// feeding the request's mapper every earlier frame first when it has not
// seen them (another replica had them, or the stage restarted), so that
// the updates (artifact ids, append flags) and their ids are the same
// whichever replica renders them. A mapper built for another request
// under the same id (req not the same as r) is not fed on: it holds that
// request's task and frames.
// The mappers are s.mappers for the consumer's callback, a drain's own
// for a drain (drainer).
func (s *stage) render(ctx context.Context, mappers map[string]*mapState, r *request, m *message, fs []*e2a.Response, tasks bool) error {
	s.metrics.rendered.Inc()
	st := mappers[m.requestID]
	if st == nil || !st.req.same(r) || st.fed >= m.seq || tasks && !st.tasks {
		st = &mapState{req: r, m: a2amap.NewStreamMapper(m.requestID, r.params, 0), tasks: tasks}
		mappers[m.requestID] = st
		if tasks {
			if err := s.loadTurns(ctx, m.requestID, r, st); err != nil {
				return err
			}
		}
	}
	if err := s.catchUp(ctx, st, m); err != nil {
		return err
	}
	for _, f := range fs {
		var later func() (*e2a.Envelope, error)
		if f.IsFinal {
			later = func() (*e2a.Envelope, error) { return s.laterTurn(ctx, r, m) }
		}
		evs, err := st.renderFrame(m.requestID, r.params, f, later)
		if err != nil {
			return err
		}
		m.events = append(m.events, evs...)
	}
	st.fed = m.seq
	if m.final {
		delete(mappers, m.requestID)
	}
	return nil
}

// renderFrame maps frame f of requestID (the call p) to its task
// updates, each with its id, time and bodies. When f ends the task and
// later (nil: not asked) finds the task's next turn queued behind it,
// the terminal status is written submitted, and the v0.3 Task is the one
// that turn waits in (WithTaskTurns).
func (st *mapState) renderFrame(requestID string, p a2amap.Params, f *e2a.Response, later func() (*e2a.Envelope, error)) ([]event, error) {
	evs, err := st.m.Events(f)
	if err != nil {
		return nil, err
	}
	evs = a2aproto.FilterEvents(p, evs)
	var next *e2a.Envelope
	if i := terminalStatus(evs); i >= 0 && later != nil {
		if next, err = later(); err != nil {
			return nil, err
		}
		if next != nil {
			followed(evs, i)
		}
	}
	ts := time.Now()
	if t := a2amap.FrameTime(f); t != nil {
		ts = *t
	}
	var v03 [][]byte
	if st.tasks {
		if v03, err = st.taskBodies(f, evs, next); err != nil {
			return nil, err
		}
	}
	out := make([]event, 0, len(evs))
	for i, ev := range evs {
		e, err := renderEvent(ev)
		if err != nil {
			return nil, err
		}
		if st.tasks {
			e.v03 = v03[i]
		}
		e.id = requestID + ":" + strconv.FormatInt(f.Sequence, 10) + ":" + strconv.Itoa(i)
		e.time = ts
		out = append(out, e)
	}
	return out, nil
}

// catchUp feeds st the request's messages stored after st.fed and before
// m. The read is whole when it reaches m (or a later message): a replica
// that holds m holds every message before it. When it stops short (a
// replica behind answered), the leader confirms that nothing it left out
// lies before m, or the render fails with errBehind (looked at again).
func (s *stage) catchUp(ctx context.Context, st *mapState, m *message) error {
	if m.firstSeq == 0 {
		return nil
	}
	subj, err := subjects.Response(m.requestID)
	if err != nil {
		return err
	}
	reached := false
	for raw, err := range streams.DirectGetSeq(ctx, s.nc, streams.ResponsesStream, subj, st.fed+1, 64) {
		if err != nil {
			return err
		}
		if raw.Seq >= m.seq {
			reached = true
			break
		}
		fs, err := frames(raw.Header, raw.Data)
		if err != nil {
			st.fed = raw.Seq // skipped, as prepare skips it
			continue
		}
		for _, f := range fs {
			if _, err := st.m.Events(f); err != nil {
				return err
			}
		}
		if st.tasks {
			st.addFrames(fs)
		}
		st.fed = raw.Seq
	}
	if reached {
		return nil
	}
	next, err := streams.LeaderNextBySubject(ctx, s.nc, streams.ResponsesStream, subj, st.fed+1)
	switch {
	case errors.Is(err, streams.ErrNoMessages):
		return nil // m is gone too (E2A_RESPONSES' age)
	case err != nil:
		return err
	case next.Seq < m.seq:
		return fmt.Errorf("%w: message %d of %s before %d", errBehind, next.Seq, m.requestID, m.seq)
	}
	return nil
}

// renderEvent is ev as A2A v1.0 StreamResponse JSON, as the v1.0
// bindings write it.
func renderEvent(ev a2a.Event) (event, error) {
	v1, err := json.Marshal(a2a.StreamResponse{Event: ev})
	if err != nil {
		return event{}, err
	}
	return event{v1: v1}, nil
}

// maxTurns bounds the earlier turns of a task read to rebuild it.
const maxTurns = 100

// loadTurns starts st's task builder from the earlier turns of request
// id's task and its envelope (turns).
func (s *stage) loadTurns(ctx context.Context, id string, r *request, st *mapState) error {
	prev, env, err := s.turns(ctx, id, r)
	if err != nil {
		return err
	}
	st.tb = a2amap.NewTaskBuilder(st.m.TaskID(), st.m.ContextID(), prev, env)
	return nil
}

// turns reads request id's envelope (a stub with its id when it is gone
// or is not r's) and the earlier turns of its task (E2A-After-Request,
// back to the first, at most maxTurns): their envelopes and stored
// frames. The turns' envelopes are read, not taken from the request
// cache, which has no frame of theirs to check its entries with
// (requestOf). A request id is free again once the hot streams no longer
// hold its request, while a task's later turns outlive it: a turn whose
// envelope names another principal or task than r (its id taken again by
// another tenant) ends the turns followed, and is not read; a turn whose
// envelope is gone is a stub with its stored frames that name r's
// principal and task (storedTurn), and ends them too.
func (s *stage) turns(ctx context.Context, id string, r *request) ([]a2amap.Request, *e2a.Envelope, error) {
	env, _, err := s.envelope(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if env == nil || env.UserID != r.principal || env.TaskID != r.taskID {
		env = &e2a.Envelope{RequestID: id}
	}
	var prev []a2amap.Request
	seen := map[string]bool{}
	for id := r.after; id != "" && !seen[id] && len(prev) < maxTurns; {
		seen[id] = true
		penv, h, err := s.envelope(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if penv != nil && !r.turnOf(penv) {
			break // another tenant's request under the id
		}
		rq, err := s.storedTurn(ctx, id, penv, r)
		if err != nil {
			return nil, nil, err
		}
		prev = append(prev, rq)
		id = ""
		if penv != nil {
			id = h.Get(subjects.HeaderAfterRequest)
		}
	}
	slices.Reverse(prev)
	return prev, env, nil
}

// storedTurn is request id's turn: its envelope penv (a stub when it is
// gone: nil) and its stored frames, but those naming another principal
// or task than r's (a user_id or task_id of their own: the request of
// another tenant that took the id, its envelope gone too). A read that does not end with the
// turn's final frame (nothing read, or the turn's last messages not read:
// a replica behind may hold a prefix of them) is confirmed by the
// stream's leader: its last message of the turn is the last read, or the
// render fails with errBehind (looked at again). A turn that ended with
// its final frame costs no confirmation.
func (s *stage) storedTurn(ctx context.Context, id string, penv *e2a.Envelope, r *request) (a2amap.Request, error) {
	rq := a2amap.Request{Envelope: penv}
	if rq.Envelope == nil {
		rq.Envelope = &e2a.Envelope{RequestID: id}
	}
	subj, err := subjects.Response(id)
	if err != nil {
		return a2amap.Request{}, err
	}
	var lastSeq uint64
	final := false
	for raw, err := range streams.DirectGetSeq(ctx, s.nc, streams.ResponsesStream, subj, 0, 64) {
		if err != nil {
			return a2amap.Request{}, err
		}
		lastSeq, final = raw.Seq, false
		fs, err := frames(raw.Header, raw.Data)
		if err != nil {
			continue // skipped, as prepare skips it
		}
		for _, f := range fs {
			if (f.UserID == "" || r.ownedBy(f.UserID) || penv != nil && f.UserID == penv.UserID) && (f.TaskID == "" || f.TaskID == r.taskID) {
				rq.Frames = append(rq.Frames, f)
			}
		}
		final = len(fs) > 0 && fs[len(fs)-1].IsFinal
	}
	if final {
		return rq, nil
	}
	last, err := streams.LeaderLastBySubject(ctx, s.nc, streams.ResponsesStream, subj)
	switch {
	case errors.Is(err, streams.ErrNoMessages):
	case err != nil:
		return a2amap.Request{}, err
	case last.Seq > lastSeq:
		return a2amap.Request{}, fmt.Errorf("%w: turn %s read up to %d, stored up to %d", errBehind, id, lastSeq, last.Seq)
	}
	return rq, nil
}

// addFrames adds the request's next frames to st's task.
func (st *mapState) addFrames(fs []*e2a.Response) {
	for _, f := range fs {
		// A frame that does not decode adds nothing, as tasks/get skips it.
		_ = st.tb.Add(f)
	}
}

// taskBodies are the v0.3 bodies of the updates evs of frame f: the Task
// as tasks/get answers it once f is stored (what a2amap.BuildTask builds
// over the task's turns; st.tb builds it one frame at a time), what the
// v0.3 SDKs' senders post after each event. An update before the frame's
// status update carries the status the task had before the frame, so a
// terminal state comes only with the last update. With next (the
// task's next turn, queued behind this one: not nil only for the frame
// that ends it) the Task after f is the one next waits in.
func (st *mapState) taskBodies(f *e2a.Response, evs []a2a.Event, next *e2a.Envelope) ([][]byte, error) {
	statusAt := -1
	for i, ev := range evs {
		if _, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			statusAt = i
		}
	}
	var before a2a.TaskStatus
	if statusAt > 0 {
		before = st.tb.Status() // after the frames before f: the same on every replica
	}
	st.addFrames([]*e2a.Response{f})
	if len(evs) == 0 {
		return nil, nil
	}
	var after []byte
	var err error
	if next != nil {
		after, err = json.Marshal(a2amap.V03Task(st.tb.FollowedBy(next)))
	} else {
		after, err = st.tb.MarshalV03Task(nil)
	}
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(evs))
	for i := range out {
		out[i] = after
	}
	if statusAt > 0 {
		b, err := st.tb.MarshalV03Task(&before)
		if err != nil {
			return nil, err
		}
		for i := range statusAt {
			out[i] = b
		}
	}
	return out, nil
}

// requestCache keeps the last requests looked up (cleared when full).
type requestCache struct {
	m   map[string]*request
	max int
}

func (c *requestCache) get(id string) (*request, bool) {
	r, ok := c.m[id]
	return r, ok
}

func (c *requestCache) put(id string, r *request) {
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[string]*request, 256)
	}
	c.m[id] = r
}
