package a2abridge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// turn is one request's conversation with the agent.
type turn struct {
	u         *Upstream
	env       *e2a.Envelope
	w         agent.Writer
	answered  bool // the agent sent an event of the turn's call (unanswered)
	taskID    a2a.TaskID
	contextID string
	recorded  bool
	artifact  a2a.ArtifactID // the artifact whose id the frames' metadata carries now
	done      bool
	wrote     bool   // the turn wrote a frame (write, rewrite)
	deltas    bool   // e2a.chunk frames were written
	text      answer // the text deltas written, per artifact
	// seen is what the request's frames hold of each artifact (a
	// message's parts under the message's id), and for a continuation
	// what the task's artifacts held before it (its earlier turns'): a
	// task snapshot (GetTask, the first event of a subscription or of a
	// continuation's stream) writes only what is beyond it.
	seen map[a2a.ArtifactID]*written
	// baseline is what a continuation found the task holding (base,
	// baselineOf), recorded with the request's thread; pending: seen
	// holds a baseline read from the record (seedBaseline), resolved
	// against the first task snapshot (resolveBaseline).
	baseline []byte
	pending  bool
	// foreign counts the events of another task than the turn's that
	// the agent's stream carried (dropped: foreignEvent).
	foreign int
	// labeled: the frames' metadata carries the artifact's name,
	// description or metadata too (its first chunk's, or a chunk's whose
	// update changed the metadata); named: the artifacts whose first
	// chunk of the turn carried them; sentMeta: each artifact's metadata
	// as the chunks' carried it (merged, as an A2A client merges it).
	labeled  bool
	named    map[a2a.ArtifactID]bool
	sentMeta map[a2a.ArtifactID]map[string]any
	// partMeta is the text part metadata the frames' metadata carries
	// now (artifact_part_metadata), on every chunk of a part with some;
	// partFields the A2A v1.0 fields of the frame's parts that v0.3's
	// text and data parts lack (artifact_part_fields: mediaType,
	// filename), on every chunk of a part with some and on every native
	// frame of parts with some.
	partMeta   map[string]any
	partFields []any
	// eventMeta is the metadata of the agent's artifact-update event
	// being written (A2A TaskArtifactUpdateEvent.metadata; nil for any
	// other event), which the frames of its parts carry
	// (artifact_event_metadata on a chunk, the native event's own);
	// statusMeta that of the status-update being written (nil for a
	// task snapshot's status), which the final frame carries: a native
	// status_update's own, else status_event_metadata. sentEventMeta
	// and sentStatusMeta are what the frames' metadata carries now.
	eventMeta, sentEventMeta   map[string]any
	statusMeta, sentStatusMeta map[string]any
	finalFrame                 bool // the next frame is the final one: it carries statusMeta
	// failure is the agent's failed status's message the final frame
	// carries (failedMetadata; status_message), nil for none.
	failure map[string]any
	// lastChunk: the artifact-update being written is its artifact's
	// last chunk (A2A lastChunk); closing: the piece being written is its
	// last part's, whose frame says so (artifact_last_chunk, or the
	// native event's own); lastSet: the frames' metadata says so now.
	lastChunk, closing, lastSet bool
	// taskMeta is the metadata of the agent's Task event the next frame
	// carries (task_metadata), nil for none: one the frames have not
	// carried yet (sentTaskMeta).
	taskMeta, sentTaskMeta map[string]any
	// said holds the ids of the agent's messages the turn need not
	// write: those it wrote (status messages), and those the task held
	// before it (a continuation's, base) or when a takeover first saw it;
	// saidUnknown: the turn does not know which of the task's messages
	// its frames hold (a takeover, until its first task snapshot). A
	// task snapshot writes the agent's messages it holds beyond said
	// (gapMessages, resubscribe.go).
	said        map[string]bool
	saidUnknown bool
	// tail is the text of no artifact (messages') the request's stored
	// frames end with, since their last chunk of an artifact (a
	// takeover's, readStored), until the turn writes a frame: the worker
	// before may have stopped between a completed status's message and
	// its e2a.complete (storedEnd).
	tail string
	// asked is the interrupted status a continuation found its task in
	// (Call), until the agent sends a status update: a snapshot still
	// showing it is the task before the agent took the message up, not
	// the turn's end (stillAsking).
	asked *a2a.TaskStatus
	// replay holds the artifacts the agent is sending again from their
	// start (replay.go): as rebuilt from its updates so far.
	replay map[a2a.ArtifactID]*a2a.Artifact
}

// event writes the frames of one event of the agent. Once the turn's
// task is known (the first event naming one, or the task a continuation
// or a takeover goes on with), an event naming another task is not this
// request's: it is dropped (foreignEvent), never written as its answer,
// nor does it change the task the turn records and cancels.
func (t *turn) event(ctx context.Context, ev a2a.Event) error {
	t.answered = true
	t.eventMeta, t.statusMeta = nil, nil
	if id := eventTask(ev); id != "" && t.taskID != "" && id != t.taskID {
		t.foreignEvent(ev, id)
		return nil
	}
	switch e := ev.(type) {
	case *a2a.Message:
		return t.directMessage(ctx, e)
	case *a2a.Task:
		return t.taskEvent(ctx, e)
	case *a2a.TaskStatusUpdateEvent:
		if err := t.ids(ctx, e.TaskID, e.ContextID); err != nil {
			return err
		}
		t.asked = nil
		if len(e.Metadata) > 0 {
			t.statusMeta = e.Metadata
		}
		return t.status(ctx, e.Status, true)
	case *a2a.TaskArtifactUpdateEvent:
		return t.artifactUpdate(ctx, e)
	}
	return nil
}

// directMessage writes the frames of the agent's message m answering
// the request without a task: the turn records m's context, which the
// next turn goes to, and ends with it (a reply of m alone when nothing
// was written and the writer cannot resume, else m's frames and the
// turn's complete).
func (t *turn) directMessage(ctx context.Context, m *a2a.Message) error {
	t.taskID = ""
	if m.ContextID != "" {
		t.contextID = m.ContextID
	}
	_ = t.record(ctx)
	t.done = true
	if !t.wrote && t.w.ResumeAfter() < 0 {
		return t.reply(m)
	}
	if err := t.message(m); err != nil {
		return err
	}
	return t.complete()
}

