package agent

import "github.com/e2a-pipeline/pipeline/e2a"

// Reply ends the handler's turn answering with a Message rather than a
// Task (A2A's direct answer): text, then extra parts (A2A v0.3 Part JSON:
// data and file parts). It writes the request's final frame (an
// a2a.stream_event of branch message, e2a.ReplyBody) and returns what Write
// returns. A2A clients get the Message itself (SendMessage's result
// "message", a stream of that one event, no task); the other protocols get
// its text as the answer.
func Reply(w Writer, text string, extra ...map[string]any) error {
	return w.Write(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, e2a.ReplyBody(text, extra...), true)
}
