package a2amap

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TaskBuilder builds the task of a request frame by frame: after each
// Add, Task is what BuildTask returns for the task's earlier turns and
// this request with the frames added so far, at the cost of the new frame
// instead of a rebuild from every frame (the earlier turns are built
// once, when the builder is made). MarshalV03Task is its JSON in A2A v0.3
// (V03Task), with the texts of the request's content messages escaped as
// they grow rather than at each call. It is not safe for concurrent use.
type TaskBuilder struct {
	taskID string
	base   *a2a.Task // the earlier turns' history, this turn's user message and the context id
	agg    *Aggregator
	frames int
	// mark starts the placeholders MarshalV03Task puts in place of texts
	// and earlier messages (random, so that no text can hold one).
	mark    string
	mirrors map[*strings.Builder]*textMirror
	// baseJSON is the v0.3 JSON of each message of base.History (made at
	// the first MarshalV03Task); pre and post are a placeholder message's JSON
	// before and after its mark (nil: the messages are marshaled each
	// time).
	baseJSON  [][]byte
	pre, post []byte
	// misses counts the MarshalV03Task calls that found a placeholder they
	// could not replace and marshaled the task whole (none expected).
	misses int
}

// sub is what a placeholder stands for: an escaped text, in a JSON
// string, or (obj) a message's JSON, in place of the placeholder message.
type sub struct {
	b   []byte
	obj bool
}

// textMirror is the JSON escape of a content message's text (or
// thought), kept up with the text.
type textMirror struct {
	n   int    // bytes of the text escaped
	esc []byte // their escape, without quotes
	bad bool   // a piece was not valid UTF-8: the text is marshaled whole
}

// NewTaskBuilder returns the builder of the task taskID (context
// contextID, as BuildTask takes them) whose earlier turns are prev and
// whose current request is env's (nil: no envelope).
func NewTaskBuilder(taskID, contextID string, prev []Request, env *e2a.Envelope) *TaskBuilder {
	reqs := make([]Request, 0, len(prev)+1)
	reqs = append(append(reqs, prev...), Request{Envelope: env})
	// With no frame, the last request adds only its user message: the
	// rest is what every later Task starts from.
	base := BuildTask(taskID, contextID, reqs, nil)
	id := ""
	if env != nil {
		id = env.RequestID
	}
	agg := NewAggregator(id, Params{TaskID: taskID, ContextID: base.ContextID})
	// The earlier turns' artifacts, which this request's updates append
	// to or replace (as BuildTask merges them).
	agg.startFrom(base.Artifacts)
	agg.baseMeta = base.Metadata
	return &TaskBuilder{taskID: taskID, base: base, agg: agg,
		mark: "\x00" + rand.Text(), mirrors: map[*strings.Builder]*textMirror{}}
}

// Add adds the request's next frame. An a2a.* frame that does not read
// counts as a frame without content, or, final, ends the request failed,
// as BuildTask reads it ([Aggregator.Add]); the error is always nil.
func (b *TaskBuilder) Add(f *e2a.Response) error {
	b.frames++
	return b.agg.Add(f)
}

// Status is Task().Status, without building the rest.
func (b *TaskBuilder) Status() a2a.TaskStatus {
	a := b.agg
	st := a2a.TaskStatus{State: a.state, Timestamp: a.ts, Message: a.status}
	if n, ok := a.native.(*a2a.Task); ok {
		st = n.Status
	}
	if b.frames == 0 {
		// BuildTask's status of the request without frames: submitted, or
		// the turn's it waits behind.
		st = b.base.Status
	}
	return st
}

// Task is the task after the frames added so far, as BuildTask builds it
// (no history limit). It shares the builder's messages and artifacts:
// use it (marshal it) before the next Add.
func (b *TaskBuilder) Task() *a2a.Task {
	return b.task((*strings.Builder).String)
}

// task is Task with text(sb) for the text of each content message's
// builder sb.
func (b *TaskBuilder) task(text func(sb *strings.Builder) string) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(b.taskID), ContextID: b.base.ContextID, Status: b.Status(), Metadata: b.agg.taskMeta()}
	t.History, t.Artifacts = b.turn(text, true)
	return t
}

// turn is the task's history and artifacts after the request's frames
// added so far (text as task's), the request the task's last (lastReq:
// its final reply in artifacts when it completed) or followed by another
// (BuildTask's reading of each request).
func (b *TaskBuilder) turn(text func(sb *strings.Builder) string, lastReq bool) ([]*a2a.Message, []*a2a.Artifact) {
	history := append([]*a2a.Message(nil), b.base.History...)
	view := *b.agg
	view.msgs = b.agg.sealedMsgs(text)
	switch n := b.agg.native.(type) {
	case *a2a.Message:
		m := *n
		view.msgs = append(view.msgs, &aggMsg{group: "native", msg: &m})
	case *a2a.Task:
		// Its artifacts are in the aggregate's (Aggregator.Add).
		history = append(history, n.History...)
	}
	h, arts := view.history(lastReq)
	return append(history, h...), arts
}

// FollowedBy is the task once the request's frames added so far have
// ended its turn and the task's next request env (nil: one whose
// envelope is not stored) waits behind it without a frame: what BuildTask
// builds over the earlier turns, this request and env's. It is
// submitted, this request's reply stays in history (an earlier turn's),
// an interrupted turn's question too, and env's user message comes last:
// what tasks/get answers while the next turn is queued. Push posts it
// for the final status a queued turn takes back.
func (b *TaskBuilder) FollowedBy(env *e2a.Envelope) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(b.taskID), ContextID: b.base.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted},
		Metadata: b.agg.taskMeta()}
	t.History, t.Artifacts = b.turn((*strings.Builder).String, false)
	if Interrupted(b.agg.state) && b.agg.status != nil {
		t.History = append(t.History, b.agg.status)
	}
	if env != nil {
		if um := userMessage(env, t.ID, t.ContextID); um != nil {
			t.History = append(t.History, um)
		}
	}
	return t
}

