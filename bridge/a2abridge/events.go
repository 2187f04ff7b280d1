package a2abridge

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// turn is one request's conversation with the agent.
type turn struct {
	u         *Upstream
	env       *e2a.Envelope
	w         agent.Writer
	taskID    a2a.TaskID
	contextID string
	recorded  bool
	artifact  a2a.ArtifactID // the artifact whose id the frames carry now
	done      bool
	// seen is what the request's frames hold of each artifact ("" for
	// messages): a task snapshot (GetTask, the first event of a
	// subscription) writes only what is beyond it.
	seen map[a2a.ArtifactID]*written
}

// event writes the frames of one event of the agent.
func (t *turn) event(ctx context.Context, ev a2a.Event) error {
	switch e := ev.(type) {
	case *a2a.Message:
		if err := t.parts("", e.Parts); err != nil {
			return err
		}
		t.done = true
		return t.w.Complete(map[string]any{"upstream_context_id": e.ContextID})
	case *a2a.Task:
		if err := t.ids(ctx, e.ID, e.ContextID); err != nil {
			return err
		}
		for _, a := range e.Artifacts {
			if err := t.snapshot(a); err != nil {
				return err
			}
		}
		return t.status(ctx, e.Status, false) // a snapshot: its working message was streamed, or is not news
	case *a2a.TaskStatusUpdateEvent:
		if err := t.ids(ctx, e.TaskID, e.ContextID); err != nil {
			return err
		}
		return t.status(ctx, e.Status, true)
	case *a2a.TaskArtifactUpdateEvent:
		if err := t.ids(ctx, e.TaskID, e.ContextID); err != nil {
			return err
		}
		if e.Artifact == nil {
			return nil
		}
		return t.artifactParts(e.Artifact)
	}
	return nil
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
	return t.record(ctx, false)
}

// record writes the conversation's upstream ids; open says whether the task
// waits for the next message.
func (t *turn) record(ctx context.Context, open bool) error {
	c := t.u.cfg.convs
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := c.Update(ctx, t.u.cfg.pool, t.env, func(conv *bridge.Conversation) {
		conv.UpstreamTaskID, conv.UpstreamContextID, conv.UpstreamTaskOpen = string(t.taskID), t.contextID, open
	})
	if err != nil {
		t.u.cfg.log.Warn("a2a bridge: upstream ids not recorded", "request_id", t.env.RequestID, "err", err)
	}
	return nil
}

// status writes a status: its message while the task works (when
// working), and the final frame of a state that ends the turn.
func (t *turn) status(ctx context.Context, st a2a.TaskStatus, working bool) error {
	text := ""
	if st.Message != nil {
		text = partsText(st.Message.Parts)
	}
	switch st.State {
	case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		state := e2a.StateInputRequired
		if st.State == a2a.TaskStateAuthRequired {
			state = e2a.StateAuthRequired
		}
		t.done = true
		_ = t.record(ctx, true)
		return agent.Interrupt(t.w, state, text)
	case a2a.TaskStateCompleted:
		t.done = true
		_ = t.record(ctx, false)
		if st.Message != nil {
			if err := t.parts("", st.Message.Parts); err != nil {
				return err
			}
		}
		return t.w.Complete(map[string]any{"upstream_task_id": string(t.taskID), "upstream_context_id": t.contextID})
	case a2a.TaskStateFailed, a2a.TaskStateRejected:
		t.done = true
		_ = t.record(ctx, false)
		if text == "" {
			text = "the agent's task " + strings.ToLower(strings.TrimPrefix(string(st.State), "TASK_STATE_"))
		}
		return t.w.Fail(bridge.CodeFailed, text, false)
	case a2a.TaskStateCanceled:
		t.done = true
		_ = t.record(ctx, false)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return t.w.Fail("upstream_canceled", "the agent canceled the task", false)
	}
	if working && st.Message != nil {
		return t.parts("", st.Message.Parts)
	}
	return nil
}