// taskEvent writes the frames of a task snapshot the agent sends: the
// agent's messages the frames do not hold yet (gapMessages), then each
// of its artifacts (snapshot), then its status, unless the status is
// still the interrupted one the continuation found (stillAsking). A
// task's metadata other than the frames last gave is kept for the next
// frame (taskMeta).
func (t *turn) taskEvent(ctx context.Context, task *a2a.Task) error {
	if err := t.ids(ctx, task.ID, task.ContextID); err != nil {
		return err
	}
	if len(task.Metadata) > 0 && !reflect.DeepEqual(map[string]any(task.Metadata), t.sentTaskMeta) {
		t.taskMeta = task.Metadata
	}
	t.replay = nil // the task shows each artifact whole
	if t.pending {
		t.resolveBaseline(task)
	}
	// The agent's messages the turn has not written (sent while a
	// stream was cut, or between two polls) come first: a snapshot
	// does not say where they came among its artifacts' parts.
	if err := t.gapMessages(task); err != nil {
		return err
	}
	for _, a := range task.Artifacts {
		if a == nil {
			continue // null in the agent's JSON
		}
		if err := t.snapshot(a); err != nil {
			return err
		}
	}
	if t.stillAsking(task.Status) {
		return nil
	}
	return t.status(ctx, task.Status, false) // a snapshot: its working message was written by gapMessages, or known
}

// artifactUpdate writes the frames of the agent's artifact-update event
// e: a replayed artifact's go to replaying, an update without append of
// an artifact the frames hold replaces it (or starts its replay), and
// any other adds its parts. The event's metadata and last-chunk flag
// hold for its frames only.
func (t *turn) artifactUpdate(ctx context.Context, e *a2a.TaskArtifactUpdateEvent) error {
	if err := t.ids(ctx, e.TaskID, e.ContextID); err != nil {
		return err
	}
	if e.Artifact == nil {
		return nil
	}
	if len(e.Metadata) > 0 {
		t.eventMeta = e.Metadata
	}
	if r := t.replay[e.Artifact.ID]; r != nil {
		return t.replaying(r, e)
	}
	t.lastChunk = e.LastChunk
	defer func() { t.lastChunk = false }()
	if w := t.seen[e.Artifact.ID]; !e.Append && w != nil && w.any {
		// Without append, the update is the artifact whole: it
		// replaces the one the task held (A2A), unless it repeats
		// part of what the frames hold (a replay: replay.go).
		if t.replayStart(e.Artifact) {
			return nil
		}
		return t.replace(e.Artifact)
	}
	return t.parts(e.Artifact, e.Artifact.Parts)
}

// stillAsking reports a snapshot's status that is the interrupted one
// the continuation found its task in (asked): the same state, question
// (its message's id, or no message) and timestamp. An agent may open the
// follow-up turn with its stored task as is (@a2a-js/sdk wants a task
// event first; the SDK's stream ends only at a status update), and a
// task polled right after the message may not have moved yet: the turn
// goes on. An agent that asks again sets a new status (a new timestamp,
// if the same message); a status with neither a message id nor a
// timestamp cannot be told apart and is taken as the agent's.
func (t *turn) stillAsking(st a2a.TaskStatus) bool {
	a := t.asked
	if a == nil || st.State != a.State {
		return false
	}
	sameMsg := st.Message == nil && a.Message == nil ||
		st.Message != nil && a.Message != nil && st.Message.ID != "" && st.Message.ID == a.Message.ID
	sameTime := st.Timestamp == nil && a.Timestamp == nil ||
		st.Timestamp != nil && a.Timestamp != nil && st.Timestamp.Equal(*a.Timestamp)
	told := st.Message != nil || st.Timestamp != nil
	return sameMsg && sameTime && told
}

// eventTask is the task an event names ("" for none).
func eventTask(ev a2a.Event) a2a.TaskID {
	switch e := ev.(type) {
	case *a2a.Message:
		return e.TaskID
	case *a2a.Task:
		return e.ID
	case *a2a.TaskStatusUpdateEvent:
		return e.TaskID
	case *a2a.TaskArtifactUpdateEvent:
		return e.TaskID
	}
	return ""
}

// foreignEvent counts an event of task other, not the turn's, which is
// dropped, and logs it: the first of the turn and then at each power of
// two, with the count so far (an agent whose queues cross may send many).
func (t *turn) foreignEvent(ev a2a.Event, other a2a.TaskID) {
	t.foreign++
	if t.foreign&(t.foreign-1) == 0 {
		t.u.cfg.log.Warn("a2a bridge: the agent's stream carried an event of another task; dropped",
			"request_id", t.env.RequestID, "task", t.taskID, "other_task", other,
			"event", fmt.Sprintf("%T", ev), "dropped", t.foreign)
	}
}

// ids records the upstream task and context ids with the conversation the
// first time they are known, before any frame of the task: a worker that
// takes the request over finds the task to subscribe to.
func (t *turn) ids(ctx context.Context, task a2a.TaskID, contextID string) error {
	if task != "" {
		t.taskID = task
	}
	if contextID != "" {
		t.contextID = contextID
	}
	if t.recorded || t.taskID == "" {
		return nil
	}
	t.recorded = true
	return t.record(ctx)
}

// record writes the upstream ids of the request's thread (its pipeline
// task: the upstream task as the request's own, Thread.SetTask, and as the
// thread's latest) and the conversation's upstream context, once per
// request: when the task (or a direct answer's context) is first known.
// Whether the task then waits for the next message is read from the
// turn's final frame by the next turn (bridge.Conversations.Interrupted),
// not written.
func (t *turn) record(ctx context.Context) error {
	c := t.u.cfg.convs
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := c.Update(ctx, t.u.cfg.pool, t.env, func(conv *bridge.Conversation) {
		conv.UpstreamTaskID, conv.UpstreamTaskOpen = string(t.taskID), false
		if t.contextID != "" {
			conv.UpstreamContextID = t.contextID
		}
		th := conv.Thread(t.env)
		th.UpstreamTaskID, th.UpstreamContextID, th.UpstreamTaskOpen = string(t.taskID), t.contextID, false
		th.SetTask(t.env.RequestID, string(t.taskID))
		if t.baseline != nil {
			th.SetBaseline(t.env.RequestID, t.baseline)
		}
	})
	if err != nil {
		t.u.cfg.log.Warn("a2a bridge: upstream ids not recorded", "request_id", t.env.RequestID, "err", err)
	}
	return nil
}

