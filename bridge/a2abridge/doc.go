// Package a2abridge puts an existing A2A agent behind the pipeline:
// `e2a agent --pool P --a2a URL`. The agent may be written with any SDK
// (Python, JavaScript, Java, Go); it is reached with the client of
// github.com/a2aproject/a2a-go/v2.
//
// [New] reads the agent's card (URL is the card's URL or the agent's base
// URL; a v1.0 card, or a v0.3 one read with a2a-go's compat parser) and
// builds a client speaking A2A v1.0 over the binding the card prefers among
// JSON-RPC, HTTP+JSON and gRPC, or v0.3 (JSON-RPC, HTTP+JSON, gRPC) when that
// is all the card offers. Credentials and the trace context go with every
// HTTP call (bridge.Client.HTTP).
//
// [Upstream.Call] sends the request's text as the user message, streaming
// (SendStreamingMessage) when the card says the agent streams, else
// SendMessage and GetTask polled until the task ends or is interrupted.
// Every event becomes frames:
//
//   - a text part: an e2a.chunk text delta; a text part whose metadata says
//     thought: true: a reasoning delta;
//   - a data part holding a function_call or function_response (the trpc
//     interaction spec's DataParts): a tool delta (e2a.ToolDelta); any other
//     data part: a custom delta {"data": …};
//   - a file part: a custom delta {"file": {"uri"|"bytes", "name",
//     "mime_type"}};
//   - an artifact's parts carry the artifact id as the frames'
//     llm_response_id (agent.Writer.SetMetadata), so the pipeline's A2A
//     renderers keep them in one artifact;
//   - a status message while the task works: text deltas; input-required
//     and auth-required: the turn ends interrupted with the agent's message
//     (agent.Interrupt); completed: e2a.complete {"upstream_task_id",
//     "upstream_context_id"}; failed or rejected: e2a.error upstream_failed
//     with the agent's message; canceled: e2a.error upstream_canceled;
//   - a Message answer (no task): its parts, then e2a.complete.
//
// The upstream's task and context ids are kept with the conversation
// (bridge.Conversations, by A2A context, ACP session, E2A session_id, per
// principal) as soon as they are known: the next turn of the conversation
// goes to the same upstream context, and to the same task while that task
// waits for input (its last turn was interrupted). A cancel of the request
// is forwarded (CancelTask).
//
// A worker that dies mid-stream: the worker taking the request over
// (agent.Writer.ResumeAfter ≥ 0) subscribes to the upstream task
// (SubscribeToTask), whose first event is the task as it stands, and writes
// what the stored frames do not already hold: the text of each artifact
// beyond what was written, and the parts after those written. An upstream
// that cannot be subscribed to (no streaming, v0.3 without resubscribe, a
// task that has ended and is gone) ends the request with
// upstream_cannot_resume.
package a2abridge
