package push

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// event is one task update of a stored response message, rendered for
// both generations.
type event struct {
	// id is stable across redeliveries: <request_id>:<frame sequence>:<n>
	// (the n-th update its frame maps to).
	id   string
	v1   []byte // A2A v1.0 StreamResponse JSON
	v03  []byte // A2A v0.3 event JSON
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
	events    []event
}

// request is what the stage knows of a request: its principal and task
// (none when its envelope is gone or names no task).
type request struct {
	principal, taskID, contextID string
	after                        string // the previous turn of the task
	params                       a2amap.Params
	found                        bool
}

// mapState is the mapper of one request, fed up to stream sequence fed.
type mapState struct {
	m   *a2amap.Mapper
	fed uint64
}

// requestOf reads (and caches) the envelope of requestID.
func (s *stage) requestOf(ctx context.Context, requestID string) (*request, error) {
	if r, ok := s.requests.get(requestID); ok {
		return r, nil
	}
	subj, err := subjects.RequestAnyPool(requestID)
	if err != nil {
		return &request{}, nil
	}
	msg, err := s.getter.GetLast(ctx, streams.RequestsStream, subj)
	if err == nil && msg == nil {
		msg, err = s.getter.ConfirmLast(ctx, streams.RequestsStream, subj)
	}
	if err != nil {
		return nil, err
	}
	r := &request{}
	if msg != nil {
		if env, err := e2a.FromJSON(msg.Data); err == nil && env.TaskID != "" {
			r = &request{principal: env.UserID, taskID: env.TaskID, contextID: env.ContextID, found: true,
				after: msg.Header.Get(subjects.HeaderAfterRequest),
				params: a2amap.Params{TaskID: env.TaskID, ContextID: env.ContextID,
					AcceptedOutputModes: env.ExpectedOutputModes, Interaction: a2aproto.Interaction(nil, env)}}
		}
	}
	s.requests.put(requestID, r)
	return r, nil
}

// frames decodes a stored response message.
func frames(h nats.Header, data []byte) ([]*e2a.Response, error) {
	return e2a.BurstResponses(h.Get(subjects.HeaderFrames), data)
}

// render maps the frames of message seq of requestID to its task updates,
// feeding the request's mapper every earlier frame first when it has not
// seen them (another replica had them, or the stage restarted), so that
// the updates (artifact ids, append flags) and their ids are the same
// whichever replica renders them.
func (s *stage) render(ctx context.Context, r *request, m *message, fs []*e2a.Response) error {
	st := s.mappers[m.requestID]
	if st == nil || st.fed >= m.seq {
		st = &mapState{m: a2amap.NewStreamMapper(m.requestID, r.params, 0)}
		s.mappers[m.requestID] = st
	}
	if err := s.catchUp(ctx, st, m); err != nil {
		return err
	}
	for _, f := range fs {
		evs, err := st.m.Events(f)
		if err != nil {
			return err
		}
		evs = a2aproto.FilterEvents(r.params, evs)
		ts := time.Now()
		if t := a2amap.FrameTime(f); t != nil {
			ts = *t
		}
		for i, ev := range evs {
			e, err := renderEvent(ev)
			if err != nil {
				return err
			}
			e.id = m.requestID + ":" + strconv.FormatInt(f.Sequence, 10) + ":" + strconv.Itoa(i)
			e.time = ts
			m.events = append(m.events, e)
		}
	}
	st.fed = m.seq
	if m.final {
		delete(s.mappers, m.requestID)
	}
	return nil
}

// catchUp feeds st the request's messages stored after st.fed and before
// m.
func (s *stage) catchUp(ctx context.Context, st *mapState, m *message) error {
	if m.firstSeq == 0 {
		return nil
	}
	subj, err := subjects.Response(m.requestID)
	if err != nil {
		return err
	}
	for raw, err := range streams.DirectGetSeq(ctx, s.nc, streams.ResponsesStream, subj, st.fed+1, 64) {
		if err != nil {
			return err
		}
		if raw.Seq >= m.seq {
			break
		}
		fs, err := frames(raw.Header, raw.Data)
		if err != nil {
			return err
		}
		for _, f := range fs {
			if _, err := st.m.Events(f); err != nil {
				return err
			}
		}
		st.fed = raw.Seq
	}
	return nil
}

// renderEvent is ev as A2A v1.0 StreamResponse JSON (the v1.0 bindings'
// conversion, a2aproto.V1Event) and as A2A v0.3 event JSON.
func renderEvent(ev a2a03.Event) (event, error) {
	v03, err := json.Marshal(ev)
	if err != nil {
		return event{}, err
	}
	v, err := a2aproto.V1Event(ev)
	if err != nil {
		return event{}, err
	}
	v1, err := json.Marshal(a2a.StreamResponse{Event: v})
	if err != nil {
		return event{}, err
	}
	return event{v1: v1, v03: v03}, nil
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
