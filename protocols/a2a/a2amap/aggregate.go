package a2amap

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
)

// aggMsg is one agent message being assembled from frames.
type aggMsg struct {
	group   string
	llm     string
	msg     *a2a.Message
	thought strings.Builder
	text    strings.Builder
	texts   bool
	// label is the name, description and metadata of the artifact a
	// content message's text becomes, as its frames' metadata gives them
	// (artifactLabel: the first name and description, every frame's
	// metadata merged); textMeta and thoughtMeta the metadata of its
	// text and reasoning parts (partMetadata, every frame's merged).
	label                 label
	textMeta, thoughtMeta map[string]any
	// textFields and thoughtFields are the A2A v1.0 fields of those parts
	// (MetaArtifactPartFields: the thought's, the last frame's that has
	// some; the text's, its frames': a change of them is another part,
	// whose text starts anew, the text before it in texts).
	textFields, thoughtFields []any
	// done is the text parts before the text being assembled (text), each
	// with its metadata and fields: parts of other fields.
	done []textSeg
	// art, when set, is the id of that artifact (the result of a request
	// that streamed no text: Mapper.artifactID, as its stream names it).
	art a2a.ArtifactID
}

// textSeg is a text part of an aggMsg before its last: its text, its
// metadata and its A2A v1.0 fields (MetaArtifactPartFields).
type textSeg struct {
	text   *strings.Builder
	meta   map[string]any
	fields []any
}

// label is an artifact's name, description, metadata and extensions.
type label struct {
	name, description string
	meta              map[string]any
	extensions        []string
}

// empty reports a label that gives an artifact nothing.
func (l label) empty() bool {
	return l.name == "" && l.description == "" && len(l.meta) == 0 && len(l.extensions) == 0
}

// add is l with the label of a later frame of its artifact: its name
// and description when l has neither, its metadata merged (mergeMeta).
func (l label) add(more label) label {
	if l.name == "" && l.description == "" {
		l.name, l.description = more.name, more.description
	}
	if len(l.extensions) == 0 {
		l.extensions = more.extensions
	}
	l.meta = mergeMeta(l.meta, more.meta)
	return l
}

// artOp is one artifact event of a request, in the order of its frames:
// an artifact (update) of the agent's own (art, appended to the artifact
// of its id when appendTo), or the content message a.msgs[msg] (content),
// which becomes an artifact when the request completes (history).
type artOp struct {
	art      *a2a.Artifact
	appendTo bool
	content  bool
	msg      int
}

// Aggregator assembles the frames of one request into the A2A result of
// message/send (trpc "Non-streaming" rules) and the pieces of a Task.
type Aggregator struct {
	m         *Mapper
	msgs      []*aggMsg
	state     a2a.TaskState
	status    *a2a.Message
	ts        *time.Time
	artifacts []*a2a.Artifact
	// base is the task's artifacts before this request's frames, and ops
	// the request's artifact events, from which history rebuilds the
	// artifacts with the content that a completed request makes
	// artifacts, in the order of the frames.
	base   []*a2a.Artifact
	ops    []artOp
	native a2a.SendMessageResult
	// continued marks a call continuing a task that exists
	// (Params.Continued): its result is the Task, prior its history before
	// this turn's agent messages (Params.Task's).
	continued bool
	prior     []*a2a.Message
	// turnEnded is Params.TurnEnded (called once, by endTurn); now its
	// TurnEnd.Now.
	turnEnded func() TurnEnd
	now       *a2a.Task
	// outModes and interaction are the client's (Params): the parts it
	// does not get (HiddenPart) do not count in historyLength.
	outModes    []string
	interaction bool
	// meta is the task's metadata the request's events give it (A2A's
	// Task.metadata: the metadata of each status-update, merged in
	// order, as a2a-go's task manager merges an event's; an agent's own
	// Task's), baseMeta the task's before this turn (a continued task's).
	meta, baseMeta map[string]any
	// agentTaskMeta is the last MetaTaskMetadata merged into meta: a frame's
	// metadata holds until set again, so the frames after the one that
	// set it carry it too, merged once.
	agentTaskMeta map[string]any
}

