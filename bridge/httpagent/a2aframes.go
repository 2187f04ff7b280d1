package httpagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// A2A frames (a2a.stream_event, a2a.task, a2a.message) carry an A2A
// object the agent wrote, which the pipeline's A2A renderers show every
// A2A client of the request. Two things in it are not the agent's to
// decide:
//
//   - the task and context it belongs to: the request's own (the
//     pipeline's task, which the client created or continues). The ids an
//     agent names (those of the A2A framework it wraps, or another
//     request's) are taken out of status and artifact updates and of
//     messages (the renderer gives them the request's), and a task's are
//     replaced with the request's (its task_id, else its request_id; its
//     context_id, else the task's id: the renderer's own rule);
//   - whether it is an A2A object at all: a payload the renderers cannot
//     read (a2amap.NativeEvent, then A2A v1.0's conversion) would be
//     skipped by every A2A rendering once stored (a final one ends the
//     task failed: a2amap.UnreadableFinal), its content lost to A2A
//     clients, so the frame is refused (ErrBadFrame,
//     upstream_protocol_error) before it is written and the agent's
//     request fails with the reason.
//
// Both cost a decoding of the frame's body, for these kinds only.

// errNotA2A reports an A2A frame whose object is not one.
var errNotA2A = errors.New("not an A2A object")

// a2aBody returns the body of an A2A frame of kind with the request's ids
// (body itself when it names none of its own), or an error when the
// pipeline's A2A renderers cannot read it. Other kinds are returned as
// they are.
func a2aBody(kind string, body json.RawMessage, env *e2a.Envelope) (json.RawMessage, error) {
	if kind != e2a.KindA2AStreamEvent && kind != e2a.KindA2ATask && kind != e2a.KindA2AMessage {
		return body, nil
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotA2A, err)
	}
	task := env.TaskID
	if task == "" {
		task = env.RequestID
	}
	ctx := env.ContextID
	if ctx == "" {
		ctx = task
	}
	own := ids{task: task, context: ctx}
	changed := false
	switch kind {
	case e2a.KindA2ATask:
		changed = own.ownTask(m)
	case e2a.KindA2AMessage:
		changed = dropIDs(m)
	default:
		p, ok := m["payload"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: the payload is not an object", errNotA2A)
		}
		branch, _ := m["branch"].(string)
		switch branch {
		case e2a.BranchTask:
			changed = own.ownTask(p)
		case e2a.BranchMessage:
			changed = dropIDs(p)
		default: // status_update, artifact_update (the writer checks the branch)
			changed = dropIDs(p)
			if st, ok := p["status"].(map[string]any); ok {
				changed = dropMessageIDs(st["message"]) || changed
			}
		}
	}
	if changed {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // the agent's text as it wrote it
		if err := enc.Encode(m); err != nil {
			return nil, fmt.Errorf("%w: %v", errNotA2A, err)
		}
		body = bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
	}
	ev, err := a2amap.NativeEvent(&e2a.Response{ResponseKind: kind, Body: body})
	if err == nil && ev != nil {
		_, err = a2av0.ToV1Event(ev)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotA2A, err)
	}
	return body, nil
}

// ids are the request's task and context, as its A2A renderers name them.
type ids struct{ task, context string }

// ownTask gives the task object t the request's ids, and takes the agent's
// own out of its status message and history; it reports a change.
func (o ids) ownTask(t map[string]any) bool {
	changed := false
	for key, want := range map[string]string{"id": o.task, "contextId": o.context} {
		if t[key] != want {
			t[key], changed = want, true
		}
	}
	if _, ok := t["context_id"]; ok {
		delete(t, "context_id")
		changed = true
	}
	if st, ok := t["status"].(map[string]any); ok {
		changed = dropMessageIDs(st["message"]) || changed
	}
	if h, ok := t["history"].([]any); ok {
		for _, msg := range h {
			changed = dropMessageIDs(msg) || changed
		}
	}
	return changed
}

// dropMessageIDs takes the task and context ids out of msg when it is a
// message object; it reports a change.
func dropMessageIDs(msg any) bool {
	m, ok := msg.(map[string]any)
	return ok && dropIDs(m)
}

// dropIDs takes the task and context ids (JSON-RPC's camelCase and the
// proto's snake_case) out of the object m; it reports a change.
func dropIDs(m map[string]any) bool {
	changed := false
	for _, key := range []string{"taskId", "task_id", "contextId", "context_id"} {
		if _, ok := m[key]; ok {
			delete(m, key)
			changed = true
		}
	}
	return changed
}