// status writes a status: the agent's status-update while the task
// works (when working: statusMessage, for a message or metadata), and
// the final frame of a state that ends the turn. A message the turn said
// (by its id: written, or known to the frames) is not written again,
// working or completed: an agent that sends it again, or replays its
// status on a re-subscription.
func (t *turn) status(ctx context.Context, st a2a.TaskStatus, working bool) error {
	text := ""
	if st.Message != nil {
		text = partsText(st.Message.Parts)
	}
	if st.State.Terminal() || st.State == a2a.TaskStateInputRequired || st.State == a2a.TaskStateAuthRequired {
		if err := t.endReplays(); err != nil {
			return err
		}
	}
	switch st.State {
	case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		t.done = true
		return t.ask(st)
	case a2a.TaskStateCompleted:
		t.done = true
		if t.said[msgID(st.Message)] {
			return t.complete() // a message written before (sent again): once
		}
		t.say(st.Message)
		if m := t.scrubbed(st.Message); !t.storedEnd(m) {
			if err := t.message(m); err != nil {
				return err
			}
		}
		if err := t.finalMetadata(); err != nil {
			return err
		}
		return t.complete()
	case a2a.TaskStateFailed:
		t.done = true
		if text == "" {
			text = "the agent's task failed"
		}
		if err := t.failedMetadata(st.Message); err != nil {
			return err
		}
		return t.w.Fail(bridge.CodeFailed, text, false)
	case a2a.TaskStateRejected, a2a.TaskStateCanceled:
		t.done = true
		if st.State == a2a.TaskStateCanceled && ctx.Err() != nil {
			return ctx.Err() // our request's cancel: the runtime ends it cancelled
		}
		return t.end(st)
	}
	if !working || st.Message != nil && t.said[st.Message.ID] || st.Message == nil && len(t.statusMeta) == 0 {
		return nil // a snapshot's (gapMessages), a message said (sent again: a replay, a re-subscription's: once), or nothing to say
	}
	t.say(st.Message)
	return t.statusMessage(st)
}

// statusMessage writes a status-update of the agent's that does not end
// the turn (working, or any state that neither ends the task nor asks
// for input), with its message, as the agent sent it: an a2a.stream_event
// status_update frame, not final, of st's state, message and timestamp
// and the event's metadata (statusMeta; none for a snapshot's), which
// the A2A renderers pass on as the stream's status-update and apply to
// the task as a2a-go's task manager does (the message in history once a
// later status replaces it, the metadata merged into the task's). The
// message keeps its id, role, metadata, extensions and parts (a text or
// data part's mediaType and filename in artifact_part_fields; a thought
// or tool part marked as the renderers read it: thoughtPart), but the
// upstream's task, context and reference task ids (the renderers give it
// the pipeline's); a part that does not encode is left out, logged. E2A
// clients get the frame, ACP clients its parts (agent_message_chunk,
// agent_thought_chunk, tool calls), A2E a status event. The Handler
// scrubs the frame (a status message is the agent's own words, which may
// quote the request's headers).
func (t *turn) statusMessage(st a2a.TaskStatus) error {
	var msg *a2a.Message
	if st.Message != nil {
		msg = t.asSent(st.Message)
		for i, p := range msg.Parts {
			msg.Parts[i] = thoughtPart(p)
		}
	}
	t.tail, t.wrote = "", true
	return t.writeStatus(st, msg, false)
}

// writeStatus writes the agent's status-update of st's state and
// timestamp with message msg (nil: none) and the event's metadata
// (statusMeta), an a2a.stream_event status_update frame: the turn's
// final frame (final, status succeeded), else one in progress. The
// frames' artifact_part_fields are first set to msg's parts'
// (statusFields).
func (t *turn) writeStatus(st a2a.TaskStatus, msg *a2a.Message, final bool) error {
	var parts a2a.ContentParts
	if msg != nil {
		parts = msg.Parts
	}
	if err := t.statusFields(parts); err != nil {
		return err
	}
	ev := a2av0.FromV1TaskStatusUpdateEvent(&a2a.TaskStatusUpdateEvent{
		Status: a2a.TaskStatus{State: st.State, Message: msg, Timestamp: st.Timestamp}, Metadata: t.statusMeta})
	ev.Final = final // auth-required too (the conversion's is not)
	if ev.Status.Message != nil && ev.Status.Message.Parts == nil {
		ev.Status.Message.Parts = a2alegacy.ContentParts{}
	}
	status := e2a.StatusInProgress
	if final {
		status = e2a.StatusSucceeded
	}
	return t.w.Write(e2a.KindA2AStreamEvent, status, e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate, Payload: ev}, final)
}

// encodes reports whether part p of an agent's message encodes (partJSON);
// one that does not is left out, logged.
func (t *turn) encodes(p *a2a.Part) bool {
	if _, err := partJSON(p); err != nil {
		t.u.cfg.log.Warn("a2a bridge: a part of the agent's message left out", "request_id", t.env.RequestID,
			"err", t.u.Scrub(err.Error()))
		return false
	}
	return true
}

// thoughtPart is p marked as the pipeline's renderers read a thought or a
// tool part (metadata thought: true; type function_call or
// function_response), as the bridge's deltas of it are, when its
// metadata marks it otherwise (ADK's adk_thought, adk_type): they keep
// it from a client that did not ask for the trpc interaction spec's
// parts, and ACP's shows it as a thought or a tool call. p itself when
// it is marked so already, or is neither; else a copy.
func thoughtPart(p *a2a.Part) *a2a.Part {
	var key string
	var val any
	switch pc := pieceOf(p); pc.kind {
	case e2a.DeltaReasoning:
		key, val = a2amap.MetaThought, true
	case e2a.DeltaTool:
		key, val = a2amap.MetaPartType, toolType(p.Metadata)
	default:
		return p
	}
	if p.Metadata[key] == val {
		return p
	}
	c := *p
	c.Metadata = maps.Clone(p.Metadata)
	c.Metadata[key] = val
	return &c
}

// msgID is m's id ("" for none, or no m: never said).
func msgID(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	return m.ID
}