// NewAggregator returns the aggregator of requestID's frames for the call
// p (its task and context ids, default the frames').
// A call continuing a task (Params.Continued) starts from the task before
// this turn's frames (Params.Task: its history and artifacts).
func NewAggregator(requestID string, p Params) *Aggregator {
	m := newMapper(p, 0)
	m.requestID = requestID
	a := &Aggregator{m: m, state: a2a.TaskStateSubmitted, continued: p.Continued, turnEnded: p.TurnEnded,
		outModes: p.AcceptedOutputModes, interaction: p.Interaction}
	if p.Task != nil {
		// The task as tasks/get shows it with this turn's message: a
		// continued task's earlier turns, or a new task's user message.
		a.prior = slices.Clone(p.Task.History)
		if p.Continued {
			a.startFrom(p.Task.Artifacts)
			a.baseMeta = p.Task.Metadata
		}
	}
	return a
}

// endTurn reads the task again once the turn has ended
// (Params.TurnEnded, once): its earlier turns as they are now become the
// task this turn continues (the artifacts replayed on theirs), and a
// later turn's task, when there is one, the answer (now).
func (a *Aggregator) endTurn() {
	if a.turnEnded == nil {
		return
	}
	end := a.turnEnded()
	a.turnEnded = nil
	if end.Prior != nil {
		a.prior = slices.Clone(end.Prior.History)
		a.base = end.Prior.Artifacts
		a.baseMeta = end.Prior.Metadata
		a.artifacts = a.contentArtifacts(nil)
	}
	a.now = end.Now
}

// startFrom makes arts (left as they are) the task's artifacts before
// this request's frames.
func (a *Aggregator) startFrom(arts []*a2a.Artifact) {
	a.base = arts
	a.artifacts = cloneArtifacts(arts)
}

func (a *Aggregator) newMsg(r *e2a.Response, group, llm string, p piece) *aggMsg {
	metaLLM := llm
	if metaLLM == "" {
		metaLLM = r.ResponseID
	}
	am := &aggMsg{group: group, llm: llm, msg: &a2a.Message{ID: r.ResponseID, Role: a2a.MessageRoleAgent,
		ContextID: a.m.contextID, Metadata: p.meta(metaLLM)}}
	if group == "content" {
		am.msg.Metadata[MetaObjectType] = ObjectChatCompletion
		a.ops = append(a.ops, artOp{content: true, msg: len(a.msgs)})
	}
	a.msgs = append(a.msgs, am)
	return am
}