// artifactParts writes an artifact update's parts under its id.
func (t *turn) artifactParts(a *a2a.Artifact) error {
	return t.parts(a.ID, a.Parts)
}

// parts writes parts (of artifact id, "" for a message), each as its
// delta.
func (t *turn) parts(id a2a.ArtifactID, parts a2a.ContentParts) error {
	for _, p := range parts {
		if kind, delta := partDelta(p); kind != "" {
			if err := t.write(id, kind, delta); err != nil {
				return err
			}
		}
	}
	return nil
}

// snapshot writes what an artifact as the task holds it has beyond what
// the request's frames hold: the text of each kind past the text written,
// the other parts after those written.
func (t *turn) snapshot(a *a2a.Artifact) error {
	full := map[string]string{}
	var kinds []string
	var others []any
	for _, p := range a.Parts {
		kind, delta := partDelta(p)
		switch s, ok := delta.(string); {
		case kind == "":
		case ok:
			if _, seen := full[kind]; !seen {
				kinds = append(kinds, kind)
			}
			full[kind] += s
		default:
			others = append(others, delta)
		}
	}
	w := t.seenOf(a.ID)
	for _, kind := range kinds {
		if done := w.text[kind]; strings.HasPrefix(full[kind], done) && len(full[kind]) > len(done) {
			if err := t.write(a.ID, kind, full[kind][len(done):]); err != nil {
				return err
			}
		}
	}
	for _, d := range others[min(w.others, len(others)):] {
		if err := t.write(a.ID, e2a.DeltaCustom, d); err != nil {
			return err
		}
	}
	return nil
}

// write writes one delta of artifact id, with the artifact's id as the
// frames' llm_response_id, and records it.
func (t *turn) write(id a2a.ArtifactID, kind string, delta any) error {
	if id != t.artifact {
		var md map[string]any
		if id != "" {
			md = map[string]any{"llm_response_id": string(id)}
		}
		if err := t.w.SetMetadata(md); err != nil {
			return err
		}
		t.artifact = id
	}
	if err := t.w.Chunk(kind, delta); err != nil {
		return err
	}
	t.seenOf(id).add(kind, delta)
	return nil
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

// partDelta is the delta kind and delta of an A2A part ("" for a part
// that carries nothing).
func partDelta(p *a2a.Part) (string, any) {
	if p == nil {
		return "", nil
	}
	switch c := p.Content.(type) {
	case a2a.Text:
		if c == "" {
			return "", nil
		}
		if th, _ := p.Metadata["thought"].(bool); th {
			return e2a.DeltaReasoning, string(c)
		}
		return e2a.DeltaText, string(c)
	case a2a.Data:
		if d, ok := toolDelta(p, c.Value); ok {
			return e2a.DeltaTool, d
		}
		return e2a.DeltaCustom, map[string]any{"data": c.Value}
	case a2a.Raw:
		return e2a.DeltaCustom, map[string]any{"file": fileOf(p, map[string]any{"bytes": base64.StdEncoding.EncodeToString(c)})}
	case a2a.URL:
		return e2a.DeltaCustom, map[string]any{"file": fileOf(p, map[string]any{"uri": string(c)})}
	}
	return "", nil
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
// interaction spec: part metadata type, data id, name, args or response).
func toolDelta(p *a2a.Part, v any) (e2a.ToolDelta, bool) {
	typ, _ := p.Metadata["type"].(string)
	m, ok := v.(map[string]any)
	if !ok || (typ != e2a.ToolFunctionCall && typ != e2a.ToolFunctionResponse) {
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
		if k, d := partDelta(p); k == e2a.DeltaText {
			b.WriteString(d.(string))
		}
	}
	return b.String()
}

// written is what the frames of one artifact hold.
type written struct {
	text   map[string]string // delta kind → the text written
	others int               // other deltas written
}

func (w *written) add(kind string, delta any) {
	if s, ok := delta.(string); ok {
		w.text[kind] += s
		return
	}
	w.others++
}