// MarshalV03Task is the JSON of Task in A2A v0.3 (V03Task), with status
// st when st is not nil: the bytes json.Marshal makes of it, the texts of
// content messages copied from escapes kept up as they grow and the
// earlier turns' messages from their JSON made once (a placeholder
// marshaled in their place, then replaced).
func (b *TaskBuilder) MarshalV03Task(st *a2a.TaskStatus) ([]byte, error) {
	var subs []sub
	place := func(s sub) string {
		subs = append(subs, s)
		return b.mark + strconv.Itoa(len(subs)-1) + "\x00"
	}
	t := b.task(func(sb *strings.Builder) string {
		m := b.mirror(sb)
		if m.bad {
			return sb.String()
		}
		return place(sub{b: m.esc})
	})
	if err := b.marshalBase(); err != nil {
		return nil, err
	}
	if b.pre != nil {
		for i, mj := range b.baseJSON {
			t.History[i] = &a2a.Message{ID: place(sub{b: mj, obj: true})}
		}
	}
	if st != nil {
		t.Status = *st
	}
	out, err := json.Marshal(V03Task(t))
	if err != nil || len(subs) == 0 {
		return out, err
	}
	if res, ok := b.splice(out, subs); ok {
		return res, nil
	}
	b.misses++
	t = b.Task() // not expected: marshal the texts whole
	if st != nil {
		t.Status = *st
	}
	return json.Marshal(V03Task(t))
}

// marshalBase makes baseJSON, pre and post once.
func (b *TaskBuilder) marshalBase() error {
	if b.baseJSON != nil || len(b.base.History) == 0 {
		return nil
	}
	all := make([][]byte, len(b.base.History))
	for i, m := range b.base.History {
		mj, err := json.Marshal(v03Message(m))
		if err != nil {
			return err
		}
		all[i] = mj
	}
	pm, err := json.Marshal(v03Message(&a2a.Message{ID: b.mark + "0\x00"}))
	if err != nil {
		return err
	}
	esc := []byte(`\u0000` + b.mark[1:] + `0\u0000`)
	if i := bytes.Index(pm, esc); i >= 0 {
		b.pre, b.post = pm[:i], pm[i+len(esc):]
	}
	b.baseJSON = all
	return nil
}

// mirror is the escape of sb's text, brought up to date: each new piece
// escaped alone, which is its part of the whole's escape as long as every
// piece is valid UTF-8 (pieces of whole runes; json.Marshal replaces an
// invalid byte, and a rune split across pieces would be two).
func (b *TaskBuilder) mirror(sb *strings.Builder) *textMirror {
	m := b.mirrors[sb]
	if m == nil {
		m = &textMirror{}
		b.mirrors[sb] = m
	}
	if m.bad || sb.Len() == m.n {
		return m
	}
	piece := sb.String()[m.n:]
	q, err := json.Marshal(piece)
	if err != nil || !utf8.ValidString(piece) {
		m.bad, m.esc = true, nil
		return m
	}
	m.esc = append(m.esc, q[1:len(q)-1]...)
	m.n = sb.Len()
	return m
}

// splice replaces the placeholders in out (each escaped as json.Marshal
// escapes it: \u0000, mark, its index, \u0000; a message's with the rest
// of the placeholder message, pre and post) with subs; false when one
// does not parse.
func (b *TaskBuilder) splice(out []byte, subs []sub) ([]byte, bool) {
	const nul = `\u0000`
	open := []byte(nul + b.mark[1:])
	n := len(out)
	for _, s := range subs {
		n += len(s.b)
	}
	res := make([]byte, 0, n)
	for {
		i := bytes.Index(out, open)
		if i < 0 {
			return append(res, out...), true
		}
		res = append(res, out[:i]...)
		out = out[i+len(open):]
		j := bytes.Index(out, []byte(nul))
		if j < 0 {
			return nil, false
		}
		k, err := strconv.Atoi(string(out[:j]))
		if err != nil || k < 0 || k >= len(subs) {
			return nil, false
		}
		out = out[j+len(nul):]
		if s := subs[k]; s.obj {
			if !bytes.HasSuffix(res, b.pre) || !bytes.HasPrefix(out, b.post) {
				return nil, false
			}
			res, out = res[:len(res)-len(b.pre)], out[len(b.post):]
		}
		res = append(res, subs[k].b...)
	}
}

// sealedMsgs is a.msgs as seal leaves them, without changing them: a
// content message with text in its builders is a copy whose parts start
// with that text (text(builder)).
func (a *Aggregator) sealedMsgs(text func(sb *strings.Builder) string) []*aggMsg {
	out := make([]*aggMsg, len(a.msgs), len(a.msgs)+1)
	for i, m := range a.msgs {
		out[i] = m
		if m.group != "content" || (m.thought.Len() == 0 && !m.texts) {
			continue
		}
		msg := *m.msg
		msg.Parts = append(m.textParts(text), m.msg.Parts...)
		out[i] = &aggMsg{group: m.group, llm: m.llm, msg: &msg, label: m.label, textMeta: m.textMeta, thoughtMeta: m.thoughtMeta}
	}
	return out
}

// v03Message is m in A2A v0.3, as V03Task converts a task's messages.
func v03Message(m *a2a.Message) *legacy.Message { return a2av0.FromV1Message(m) }