// Add adds the next frame r. An a2a.* frame whose body is not the A2A
// object it names is skipped, or, final, ends the request failed
// ([UnreadableFinal]), logged once per aggregator ([Mapper.Events] does
// the same); the error is always nil.
func (a *Aggregator) Add(r *e2a.Response) error {
	a.m.bind(r)
	if a.state == a2a.TaskStateSubmitted {
		a.state = a2a.TaskStateWorking
	}
	a.ts = FrameTime(r)
	if tm, _ := r.Metadata[MetaTaskMetadata].(map[string]any); len(tm) > 0 && !reflect.DeepEqual(tm, a.agentTaskMeta) {
		a.meta, a.agentTaskMeta = mergeMeta(a.meta, tm), tm
	}
	ownEnd := false // r is the agent's own final status-update
	if c, ok := ContentChunk(r); ok {
		if p, ok := chunkPiece(c); ok {
			a.addPiece(r, p)
		}
	} else if ev, final, err := nativeV1(r); err != nil {
		a.m.unreadable(r, err)
		if r.IsFinal {
			a.setStatus(unreadableOutcome.State, a.m.failureMessage(r, unreadableOutcome))
		}
		return nil
	} else {
		a.m.ownIDs(ev, r)
		switch e := ev.(type) {
		case *a2a.Task:
			a.state, a.status = e.Status.State, e.Status.Message
			a.meta = mergeMeta(a.meta, e.Metadata)
			// The task as the agent holds it: its artifacts replace
			// those of the same id.
			for _, art := range e.Artifacts {
				a.putArtifact(art, false)
			}
			if r.IsFinal {
				a.native = e
			}
		case *a2a.Message:
			if r.IsFinal {
				a.native = e
			} else {
				a.msgs = append(a.msgs, &aggMsg{group: "native", msg: e})
			}
		case *a2a.TaskStatusUpdateEvent:
			a.setStatus(e.Status.State, e.Status.Message)
			a.meta = mergeMeta(a.meta, e.Metadata)
			if e.Status.Timestamp != nil {
				a.ts = e.Status.Timestamp
			}
			ownEnd = final
		case *a2a.TaskArtifactUpdateEvent:
			a.mergeArtifact(e)
		}
	}
	if !r.IsFinal {
		return nil
	}
	if _, ok := a.native.(*a2a.Task); ok {
		// The agent's own Task: its status is the task's (set above).
		return nil
	}
	o := FinalOutcome(r)
	a.state = o.State
	if Interrupted(o.State) || ownEnd {
		// The agent's question stays the status message (the frame's
		// own status-update set it), as does the message of the
		// agent's own final status-update (rejected, failed, canceled,
		// completed), as the stream writes it (Mapper.Events: the update
		// closes the stream). A failed one's was replaced by a failure
		// message of its text alone, with another id and an error of no
		// code.
		return nil
	}
	// The status-update the stream ends the task with (Mapper's
	// finalEvents): the frame's status_event_metadata is its metadata,
	// the failure its message (none when completed), the status message
	// before it history.
	a.meta = mergeMeta(a.meta, withEventMeta(nil, r, MetaStatusEventMetadata))
	if o.State != a2a.TaskStateCompleted {
		a.setStatus(o.State, a.m.failureMessage(r, o))
		return nil
	}
	a.setStatus(o.State, nil)
	if a.native != nil {
		// The agent's own final Message ends its turn: completed, the
		// Message its reply (foldNative, BuildTask).
		return nil
	}
	if o.HasResult && !a.hasContent() {
		if parts := resultParts(o.Result); len(parts) > 0 {
			am := a.newMsg(r, "content", LLMResponseID(r), piece{objectType: ObjectChatCompletion})
			am.msg.Parts, am.art = parts, a.m.artifactID(r)
		}
	}
	return nil
}

// hasContent reports a content message with the answer's text (not its
// reasoning alone: Mapper.Events' content), which a final result repeats.
func (a *Aggregator) hasContent() bool {
	for _, m := range a.msgs {
		if m.group != "content" {
			continue
		}
		if m.texts {
			return true
		}
		for _, p := range m.msg.Parts {
			if _, thought := thoughtText(p); !thought {
				return true
			}
		}
	}
	return false
}

// setStatus makes msg the status message of the task, in state: the
// status message before it, if any, moves to history (an agent message
// of the request, in the order of its frames), as a2a-go's task manager
// does for every status-update (A2A: a task's history holds the
// messages it exchanged, a status message once it is replaced).
func (a *Aggregator) setStatus(state a2a.TaskState, msg *a2a.Message) {
	if a.status != nil && a.status != msg {
		a.msgs = append(a.msgs, &aggMsg{group: "native", msg: a.status})
	}
	a.state, a.status = state, msg
}