// storedEnd reports whether the request's stored frames end with message
// m as status writes a completed status's (a takeover whose worker before
// stopped between the message and its e2a.complete): the text of no
// artifact they end with (tail) ends with m's text, and m's other parts
// are stored under its id.
func (t *turn) storedEnd(m *a2a.Message) bool {
	if m == nil {
		return false
	}
	text, others := "", 0
	for _, p := range m.Parts {
		switch pc := pieceOf(p); {
		case pc.kind == e2a.DeltaText:
			text += pc.delta.(string)
		case pc.kind != "" && !textual(pc.kind):
			others++
		}
	}
	if text == "" && others == 0 || !strings.HasSuffix(t.tail, text) {
		return false
	}
	id := a2a.ArtifactID(m.ID)
	if id == "" {
		id = "message"
	}
	return others == 0 || t.seen[id] != nil && t.seen[id].others >= others
}

// end writes the agent's own end of its task, rejected or canceled (not
// by a cancel of the request), as the request's final frame: the
// agent's final status-update (an a2a.stream_event of branch
// status_update), with its status message, which the A2A renderers pass
// on as the task's end (a2amap.FinalOutcome: TASK_STATE_REJECTED or
// TASK_STATE_CANCELED with the agent's text, where an e2a.error would be
// failed), ACP's as stopReason refusal or cancelled. The message is the
// agent's, its id too (a client of the agent itself sees that id), but
// the upstream's task, context and reference task ids (as
// statusMessage's): the renderers give it the pipeline's task and
// context. The Handler scrubs the frame (final).
func (t *turn) end(st a2a.TaskStatus) error {
	var msg *a2a.Message
	if st.Message != nil {
		m := *st.Message
		m.TaskID, m.ContextID, m.ReferenceTasks = "", "", nil
		msg = &m
	}
	return t.writeStatus(st, msg, true)
}

// statusFields sets the frames' artifact_part_fields (a2amap.PartFields)
// to those of parts, the parts of the message of the status frame written
// next, keeping the rest of their metadata.
func (t *turn) statusFields(parts a2a.ContentParts) error {
	fields := a2amap.PartFields(parts...)
	if reflect.DeepEqual(fields, t.partFields) && t.taskMeta == nil {
		return nil
	}
	return t.metadata(t.artifact, nil, t.partMeta, fields)
}

// ask writes the turn's end asking the client (st: input-required,
// auth-required; e2a.InterruptBody's frame): the agent's status-update,
// final, with its message as the agent sent it (its id too), but its
// thoughts (and empty text parts) and the upstream's task, context and
// reference task ids (as end's): its parts in their
// order, each text part its own (the readers join their text:
// e2a.Response.Interrupt) and its other parts (a form to fill in: a data
// part; a file), with their metadata, their mediaType and filename in
// artifact_part_fields, and the message's metadata and extensions; no
// message when none of its parts is left. A part that does not encode is
// left out, logged. The Handler scrubs the frame (final).
func (t *turn) ask(st a2a.TaskStatus) error {
	var msg *a2a.Message
	if st.Message != nil {
		m := *st.Message
		m.TaskID, m.ContextID, m.ReferenceTasks = "", "", nil
		m.Parts = nil
		for _, p := range st.Message.Parts {
			if pc := pieceOf(p); pc.kind == "" || pc.kind == e2a.DeltaReasoning || !t.encodes(p) {
				continue
			}
			m.Parts = append(m.Parts, p)
		}
		if len(m.Parts) > 0 {
			msg = &m
		}
	}
	return t.writeStatus(st, msg, true)
}

// reply writes the agent's direct answer m (a Message, no task) as the
// turn's first and final frame, the pipeline's own direct answer
// (e2a.ReplyBody's frame: an a2a.stream_event of branch message), so that
// A2A clients get a Message as a client of the agent gets it: its id,
// role, metadata, extensions and parts as sent (a text or data part's
// mediaType and filename in artifact_part_fields, as ask's), but the
// upstream's task, context and reference task ids, which name nothing
// the pipeline's client knows (the renderers give it the pipeline's
// context). A part that does not encode is left out, logged. A stream or
// call that must answer a task (the client's message continued one) gets
// the task's final status-update carrying the Message (a2amap's
// Mapper.Replied, Aggregator.Result). The Handler scrubs the frame
// (final).
func (t *turn) reply(m *a2a.Message) error {
	c := t.asSent(m)
	if err := t.statusFields(c.Parts); err != nil {
		return err
	}
	msg := a2av0.FromV1Message(c)
	if msg.Parts == nil {
		msg.Parts = a2alegacy.ContentParts{}
	}
	return t.w.Write(e2a.KindA2AStreamEvent, e2a.StatusSucceeded,
		e2a.StreamEventBody{Branch: e2a.BranchMessage, Payload: msg}, true)
}

// asSent is an agent's message m as the pipeline's clients get it: its
// id, role, metadata, extensions and parts as the agent sent them, but
// the upstream's task, context and reference task ids, which name nothing
// the pipeline's client can address (the renderers give it the
// pipeline's task and context), and a part that does not encode (left
// out, logged). A copy: its Parts are its own.
func (t *turn) asSent(m *a2a.Message) *a2a.Message {
	c := *m
	c.TaskID, c.ContextID, c.ReferenceTasks = "", "", nil
	c.Parts = a2a.ContentParts{}
	for _, p := range m.Parts {
		if t.encodes(p) {
			c.Parts = append(c.Parts, p)
		}
	}
	return &c
}

// partJSON is p as A2A v0.3 Part JSON (kind text, data or file), its numbers
// as they were written.
func partJSON(p *a2a.Part) (map[string]any, error) {
	return v03JSON(a2av0.FromV1Part(p))
}

