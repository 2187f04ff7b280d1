package e2a

import "encoding/json"

// Interrupted turns (input-required, auth-required).
//
// E2A's response statuses are succeeded, failed and in_progress; an agent
// that ends its turn asking the user a question, for an approval or for
// credentials, and continues in the same task when the answer comes, has no
// status of its own. The pipeline writes it in the form §12.5 already gives
// A2A's task states: the request's final frame is an a2a.stream_event of
// branch status_update whose payload is an A2A TaskStatusUpdateEvent (the
// v0.3 JSON shape) with state input-required or auth-required, the agent's
// message, and final true. Its status is succeeded: the turn ended as the
// agent meant it to (failed is reserved for e2a.error, §12.2). The task is
// not terminal: the client's next message naming it starts a new turn.
//
// An agent that answers its turn with the A2A Task itself (a final a2a.task
// frame in state input-required or auth-required) interrupts it too.
//
// [InterruptBody] builds that body; [Response.Interrupt] is the one reader
// every renderer uses.

// Interrupted task states (A2A v0.3 names; v1.0 TASK_STATE_INPUT_REQUIRED
// and TASK_STATE_AUTH_REQUIRED).
const (
	StateInputRequired = "input-required"
	StateAuthRequired  = "auth-required"
)

// InterruptState reports whether s is an interrupted state
// (StateInputRequired or StateAuthRequired).
func InterruptState(s string) bool { return s == StateInputRequired || s == StateAuthRequired }

// InterruptMessage is the agent's message of an interrupted turn: A2A
// Message JSON (role agent, parts).
type InterruptMessage struct {
	Kind      string           `json:"kind"`
	Role      string           `json:"role"`
	MessageID string           `json:"messageId,omitempty"`
	Parts     []map[string]any `json:"parts"`
	Metadata  map[string]any   `json:"metadata,omitempty"`
}

// interruptPayload is the TaskStatusUpdateEvent of an interrupted turn.
type interruptPayload struct {
	Kind   string          `json:"kind"`
	Status interruptStatus `json:"status"`
	Final  bool            `json:"final"`
}

type interruptStatus struct {
	State   string            `json:"state"`
	Message *InterruptMessage `json:"message,omitempty"`
}

// InterruptBody is the body of the final frame of a turn interrupted in
// state (StateInputRequired or StateAuthRequired) with the agent's text
// (no message when text is empty). Extra parts (A2A v0.3 Part JSON: data
// parts with a form, file parts) follow the text part.
func InterruptBody(state, text string, extra ...map[string]any) StreamEventBody {
	var msg *InterruptMessage
	if text != "" || len(extra) > 0 {
		msg = &InterruptMessage{Kind: "message", Role: "agent"}
		if text != "" {
			msg.Parts = append(msg.Parts, map[string]any{"kind": "text", "text": text})
		}
		msg.Parts = append(msg.Parts, extra...)
	}
	return StreamEventBody{Branch: BranchStatusUpdate, Payload: interruptPayload{
		Kind: "status-update", Status: interruptStatus{State: state, Message: msg}, Final: true,
	}}
}

// Interrupt reports whether r ends an interrupted turn: a final
// a2a.stream_event status_update, or a final a2a.task frame (an agent that
// answers its turn with the A2A Task, e.g. an HTTP agent wrapping an A2A
// framework), whose state is input-required or auth-required. It returns
// the state and the text of the agent's message (its text parts joined;
// "" when it has none). Every reader of a turn's outcome (the renderers,
// egress.Service.Continuable, the console, the bridges) asks this one
// function, so a task shown interrupted always takes the client's answer.
func (r *Response) Interrupt() (state, text string, ok bool) {
	if r == nil || !r.IsFinal {
		return "", "", false
	}
	var st interruptStatusJSON
	switch r.ResponseKind {
	case KindA2AStreamEvent:
		var b struct {
			Branch  string `json:"branch"`
			Payload struct {
				Status interruptStatusJSON `json:"status"`
			} `json:"payload"`
		}
		if json.Unmarshal(r.Body, &b) != nil || (b.Branch != BranchStatusUpdate && b.Branch != "status-update") {
			return "", "", false
		}
		st = b.Payload.Status
	case KindA2ATask:
		var b struct {
			Status interruptStatusJSON `json:"status"`
		}
		if json.Unmarshal(r.Body, &b) != nil {
			return "", "", false
		}
		st = b.Status
	default:
		return "", "", false
	}
	state = normalizeState(st.State)
	if !InterruptState(state) {
		return "", "", false
	}
	if st.Message != nil {
		for _, p := range st.Message.Parts {
			if p.Text != nil && (p.Kind == "" || p.Kind == "text") {
				text += *p.Text
			}
		}
	}
	return state, text, true
}

// interruptStatusJSON is what Interrupt reads of an A2A TaskStatus, in
// either generation's JSON.
type interruptStatusJSON struct {
	State   string `json:"state"`
	Message *struct {
		Parts []struct {
			Kind string  `json:"kind"`
			Text *string `json:"text"`
		} `json:"parts"`
	} `json:"message"`
}

// normalizeState reads a task state written in either generation's form
// (input-required, TASK_STATE_INPUT_REQUIRED, input_required).
func normalizeState(s string) string {
	switch s {
	case StateInputRequired, "TASK_STATE_INPUT_REQUIRED", "input_required":
		return StateInputRequired
	case StateAuthRequired, "TASK_STATE_AUTH_REQUIRED", "auth_required":
		return StateAuthRequired
	}
	return s
}