func (a *Aggregator) addPiece(r *e2a.Response, p piece) {
	llm := LLMResponseID(r)
	var cur *aggMsg
	if n := len(a.msgs); n > 0 && a.msgs[n-1].group == p.group && a.msgs[n-1].llm == llm && p.group != "code" && p.group != "other" {
		cur = a.msgs[n-1]
	} else {
		cur = a.newMsg(r, p.group, llm, p)
	}
	if p.group == "content" {
		cur.label = cur.label.add(artifactLabel(r))
		pm, pf := partMetadata(r), partFieldsOf(r)
		for _, part := range p.parts {
			if text, ok := part.Content.(a2a.Text); ok {
				if p.thought {
					cur.thoughtMeta = mergeMeta(cur.thoughtMeta, pm)
					cur.thoughtFields = orFields(pf, cur.thoughtFields)
					cur.thought.WriteString(string(text))
				} else {
					if cur.texts && !reflect.DeepEqual(pf, cur.textFields) {
						// Another part of the agent's (the A2A bridge
						// writes a part's fields on each of its chunks).
						prev := new(strings.Builder)
						prev.WriteString(cur.text.String())
						cur.done = append(cur.done, textSeg{text: prev, meta: cur.textMeta, fields: cur.textFields})
						cur.text.Reset()
						cur.textMeta = nil
					}
					cur.textMeta = mergeMeta(cur.textMeta, pm)
					cur.textFields = pf
					cur.text.WriteString(string(text))
					cur.texts = true
				}
			}
		}
		return
	}
	cur.msg.Parts = append(cur.msg.Parts, p.parts...)
}

func (a *Aggregator) mergeArtifact(e *a2a.TaskArtifactUpdateEvent) {
	a.putArtifact(e.Artifact, e.Append)
}

// putArtifact merges the agent's artifact (update) art into the
// request's artifacts (putArtifact), and records it.
func (a *Aggregator) putArtifact(art *a2a.Artifact, appendParts bool) {
	if art == nil {
		return
	}
	a.artifacts = putArtifact(a.artifacts, art, appendParts)
	a.ops = append(a.ops, artOp{art: art, appendTo: appendParts})
}

// putArtifact is the artifacts arts with art merged in as A2A's
// artifact-update does it (UpdatedArtifact): with append, art's parts are
// added to those of the artifact of its id; otherwise art replaces that
// artifact, in its place. An artifact of a new id is added last (a copy:
// the parts of those in arts are appended to in place), so arts keep the
// order their ids were first seen in.
func putArtifact(arts []*a2a.Artifact, art *a2a.Artifact, appendParts bool) []*a2a.Artifact {
	if art == nil {
		return arts
	}
	for i, old := range arts {
		if old.ID == art.ID {
			arts[i] = UpdatedArtifact(old, art, appendParts)
			return arts
		}
	}
	return append(arts, UpdatedArtifact(nil, art, appendParts))
}

// UpdatedArtifact is the artifact old (nil: none of art's id yet) once an
// artifact-update carrying art is applied, as A2A's artifact-update does
// it (a2a-go's task manager likewise). With append (appendParts) and an
// old artifact, it is old, changed in place: art's parts added after its
// own, art's metadata merged over its own (art's members win; a new map,
// the old one left as it was). Otherwise it is art whole, replacing old:
// a copy of art whose parts are a slice of its own, which a later append
// may grow without changing art's (its metadata is art's map, which no
// update writes into). art's name and description are the artifact's only
// when art replaces it. Its one copy for the pipeline's readers of
// artifact-updates (the Aggregator, a2abridge's replay), so that they
// cannot drift.
func UpdatedArtifact(old, art *a2a.Artifact, appendParts bool) *a2a.Artifact {
	if appendParts && old != nil {
		old.Parts = append(old.Parts, art.Parts...)
		old.Metadata = mergeMeta(old.Metadata, art.Metadata)
		return old
	}
	c := *art
	c.Parts = slices.Clone(art.Parts)
	return &c
}

// cloneArtifacts is arts, each a copy that putArtifact may append to
// without changing arts'.
func cloneArtifacts(arts []*a2a.Artifact) []*a2a.Artifact {
	var out []*a2a.Artifact
	for _, art := range arts {
		out = putArtifact(out, art, false)
	}
	return out
}

// seal writes the assembled text of content messages into their parts.
func (a *Aggregator) seal() {
	for _, m := range a.msgs {
		if m.group != "content" || (m.thought.Len() == 0 && !m.texts) {
			continue
		}
		m.msg.Parts = append(m.textParts((*strings.Builder).String), m.msg.Parts...)
		m.thought.Reset()
		m.text.Reset()
		m.texts, m.done = false, nil
	}
}

