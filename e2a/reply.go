package e2a

import "encoding/json"

// Direct answers (A2A's "Message" responses).
//
// An A2A agent answers a message either with a Task (a unit of work with a
// state, artifacts and history) or with a Message: a direct answer, no task
// made. The pipeline writes the second in the form §12.5 gives A2A's
// objects: the request's final frame is an a2a.stream_event of branch
// message whose payload is the agent's A2A Message (the v0.3 JSON shape:
// kind message, role agent, parts), status succeeded. A2A renders it as the
// Message itself (message/send's result, a stream of that one event);
// every other protocol reads its text as the answer ([Response.Reply]).

// ReplyBody is the body of the final frame of a turn the agent answers
// with a Message of text (no text part when text is empty) and extra parts
// (A2A v0.3 Part JSON: data and file parts).
func ReplyBody(text string, extra ...map[string]any) StreamEventBody {
	msg := &InterruptMessage{Kind: "message", Role: "agent", Parts: []map[string]any{}}
	if text != "" {
		msg.Parts = append(msg.Parts, map[string]any{"kind": "text", "text": text})
	}
	msg.Parts = append(msg.Parts, extra...)
	return StreamEventBody{Branch: BranchMessage, Payload: msg}
}

// Reply reports whether r is the final frame of a turn answered with a
// Message (an a2a.stream_event of branch message, or an a2a.message
// frame), and returns the text of its text parts, joined.
func (r *Response) Reply() (text string, ok bool) {
	if r == nil || !r.IsFinal || (r.ResponseKind != KindA2AStreamEvent && r.ResponseKind != KindA2AMessage) {
		return "", false
	}
	type message struct {
		Parts []struct {
			Kind string  `json:"kind"`
			Text *string `json:"text"`
		} `json:"parts"`
	}
	var m message
	if r.ResponseKind == KindA2AMessage {
		if json.Unmarshal(r.Body, &m) != nil {
			return "", false
		}
	} else {
		var b struct {
			Branch  string  `json:"branch"`
			Payload message `json:"payload"`
		}
		if json.Unmarshal(r.Body, &b) != nil || b.Branch != BranchMessage {
			return "", false
		}
		m = b.Payload
	}
	for _, p := range m.Parts {
		if p.Text != nil && (p.Kind == "" || p.Kind == "text") {
			text += *p.Text
		}
	}
	return text, true
}

// MethodCancelTurn is the method of a cancel turn: a request of a task
// whose last turn ended interrupted (input-required, auth-required), which
// ingress publishes for A2A's CancelTask with its cancel stored first. The
// agent runtime ends it cancelled at pick-up without calling the handler's
// Serve (a handler implementing agent.TurnCanceller is told of it first),
// so the task ends canceled in the streams.
const MethodCancelTurn = "tasks/cancel"