// v03JSON is v, an A2A v0.3 object, as a JSON object, its numbers as
// they were written.
func v03JSON(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// scrubbed is a completed status's message (status writes a working
// one as a status_update frame, which the Handler scrubs) with the
// bridge's credentials taken out of its parts: their text (bridge.Scrubber), written as text deltas, and
// their data, file URLs and metadata (bridge.ScrubValue), written as
// artifact updates the Handler does not scan (the answer's content). A
// status message is the agent's own words about its work, which may quote
// the request's headers (a debugging agent's {"request_headers": …}), as
// its errors may (scrubframes.go). m itself when nothing was replaced.
func (t *turn) scrubbed(m *a2a.Message) *a2a.Message {
	if m == nil {
		return nil
	}
	var parts a2a.ContentParts
	for i, p := range m.Parts {
		c, changed := t.scrubbedPart(p)
		if !changed {
			continue
		}
		if parts == nil {
			parts = slices.Clone(m.Parts)
		}
		parts[i] = c
	}
	if parts == nil {
		return m
	}
	c := *m
	c.Parts = parts
	return &c
}

// scrubbedPart is p with the bridge's credentials taken out of its
// content and metadata (a copy; p itself is left as it is), and whether
// anything was.
func (t *turn) scrubbedPart(p *a2a.Part) (*a2a.Part, bool) {
	if p == nil {
		return p, false
	}
	c := *p
	changed := false
	switch x := p.Content.(type) {
	case a2a.Text:
		if s := t.u.Scrub(string(x)); s != string(x) {
			c.Content, changed = a2a.Text(s), true
		}
	case a2a.URL:
		if s := t.u.Scrub(string(x)); s != string(x) {
			c.Content, changed = a2a.URL(s), true
		}
	case a2a.Data:
		if v, ok := bridge.ScrubValue(e2a.CloneValue(x.Value), t.u.Scrub); ok {
			c.Content, changed = a2a.Data{Value: v}, true
		}
	}
	if len(p.Metadata) > 0 {
		if v, ok := bridge.ScrubValue(e2a.CloneValue(map[string]any(p.Metadata)), t.u.Scrub); ok {
			c.Metadata, changed = v.(map[string]any), true
		}
	}
	return &c, changed
}

// complete writes the final e2a.complete frame. Its result names the
// upstream's task and context and holds the answer's text, when the
// answer had text, reasoning or tool deltas; else it has none: the A2A
// renderers make a part of the result of an answer without deltas, and
// an answer of files or data parts has nothing to add. A text too large
// for one frame (the NATS server's max_payload) was written in text
// frames that fit: the result then says so (text_omitted) instead of
// holding it, as the OpenAI bridge's does (content_omitted).
func (t *turn) complete() error {
	if !t.deltas {
		return t.w.Complete(nil)
	}
	res := map[string]any{"upstream_context_id": t.contextID, "text": t.text.String()}
	if t.taskID != "" {
		res["upstream_task_id"] = string(t.taskID)
	}
	err := t.w.Complete(res)
	if errors.Is(err, agent.ErrFrameTooLarge) {
		delete(res, "text")
		res["text_omitted"] = "larger than a frame: concatenate the text deltas"
		err = t.w.Complete(res)
	}
	return err
}

// message writes a message's parts: its text as deltas of no artifact,
// its data and file parts as an artifact named after the message.
func (t *turn) message(m *a2a.Message) error {
	if m == nil {
		return nil
	}
	id := a2a.ArtifactID(m.ID)
	if id == "" {
		id = "message"
	}
	for _, p := range m.Parts {
		pc := pieceOf(p)
		if pc.kind == "" {
			continue
		}
		var err error
		if textual(pc.kind) {
			err = t.write("", nil, pc)
		} else {
			err = t.write(id, nil, pc)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parts writes an artifact update's parts, each as its frame.
func (t *turn) parts(a *a2a.Artifact, parts a2a.ContentParts) error {
	last := -1 // the last part written: an update's last chunk ends there (lastChunk)
	for i, p := range parts {
		if pieceOf(p).kind != "" {
			last = i
		}
	}
	defer func() { t.closing = false }()
	for i, p := range parts {
		if pc := pieceOf(p); pc.kind != "" {
			t.closing = t.lastChunk && i == last
			if err := t.write(a.ID, a, pc); err != nil {
				return err
			}
		}
	}
	return nil
}

// snapshot writes what an artifact as the task holds it has beyond what
// the request's frames hold: the text of each kind past the text written,
// the other parts after those written. An artifact that does not extend
// what the frames hold (the agent replaced it) is written whole
// (rewrite).
func (t *turn) snapshot(a *a2a.Artifact) error {
	c, w := contentsOf(a), t.seenOf(a.ID)
	if !c.extends(w) {
		return t.rewrite(a)
	}
	for _, kind := range c.kinds {
		if done := w.text[kind]; len(c.full[kind]) > len(done) {
			pc := textPiece(kind, c.full[kind][len(done):])
			pc.part.Metadata = withThought(c.meta[kind], kind)
			pc.part.MediaType, pc.part.Filename = c.media[kind], c.filename[kind]
			if err := t.write(a.ID, a, pc); err != nil {
				return err
			}
		}
	}
	for _, pc := range c.others[w.others:] {
		if err := t.write(a.ID, a, pc); err != nil {
			return err
		}
	}
	return nil
}

// replace writes artifact a, an update without append of an artifact the
// frames hold: it replaces that artifact. When both are text only and
// a's text extends what was written, a's text past it is written (as an
// append of it would have been); else a whole (rewrite).
func (t *turn) replace(a *a2a.Artifact) error {
	if c, w := contentsOf(a), t.seenOf(a.ID); w.others == 0 && len(c.others) == 0 && c.extends(w) {
		return t.snapshot(a)
	}
	return t.rewrite(a)
}

// rewrite writes artifact a whole as one native artifact_update without
// append, which replaces the artifact of its id in an A2A client's view,
// and makes a what the frames hold of it.
func (t *turn) rewrite(a *a2a.Artifact) error {
	w := &written{text: map[string]string{}, any: true, native: true}
	var parts a2a.ContentParts
	for _, p := range a.Parts {
		if pc := pieceOf(p); pc.kind != "" {
			parts = append(parts, p)
			w.add(pc)
		}
	}
	if len(parts) == 0 {
		return nil // an artifact_update has a part at least (a2a.proto)
	}
	if err := t.metadata(a.ID, nil, nil, a2amap.PartFields(parts...)); err != nil {
		return err
	}
	t.tail, t.wrote = "", true
	if err := t.writeNative(a.ID, a, parts, false, t.lastChunk); err != nil {
		return err
	}
	t.seenOf(a.ID)
	t.seen[a.ID] = w
	t.text.replace(a.ID, w.text[e2a.DeltaText])
	return nil
}

// base records the artifacts of task, as a continuation finds it, as
// what the frames hold, and its messages as said: they are its earlier
// turns' answers, not this one's.
func (t *turn) base(task *a2a.Task) {
	t.sayAll(task)
	for _, a := range task.Artifacts {
		if a == nil {
			continue
		}
		w := t.seenOf(a.ID)
		for _, p := range a.Parts {
			if pc := pieceOf(p); pc.kind != "" {
				w.add(pc)
				w.native = w.native || !textual(pc.kind)
			}
		}
	}
}

// contents is what an artifact holds: the text of each kind (text,
// reasoning), the kinds in the order they come, and its other parts;
// meta the metadata of the text parts of each kind, merged.
type contents struct {
	full   map[string]string
	kinds  []string
	others []piece
	meta   map[string]map[string]any
	// media and filename are the mediaType and filename of the text
	// parts of each kind (the last part's that has one).
	media, filename map[string]string
}

func contentsOf(a *a2a.Artifact) contents {
	c := contents{full: map[string]string{}, meta: map[string]map[string]any{},
		media: map[string]string{}, filename: map[string]string{}}
	for _, p := range a.Parts {
		pc := pieceOf(p)
		switch s, ok := pc.delta.(string); {
		case pc.kind == "":
		case ok:
			if _, seen := c.full[pc.kind]; !seen {
				c.kinds = append(c.kinds, pc.kind)
			}
			c.full[pc.kind] += s
			c.media[pc.kind] = cmp.Or(pc.part.MediaType, c.media[pc.kind])
			c.filename[pc.kind] = cmp.Or(pc.part.Filename, c.filename[pc.kind])
			if md := partMetadata(pc); md != nil {
				if c.meta[pc.kind] == nil {
					c.meta[pc.kind] = map[string]any{}
				}
				maps.Copy(c.meta[pc.kind], md)
			}
		default:
			c.others = append(c.others, pc)
		}
	}
	return c
}

// extends reports whether c holds what w does, and maybe more: the text
// of each kind written as the start of its own, as many other parts.
func (c contents) extends(w *written) bool {
	if w.stale {
		return false
	}
	for kind, done := range w.text {
		if !strings.HasPrefix(c.full[kind], done) {
			return false
		}
	}
	return len(c.others) >= w.others
}

// write writes one piece of artifact id (a of its first frame; "" for a
// message's text) and records it. Text, reasoning and tool deltas are
// e2a.chunk frames with the artifact's id as their llm_response_id (the
// first of the turn with the artifact's name, description and metadata
// too, and one whose update changed the metadata with it; each text or
// reasoning chunk with its part's metadata: metadata); data and file
// parts, and every later part of an artifact that had one, are
// a2a.stream_event artifact_update frames (native), so that A2A clients
// get the parts and the artifact as the agent sent them.
func (t *turn) write(id a2a.ArtifactID, a *a2a.Artifact, pc piece) error {
	t.tail = "" // the stored frames no longer end there
	t.wrote = true
	w := t.seenOf(id)
	chunk := textual(pc.kind) && !w.native
	var label *a2a.Artifact
	if chunk && a != nil && id != "" && ((a.Name != "" || a.Description != "" || len(a.Metadata) > 0 || len(a.Extensions) > 0) && !t.named[id] ||
		t.newMeta(id, a.Metadata)) {
		label = a
	}
	var partMeta map[string]any
	if chunk && pc.kind != e2a.DeltaTool {
		partMeta = partMetadata(pc)
	}
	var fields []any
	if pc.kind != e2a.DeltaTool {
		fields = a2amap.PartFields(pc.part) // a message's text's too: the renderers make it an artifact's part
	}
	if err := t.metadata(id, label, partMeta, fields); err != nil {
		return err
	}
	if label != nil {
		if t.named == nil {
			t.named = map[a2a.ArtifactID]bool{}
		}
		t.named[id] = true
		if len(a.Metadata) > 0 {
			if t.sentMeta == nil {
				t.sentMeta = map[a2a.ArtifactID]map[string]any{}
			}
			md := maps.Clone(t.sentMeta[id])
			if md == nil {
				md = map[string]any{}
			}
			maps.Copy(md, a.Metadata)
			t.sentMeta[id] = md
		}
	}
	var err error
	if chunk {
		err = t.w.Chunk(pc.kind, pc.delta)
		t.deltas = true
		if pc.kind == e2a.DeltaText {
			t.text.add(id, pc.delta.(string))
		}
	} else {
		err = t.writeNative(id, a, a2a.ContentParts{pc.part}, w.any, t.closing)
		w.native = true
		if pc.kind == e2a.DeltaText {
			t.text.extend(id, pc.delta.(string))
		}
	}
	if err != nil {
		return err
	}
	w.add(pc)
	return nil
}

// metadata sets the frames' llm_response_id to artifact id (none for
// ""), with label's name, description and metadata (artifact_name,
// artifact_description, artifact_metadata: the A2A renderers give them
// to the artifact, an appended update's metadata merged into its) when
// label is not nil, for the next frame only, and partMeta
// (artifact_part_metadata: the renderers give it to the chunk's text
// part) and fields (artifact_part_fields: the mediaType and filename of
// the frame's parts, a2amap.PartFields) for every next frame until they
// change. The writer's metadata is set only when it changes: setting it
// ends the text coalescing.
func (t *turn) metadata(id a2a.ArtifactID, label *a2a.Artifact, partMeta map[string]any, fields []any) error {
	var statusMeta map[string]any
	if t.finalFrame {
		statusMeta = t.statusMeta
	}
	if t.metadataSet(id, label, partMeta, fields, statusMeta) {
		return nil
	}
	md := t.artifactMetadata(id, label)
	// A message's text (no artifact) too: the renderers make it an
	// artifact's part.
	if len(partMeta) > 0 {
		md = withMeta(md, a2amap.MetaArtifactPartMetadata, partMeta)
	}
	if len(fields) > 0 {
		md = withMeta(md, a2amap.MetaArtifactPartFields, fields)
	}
	// The agent's artifact-update event's metadata, on its parts' chunks;
	// its final status-update's, on the final frame the renderers end
	// the task with.
	for k, v := range map[string]map[string]any{a2amap.MetaArtifactEventMetadata: t.eventMeta,
		a2amap.MetaStatusEventMetadata: statusMeta, a2amap.MetaStatusMessage: t.failure, a2amap.MetaTaskMetadata: t.taskMeta} {
		if len(v) > 0 {
			md = withMeta(md, k, v)
		}
	}
	if t.closing && id != "" {
		md[a2amap.MetaArtifactLastChunk] = true
	}
	if err := t.w.SetMetadata(md); err != nil {
		return err
	}
	t.lastSet = t.closing && id != ""
	t.artifact, t.labeled, t.partMeta, t.partFields = id, label != nil && id != "", partMeta, fields
	t.sentEventMeta, t.sentStatusMeta = t.eventMeta, statusMeta
	if t.taskMeta != nil {
		t.sentTaskMeta, t.taskMeta = t.taskMeta, nil
	}
	return nil
}

// metadataSet reports whether the writer's metadata already is what
// metadata would set for artifact id, label, partMeta, fields and the
// final frame's statusMeta: the same artifact, unlabeled, with the same
// part metadata and fields and the same event and status metadata, and
// no failure, task metadata or last chunk to give or take back.
func (t *turn) metadataSet(id a2a.ArtifactID, label *a2a.Artifact, partMeta map[string]any, fields []any, statusMeta map[string]any) bool {
	return id == t.artifact && label == nil && !t.labeled && reflect.DeepEqual(partMeta, t.partMeta) &&
		reflect.DeepEqual(fields, t.partFields) && reflect.DeepEqual(t.eventMeta, t.sentEventMeta) &&
		reflect.DeepEqual(statusMeta, t.sentStatusMeta) && t.failure == nil && t.taskMeta == nil && !t.closing && !t.lastSet
}

// artifactMetadata is the frames' metadata naming artifact id
// (llm_response_id; nil for "") and, when label is not nil, its name,
// description and metadata (artifact_name, artifact_description,
// artifact_metadata) and, unless the frames named the artifact already,
// its extensions.
func (t *turn) artifactMetadata(id a2a.ArtifactID, label *a2a.Artifact) map[string]any {
	if id == "" {
		return nil
	}
	md := map[string]any{"llm_response_id": string(id)}
	if label == nil {
		return md
	}
	if label.Name != "" {
		md["artifact_name"] = label.Name
	}
	if label.Description != "" {
		md["artifact_description"] = label.Description
	}
	if len(label.Metadata) > 0 {
		md["artifact_metadata"] = map[string]any(label.Metadata)
	}
	if len(label.Extensions) > 0 && !t.named[id] {
		ext := make([]any, len(label.Extensions))
		for i, x := range label.Extensions {
			ext[i] = x
		}
		md[a2amap.MetaArtifactExtensions] = ext
	}
	return md
}

// withMeta sets md's member k to v, making md first if it is nil, and
// returns md.
func withMeta(md map[string]any, k string, v any) map[string]any {
	if md == nil {
		md = map[string]any{}
	}
	md[k] = v
	return md
}

// finalMetadata sets the metadata of the final frame written next (an
// e2a.complete or e2a.error the renderers end the task with): the
// agent's final status-update's metadata (status_event_metadata), which
// the renderers give that status-update, and none of an artifact's
// (the frame renders no part of one).
func (t *turn) finalMetadata() error {
	t.finalFrame, t.eventMeta = true, nil
	return t.metadata(t.artifact, nil, t.partMeta, t.partFields)
}

// failedMetadata is finalMetadata for the agent's failed status of
// message m (nil: none): the frame carries m as the agent sent it
// (asSent; status_message, A2A v0.3 Message JSON, its parts' mediaType
// and filename in artifact_part_fields), which the A2A renderers give the
// failed status in place of the failure's code and text
// (a2amap.MetaStatusMessage), as a client of the agent itself sees it.
// The Handler scrubs the frame's metadata.
func (t *turn) failedMetadata(m *a2a.Message) error {
	if m == nil {
		return t.finalMetadata()
	}
	c := t.asSent(m)
	msg, err := v03JSON(a2av0.FromV1Message(c))
	if err != nil {
		return err
	}
	t.finalFrame, t.eventMeta, t.failure = true, nil, msg
	return t.metadata(t.artifact, nil, t.partMeta, a2amap.PartFields(c.Parts...))
}

// newMeta reports whether the metadata md of an update of artifact id
// changes what the frames gave the artifact (sentMeta): a member they did
// not carry, or carried another value of. An update without metadata
// changes nothing (an A2A client merges an appended update's into the
// artifact's); a snapshot's, the artifact's whole, changes nothing that
// its updates' did not.
func (t *turn) newMeta(id a2a.ArtifactID, md map[string]any) bool {
	if !t.named[id] {
		return false // its first chunk carries it
	}
	sent := t.sentMeta[id]
	for k, v := range md {
		if old, ok := sent[k]; !ok || !reflect.DeepEqual(old, v) {
			return true
		}
	}
	return false
}

// partMetadata is the metadata of a text or reasoning piece's part the
// frames carry (artifact_part_metadata): its part's, but the thought
// flag that made it reasoning (the chunk's kind says so; thoughtKeys);
// nil for none.
func partMetadata(pc piece) map[string]any {
	if pc.part == nil || len(pc.part.Metadata) == 0 {
		return nil
	}
	md, cloned := map[string]any(pc.part.Metadata), false
	for _, k := range thoughtKeys {
		if _, ok := md[k]; !ok {
			continue
		}
		if !cloned {
			md, cloned = maps.Clone(md), true
		}
		delete(md, k)
	}
	if len(md) == 0 {
		return nil
	}
	return md
}

// thoughtKeys and typeKeys are the part metadata that mark a thought
// (true) and a function call or response: the trpc interaction spec's
// (thought, type) and ADK's (google-adk's A2A part converter prefixes
// its keys: adk_thought, adk_type).
var (
	thoughtKeys = []string{"thought", "adk_thought"}
	typeKeys    = []string{"type", "adk_type"}
)

// thought reports a part marked a thought.
func thought(md map[string]any) bool {
	for _, k := range thoughtKeys {
		if th, _ := md[k].(bool); th {
			return true
		}
	}
	return false
}

// toolType is the function_call or function_response a part's metadata
// marks it ("" for none).
func toolType(md map[string]any) string {
	for _, k := range typeKeys {
		if typ, _ := md[k].(string); typ == e2a.ToolFunctionCall || typ == e2a.ToolFunctionResponse {
			return typ
		}
	}
	return ""
}

// withThought is a text piece's part metadata md (contents.meta), with
// the thought flag of a reasoning piece: the part pieceOf reads as kind.
func withThought(md map[string]any, kind string) map[string]any {
	if kind != e2a.DeltaReasoning {
		return md
	}
	out := maps.Clone(md)
	if out == nil {
		out = map[string]any{}
	}
	out["thought"] = true
	return out
}

func (t *turn) seenOf(id a2a.ArtifactID) *written {
	if t.seen == nil {
		t.seen = map[a2a.ArtifactID]*written{}
	}
	w := t.seen[id]
	if w == nil {
		w = &written{text: map[string]string{}}
		t.seen[id] = w
	}
	return w
}

// piece is what one A2A part becomes: a delta kind ("" for a part that
// carries nothing) and delta, with the part itself.
type piece struct {
	kind  string
	delta any
	part  *a2a.Part
}

// textual reports a delta kind written as an e2a.chunk (text, reasoning,
// tool).
func textual(kind string) bool {
	return kind == e2a.DeltaText || kind == e2a.DeltaReasoning || kind == e2a.DeltaTool
}

// pieceOf is the piece of an A2A part: a text part a text delta (a
// reasoning delta when its metadata says thought: true, or ADK's
// adk_thought: true), a
// function_call or function_response data part a tool delta, any other
// data part and a file part a custom delta (written natively).
func pieceOf(p *a2a.Part) piece {
	if p == nil {
		return piece{}
	}
	switch c := p.Content.(type) {
	case a2a.Text:
		if c == "" {
			return piece{}
		}
		if thought(p.Metadata) {
			return piece{e2a.DeltaReasoning, string(c), p}
		}
		return piece{e2a.DeltaText, string(c), p}
	case a2a.Data:
		if d, ok := toolDelta(p, c.Value); ok {
			return piece{e2a.DeltaTool, d, p}
		}
		return piece{e2a.DeltaCustom, map[string]any{"data": c.Value}, p}
	case a2a.Raw:
		return piece{e2a.DeltaCustom, map[string]any{"file": fileOf(p, map[string]any{"bytes": base64.StdEncoding.EncodeToString(c)})}, p}
	case a2a.URL:
		return piece{e2a.DeltaCustom, map[string]any{"file": fileOf(p, map[string]any{"uri": string(c)})}, p}
	}
	return piece{}
}

// textPiece is a text (or reasoning) piece of its own.
func textPiece(kind, s string) piece {
	p := a2a.NewTextPart(s)
	if kind == e2a.DeltaReasoning {
		p.Metadata = map[string]any{"thought": true}
	}
	return piece{kind, s, p}
}

func fileOf(p *a2a.Part, f map[string]any) map[string]any {
	if p.Filename != "" {
		f["name"] = p.Filename
	}
	if p.MediaType != "" {
		f["mime_type"] = p.MediaType
	}
	return f
}

// toolDelta reads a function_call or function_response DataPart (the trpc
// interaction spec: part metadata type, data id, name, args or response;
// ADK's the same, its metadata adk_type).
func toolDelta(p *a2a.Part, v any) (e2a.ToolDelta, bool) {
	typ := toolType(p.Metadata)
	m, ok := v.(map[string]any)
	if !ok || typ == "" {
		return e2a.ToolDelta{}, false
	}
	d := e2a.ToolDelta{Type: typ}
	d.ID, _ = m["id"].(string)
	d.Name, _ = m["name"].(string)
	if typ == e2a.ToolFunctionCall {
		d.Args = m["args"]
	} else {
		d.Response = m["response"]
	}
	return d, true
}

// partsText joins the text parts that are not thoughts.
func partsText(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if pc := pieceOf(p); pc.kind == e2a.DeltaText {
			b.WriteString(pc.delta.(string))
		}
	}
	return b.String()
}

// written is what the frames of one artifact hold.
type written struct {
	text   map[string]string // text and reasoning written
	others int               // other parts written (tool, data, file)
	any    bool              // anything was written
	native bool              // a native frame was written: the later parts are native too
	// base is the text of each kind the artifact held before the turn
	// as a thread's baseline records it (length and hash, baseText),
	// until the first task snapshot resolves it (resolveBaseline): then
	// text starts with it, or stale says the agent replaced the
	// artifact since.
	base  map[string]baseText
	stale bool
}

func (w *written) add(pc piece) {
	w.any = true
	if s, ok := pc.delta.(string); ok {
		w.text[pc.kind] += s
		return
	}
	w.others++
}

// answer is the text of the turn's answer (e2a.complete's result): the
// text deltas written, per artifact ("" the text of no artifact: a
// message's) in the order first written. An artifact whose text is in it
// keeps its whole text there: its later text parts written natively are
// added, and its text is replaced when the artifact is written whole
// again (rewrite: the agent replaced it).
type answer struct {
	ids   []a2a.ArtifactID
	texts []*strings.Builder
	at    map[a2a.ArtifactID]int // index in ids and texts
	cur   *strings.Builder       // the text of curID, the artifact written last
	curID a2a.ArtifactID
}

// add adds s to the text of artifact id, the artifact's first when it
// has none yet.
func (a *answer) add(id a2a.ArtifactID, s string) {
	if a.cur == nil || a.curID != id {
		a.cur, a.curID = a.of(id, true), id
	}
	a.cur.WriteString(s)
}

// extend adds s to the text of artifact id when the answer has its text.
func (a *answer) extend(id a2a.ArtifactID, s string) {
	if b := a.of(id, false); b != nil {
		b.WriteString(s)
	}
}

// replace makes s the text of artifact id when the answer has its text.
func (a *answer) replace(id a2a.ArtifactID, s string) {
	if b := a.of(id, false); b != nil {
		b.Reset()
		b.WriteString(s)
	}
}

// of is the text of artifact id, made when create and it has none (nil
// else).
func (a *answer) of(id a2a.ArtifactID, create bool) *strings.Builder {
	if a.cur != nil && a.curID == id {
		return a.cur
	}
	if i, ok := a.at[id]; ok {
		return a.texts[i]
	}
	if !create {
		return nil
	}
	if a.at == nil {
		a.at = map[a2a.ArtifactID]int{}
	}
	b := new(strings.Builder)
	a.at[id] = len(a.ids)
	a.ids, a.texts = append(a.ids, id), append(a.texts, b)
	return b
}

// String is the answer's text: each artifact's, in the order first
// written.
func (a *answer) String() string {
	if len(a.texts) == 1 {
		return a.texts[0].String()
	}
	var b strings.Builder
	for _, t := range a.texts {
		b.WriteString(t.String())
	}
	return b.String()
}