// textParts is the parts of content message m's assembled text, text(sb)
// that of each builder sb: its reasoning, then its text, each with its
// metadata.
func (m *aggMsg) textParts(text func(sb *strings.Builder) string) a2a.ContentParts {
	var parts a2a.ContentParts
	if m.thought.Len() > 0 {
		p := textPart(text(&m.thought), withPartMeta(map[string]any{MetaThought: true}, m.thoughtMeta))
		setPartFields(a2a.ContentParts{p}, m.thoughtFields)
		parts = append(parts, p)
	}
	for _, seg := range m.done {
		p := textPart(text(seg.text), seg.meta)
		setPartFields(a2a.ContentParts{p}, seg.fields)
		parts = append(parts, p)
	}
	if m.texts {
		p := textPart(text(&m.text), m.textMeta)
		setPartFields(a2a.ContentParts{p}, m.textFields)
		parts = append(parts, p)
	}
	return parts
}

// Result returns the message/send result of the frames added: the
// frame's own Message or Task when an a2a.* final frame carried one, a
// Message when a completed request answered with one content message and
// no artifact (nor a name, description or metadata for its artifact:
// MetaArtifactName, MetaArtifactMetadata, which a Message cannot carry),
// else the Task
// ([Aggregator.Task]). Those direct answers are
// for a message that created no task only: the answer to a message
// continuing a task (Params.Continued: the answer to input-required, any
// later turn) is always the Task, as tasks/get then shows it (the agent's
// own Message one of its replies, as BuildTask reads it), since the client
// knows the task already (a2a-go/v2's own server refuses a Message once
// the task is stored).
func (a *Aggregator) Result(historyLength *int) a2a.SendMessageResult {
	a.m.bind(&e2a.Response{RequestID: a.m.requestID})
	if a.continued {
		a.endTurn()
		a.foldNative()
		return a.Task(historyLength)
	}
	if a.native != nil {
		return a.native
	}
	a.seal()
	if a.state == a2a.TaskStateCompleted && len(a.msgs) == 1 && a.msgs[0].group == "content" && len(a.artifacts) == 0 &&
		a.msgs[0].label.empty() {
		return a.msgs[0].msg
	}
	return a.Task(historyLength)
}

// Task returns the pieces of this request as a Task, the text of a
// completed request's content messages as its artifacts (history);
// historyLength keeps the last N history messages its client gets (nil:
// all; those it does not get, HiddenPart's, which its renderer drops, do
// not count: a hidden thought last left no message once dropped). A turn
// whose task took a later turn before it ended answers with the task as
// tasks/get shows it then (Params.TurnEnded).
func (a *Aggregator) Task(historyLength *int) *a2a.Task {
	a.m.bind(&e2a.Response{RequestID: a.m.requestID})
	a.endTurn()
	if a.now != nil {
		// A later turn waits: the task as tasks/get shows it.
		t := *a.now
		t.History = a.trimShown(t.History, historyLength)
		return &t
	}
	a.seal()
	t := &a2a.Task{ID: a.m.taskID, ContextID: a.m.contextID,
		Status:   a2a.TaskStatus{State: a.state, Timestamp: a.ts, Message: a.status},
		Metadata: a.taskMeta()}
	history, arts := a.history(true)
	// The artifacts of the task before this turn (a continued task's)
	// and of this turn.
	t.Artifacts = cloneArtifacts(arts)
	// The task before this turn with the turn's message (a new task's:
	// its user message), then the turn's replies, as BuildTask reads the
	// task's last request.
	history = append(slices.Clone(a.prior), history...)
	t.History = a.trimShown(history, historyLength)
	return t
}

// taskMeta is the task's metadata: the task's before this turn, this
// turn's events' merged over it (nil for none).
func (a *Aggregator) taskMeta() map[string]any {
	return mergeMeta(maps.Clone(a.baseMeta), a.meta)
}

