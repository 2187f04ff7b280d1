package agent

import "github.com/e2a-pipeline/pipeline/e2a"

// Interrupt ends the handler's turn asking the client for something before
// the task can go on: state is e2a.StateInputRequired (a question, a
// choice, an approval) or e2a.StateAuthRequired (credentials), text is the
// agent's message to the user. It writes the request's final frame (an
// a2a.stream_event status_update, e2a.InterruptBody) and returns what Write
// returns. The task stays open: the client's next message naming it (A2A
// taskId, ACP session, E2A task_id) is a new turn of the same task, whose
// envelope the handler receives like any other.
func Interrupt(w Writer, state, text string) error {
	return InterruptWithParts(w, state, text)
}

// InterruptWithParts is Interrupt with extra parts in the agent's message
// after its text (A2A v0.3 Part JSON, as e2a.InterruptBody takes them): a
// data part with the form the user fills in, a file part (bytes or uri).
// A message of extra parts only (text "") is written with those parts; with
// neither, the interrupt has no message.
func InterruptWithParts(w Writer, state, text string, extra ...map[string]any) error {
	if !e2a.InterruptState(state) {
		return Errorf("invalid_interrupt", false, "interrupt state %q is not %q or %q", state, e2a.StateInputRequired, e2a.StateAuthRequired)
	}
	return w.Write(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, e2a.InterruptBody(state, text, extra...), true)
}