// trimShown is trimHistory of h for the aggregator's client: the last n
// messages it gets (a part of which HiddenPart does not hide), with the
// hidden ones among them.
func (a *Aggregator) trimShown(h []*a2a.Message, n *int) []*a2a.Message {
	if n == nil || *n < 0 || len(h) <= *n {
		return h
	}
	hidden := HiddenPart(Params{AcceptedOutputModes: a.outModes, Interaction: a.interaction})
	if hidden == nil || *n == 0 {
		return trimHistory(h, n)
	}
	shown := 0
	for i := len(h) - 1; i >= 0; i-- {
		if slices.ContainsFunc(h[i].Parts, func(p *a2a.Part) bool { return p != nil && !hidden(p) }) {
			if shown++; shown == *n {
				return h[i:]
			}
		}
	}
	return h
}

// foldNative makes the agent's own final Message or Task (an a2a.* final
// frame) part of the task, as BuildTask does: the Message its reply in
// history (the turn completed: Add), the Task's history after the task's
// (its artifacts and status are added already: Add).
func (a *Aggregator) foldNative() {
	switch n := a.native.(type) {
	case *a2a.Message:
		m := *n
		a.msgs = append(a.msgs, &aggMsg{group: "native", msg: &m})
	case *a2a.Task:
		a.prior = append(a.prior, n.History...)
	}
	a.native = nil
}

// history returns the agent messages and the task's artifacts: when
// finalReply and the request completed, every content message's reply
// (its parts but thoughts, which stay in history) is the artifact of its
// id, as a stream renders its chunks (Mapper.pieceArtifactID: its
// llm_response_id, else the message's id), the text of one id joined in
// order (contentArtifacts); else every message is in history and the
// artifacts are the agent's own.
func (a *Aggregator) history(finalReply bool) ([]*a2a.Message, []*a2a.Artifact) {
	var history []*a2a.Message
	var replies []a2a.ContentParts // replies[i]: a.msgs[i]'s, for an artifact
	complete := finalReply && a.state == a2a.TaskStateCompleted
	for i, m := range a.msgs {
		msg := *m.msg
		msg.TaskID = a.m.taskID
		if !complete || m.group != "content" {
			history = append(history, &msg)
			continue
		}
		var thoughts, reply a2a.ContentParts
		for _, p := range msg.Parts {
			if _, ok := thoughtText(p); ok {
				thoughts = append(thoughts, p)
			} else {
				reply = append(reply, p)
			}
		}
		if len(thoughts) > 0 {
			tm := msg
			tm.Parts = thoughts
			history = append(history, &tm)
		}
		if len(reply) > 0 {
			if replies == nil {
				replies = make([]a2a.ContentParts, len(a.msgs))
			}
			replies[i] = reply
		}
	}
	if replies == nil {
		return history, slices.Clone(a.artifacts)
	}
	return history, a.contentArtifacts(replies)
}

// contentArtifacts is the task's artifacts with the replies of content
// messages (replies[i]: a.msgs[i]'s, nil for none) as artifacts: the
// artifacts before the request (base), then the request's artifact events
// in order (ops), as a stream carries them: the agent's own merged by
// putArtifact; a reply, the first of its id in the request, replacing
// the artifact of that id (a new one last), the later ones appended to
// it, text to its text (joinParts).
func (a *Aggregator) contentArtifacts(replies []a2a.ContentParts) []*a2a.Artifact {
	arts := cloneArtifacts(a.base)
	written := map[a2a.ArtifactID]bool{}
	for _, op := range a.ops {
		if !op.content {
			arts = putArtifact(arts, op.art, op.appendTo)
			continue
		}
		if op.msg >= len(replies) || len(replies[op.msg]) == 0 {
			continue
		}
		m := a.msgs[op.msg]
		id := cmp.Or(m.art, a2a.ArtifactID(m.llm), a2a.ArtifactID(m.msg.ID))
		if !written[id] {
			written[id] = true
			arts = putArtifact(arts, &a2a.Artifact{ID: id, Name: m.label.name, Description: m.label.description,
				Metadata: m.label.meta, Extensions: m.label.extensions, Parts: replies[op.msg]}, false)
			continue
		}
		for _, art := range arts {
			if art.ID == id {
				art.Parts = joinParts(art.Parts, replies[op.msg])
				if art.Name == "" && art.Description == "" {
					art.Name, art.Description = m.label.name, m.label.description
				}
				art.Metadata = mergeMeta(art.Metadata, m.label.meta)
				if len(art.Extensions) == 0 {
					art.Extensions = m.label.extensions
				}
				break
			}
		}
	}
	return arts
}

// joinParts is parts with more appended, the text of more's first part
// joined to that of parts' last when both are plain text (no metadata).
func joinParts(parts, more a2a.ContentParts) a2a.ContentParts {
	if n := len(parts); n > 0 && len(more) > 0 {
		last, lok := plainText(parts[n-1])
		first, fok := plainText(more[0])
		if lok && fok {
			parts[n-1] = textPart(last+first, nil)
			more = more[1:]
		}
	}
	return append(parts, more...)
}

// plainText is the text of a text part without metadata.
func plainText(p *a2a.Part) (string, bool) {
	t, ok := p.Content.(a2a.Text)
	return string(t), ok && len(p.Metadata) == 0 && p.Filename == "" && p.MediaType == ""
}

func trimHistory(h []*a2a.Message, n *int) []*a2a.Message {
	if n == nil || *n < 0 || len(h) <= *n {
		return h
	}
	return h[len(h)-*n:]
}

// Request is one request of a task, for rebuilding the task: its
// envelope and its frames (in order, possibly without a final frame).
type Request = egress.StoredRequest

// BuildTask rebuilds an A2A Task from the requests of the task, in
// order (tasks/get): each request's user message (from its envelope) and
// agent messages in history (an interrupted earlier turn's question too),
// the artifacts of every request (merged by id in the order first seen, a
// later update of an id appending to or replacing it: putArtifact) and the
// last request's final reply in artifacts, the state of the last request
// (submitted when it has no frame, working while it runs, input-required
// or auth-required with the agent's question as the status message when it
// was interrupted, completed when the agent ended it with its own Message,
// that Message in history) or, while the last request waits without a frame
// behind an earlier turn that has not ended (turns of a task run one after
// another), that turn's. As a2a-go's task manager applies a
// status-update, a status message that a later status replaces (an
// agent's working status-update's message, then its question, the
// failure, or none when the task completes) moves to history, and the
// metadata of every status-update (an agent's own, the final frame's
// status_event_metadata) and of an agent's own Task is merged into the
// task's metadata, in order. historyLength keeps the last N history
// messages.
func BuildTask(taskID, contextID string, reqs []Request, historyLength *int) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(taskID), ContextID: contextID, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	var history []*a2a.Message
	var artifacts []*a2a.Artifact
	// running is the status of the latest request with frames while it
	// has no final frame (nil otherwise).
	var running *a2a.TaskStatus
	warned := new(bool) // an unreadable frame is logged once per task read
	for i, rq := range reqs {
		id := ""
		if rq.Envelope != nil {
			id = rq.Envelope.RequestID
			if t.ContextID == "" {
				t.ContextID = rq.Envelope.ContextID
			}
		}
		if t.ContextID == "" {
			t.ContextID = taskID
		}
		agg := NewAggregator(id, Params{TaskID: taskID, ContextID: t.ContextID})
		agg.m.warned = warned
		// The task's artifacts so far, which this request's updates
		// append to or replace.
		agg.startFrom(artifacts)
		agg.baseMeta = t.Metadata
		if rq.Envelope != nil {
			if um := userMessage(rq.Envelope, a2a.TaskID(taskID), t.ContextID); um != nil {
				history = append(history, um)
			}
		}
		for _, f := range rq.Frames {
			_ = agg.Add(f) // an unreadable frame is skipped (or ends the request failed)
		}
		lastReq := i == len(reqs)-1
		if agg.native != nil {
			switch n := agg.native.(type) {
			case *a2a.Message:
				m := *n
				agg.msgs = append(agg.msgs, &aggMsg{group: "native", msg: &m})
			case *a2a.Task:
				// Its artifacts are in agg.artifacts (Add).
				history = append(history, n.History...)
			}
		}
		agg.seal()
		// The last request's content is its artifacts when it completed;
		// an earlier turn's stays in history.
		h, arts := agg.history(lastReq)
		history = append(history, h...)
		artifacts = arts
		t.Metadata = agg.taskMeta()
		if !lastReq && Interrupted(agg.state) && agg.status != nil {
			// An earlier turn's question, answered by the next turn's
			// user message: history, as a status message becomes once the
			// task moves on.
			history = append(history, agg.status)
		}
		st := a2a.TaskStatus{State: agg.state, Timestamp: agg.ts, Message: agg.status}
		if n, ok := agg.native.(*a2a.Task); ok {
			st = n.Status
		}
		if n := len(rq.Frames); n > 0 {
			running = nil
			if !rq.Frames[n-1].IsFinal {
				running = &st
			}
		}
		if lastReq {
			t.Status = st
			switch {
			case len(rq.Frames) > 0:
			case running != nil:
				// Queued behind the turn that runs: the task is that
				// turn's.
				t.Status = *running
			default:
				t.Status.State = a2a.TaskStateSubmitted
			}
		}
	}
	t.Artifacts = artifacts
	t.History = trimHistory(history, historyLength)
	return t
}

// userMessage returns the user message of a request: params.message when
// it is an A2A message, else its parts as sent when params.part_order
// gives their order (SentParts), else the text of params.text/content/query,
// then its files and data parts (ParamParts), with the message's reference
// tasks (params.reference_task_ids), extensions and metadata, and its role
// (params.role "agent", or AgentVault's "assistant": the agent's; else
// the user's); nil when the request has neither text nor parts. A message
// of data or file parts only was left out of the task's history.
func userMessage(env *e2a.Envelope, taskID a2a.TaskID, contextID string) *a2a.Message {
	if mv, ok := env.Params["message"].(map[string]any); ok {
		if ev, err := decodeA2AEvent("message", mv); err == nil {
			if old, ok := ev.(*legacy.Message); ok {
				if m, err := a2av0.ToV1Message(old); err == nil {
					m.TaskID, m.ContextID = taskID, contextID
					if m.Role == a2a.MessageRoleUnspecified {
						m.Role = a2a.MessageRoleUser
					}
					return m
				}
			}
		}
	}
	parts, sent := SentParts(env)
	if !sent {
		for _, k := range []string{"text", "content", "query"} {
			if s := env.ParamString(k); s != "" {
				parts = append(parts, textPart(s, nil))
				break
			}
		}
		parts = append(parts, ParamParts(env)...)
	}
	if len(parts) == 0 {
		return nil
	}
	id := env.MessageID
	if id == "" {
		id = env.RequestID
	}
	role := a2a.MessageRoleUser
	if r := env.ParamString("role"); r == "agent" || r == "assistant" {
		role = a2a.MessageRoleAgent
	}
	m := &a2a.Message{ID: id, Role: role, TaskID: taskID, ContextID: contextID,
		Parts: parts, ReferenceTasks: referenceTasks(env), Metadata: env.A2AMetadata}
	m.Extensions = Extensions(env)
	return m
}

// Extensions are the extensions (URIs) of a request's A2A message, which
// the normalizer keeps in params.extensions; nil for none.
func Extensions(env *e2a.Envelope) []string {
	var out []string
	if ext, ok := env.Params["extensions"].([]any); ok {
		for _, x := range ext {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// referenceTasks are the message's referenceTaskIds an A2A request's
// envelope keeps in params.reference_task_ids (the normalizer's A2A
// adapter); nil for none.
func referenceTasks(env *e2a.Envelope) []a2a.TaskID {
	var ids []a2a.TaskID
	switch v := env.Params["reference_task_ids"].(type) {
	case []any:
		for _, id := range v {
			if s, ok := id.(string); ok && s != "" {
				ids = append(ids, a2a.TaskID(s))
			}
		}
	case []string:
		for _, s := range v {
			if s != "" {
				ids = append(ids, a2a.TaskID(s))
			}
		}
	}
	return ids
}
