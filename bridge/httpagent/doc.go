// Package httpagent bridges a plain HTTP agent, in any language, to the
// pipeline: `e2a agent --pool P --http URL`. It is the smallest contract an
// agent can have: one POST per request, answered with E2A frames.
//
// # The request
//
// For every request of the pool, [Upstream.Call] POSTs the request's E2A
// envelope to URL: the JSON e2a.MarshalEnvelope writes (spec §4: request_id,
// method, params, session_id, task_id, context_id, user_id, …), with
// Content-Type application/json and Accept "application/x-ndjson,
// text/event-stream, application/json, text/plain;q=0.5". The envelope carries no secret (the
// normalizer strips the client's bearer token and header values before the
// envelope is stored; the bridge drops them again should one be left). The
// upstream's own credentials (an API key sent as a bearer token, headers)
// and the W3C trace context (traceparent) are set by the bridge.Client.
//
// With [WithHistory] (as `e2a agent --http` serves a pool), the POST body
// has one more member after the envelope's, [HistoryMember] "history": the
// earlier turns of the request's conversation (its A2A context, which
// holds its task's earlier turns, else its ACP session or E2A session_id,
// else its task; of the same principal only: bridge.Conversations, the
// records the OpenAI bridge's history reads too), oldest first, each a
// [HistoryMessage]: the user's text, then the agent's answer as the
// pipeline stored it (its final frame: the state, the question of an
// interrupted turn, the e2a.complete result, a failure's code and message;
// streamed deltas are not kept). A stateless agent that asked for input
// (an interrupted turn) so gets the client's answer with what it asked.
// It is bounded: the last [DefaultMaxHistoryTurns] turns
// ([WithMaxHistoryTurns]; of them, the newest whose stored requests and
// final frames fit in bridge.DefaultMaxHistoryBytes, 4 MiB, are read), of whose messages the newest that fit in 64 KiB
// of JSON; absent when there is none. Each request is recorded in its
// conversation before it is POSTed; a conversation store that cannot be
// read ends the request with history_unavailable (retryable) before
// anything is sent.
//
// # The answer
//
// A 2xx answer is read by its Content-Type:
//
//   - application/x-ndjson (or application/ndjson, application/jsonl,
//     application/jsonlines, application/x-jsonlines, and Spring WebFlux's
//     older application/stream+json): one frame per line; blank lines are
//     skipped.
//   - text/event-stream: the data of each event (its data: lines joined by
//     line feeds) is one frame; event names, ids, retry fields and comments
//     are ignored.
//   - application/json (or any +json type): one JSON value. An object with
//     a "response_kind" member is a frame, and must be the final one. Any
//     other value (an object without "response_kind", an array, a string,
//     a number, true, false, null) is the request's result: the bridge
//     writes e2a.complete {"result": value}. The smallest agent answers
//     {"reply": "…"} and is done. It is read up to the frame bound and
//     the client's body bound (bridge.WithMaxBodyBytes, e2a agent's
//     E2A_UPSTREAM_MAX_ANSWER_BYTES): past the latter, typed
//     application/json or +json, the request ends upstream_protocol_error
//     naming it.
//   - text/plain (UTF-8, US-ASCII, or ISO-8859-1, a Java servlet's
//     default, decoded): the request's result is the text, a string, as
//     the JSON answer "…" would be; its trailing line breaks are dropped.
//     An empty text, another charset or bytes that are not UTF-8 are
//     upstream_protocol_error (a body the connection's close ended before
//     its first byte is a cut: see Bad answers), and so is a text whose
//     first line is an E2A frame, bare or as an SSE data line: an agent
//     that set no Content-Type (Go's net/http sniffs text/plain) is told
//     to set it, rather than have its frames shown as one text. The
//     smallest agent of all answers its text.
//
// A UTF-8 byte order mark that starts an answer (.NET's Encoding.UTF8
// writes one through a StreamWriter) is no part of its first line, event,
// value or text.
//
// Any other 2xx Content-Type is upstream_protocol_error. A non-2xx answer,
// a connection refused or an answer that stalls is an upstream error
// (bridge.FromResponse, bridge.Classify): 429, 408 and 5xx, unreachable and
// timeouts are retryable, and retried with backoff by bridge.New while no
// frame was written.
//
// # What counts as a frame
//
// A frame is a JSON object (valid UTF-8, nested at most e2a.MaxNesting
// deep) with these members, an E2A response frame (spec §12) of which the
// bridge reads only the payload:
//
//   - response_kind (required): one of spec §12.5's kinds (e2a.chunk,
//     e2a.complete, e2a.error, a2a.stream_event, acp.session_update, …);
//   - body (required): the kind's body, a JSON object;
//   - is_final (optional): defaults to true for e2a.complete, e2a.error,
//     acp.prompt_result and acp.jsonrpc_error, and for an a2a.stream_event
//     status_update or an a2a.task in state input-required or
//     auth-required (the turn ends asking the client: agent.Interrupt's
//     frame), false for every other frame;
//   - status (optional): defaults to failed for e2a.error and
//     acp.jsonrpc_error, else succeeded for a final frame and in_progress
//     for the others;
//   - metadata (optional): an object, the frame's metadata (e.g.
//     {"llm_response_id": …}, with which the A2A renderers group the events
//     of one model response); a frame without it has none.
//
// Every other member (protocol_version, response_id, request_id, sequence,
// timestamp, provenance, the echoed ids, projections) is the pipeline's
// own and is ignored: the agent runtime assigns sequence,
// response_id, timestamp and provenance and echoes the request's ids. The
// frame must then satisfy spec §12.2 (status failed ⇔ e2a.error, a final
// frame is not in_progress) and its kind's body rules (e2a.chunk needs
// delta_kind, e2a.error needs code and message, a2a.stream_event a known
// branch), and the A2A object of an a2a.stream_event, a2a.task or
// a2a.message frame must be one the pipeline's A2A renderers read (an A2A
// v0.3 event in the JSON-RPC or proto JSON shape, convertible to v1.0: a
// payload {"status": 42} is refused before it is stored: the A2A
// renderers would skip it, and a final one would end the task failed, so
// the agent hears of its mistake at once). So the smallest stream is
//
//	{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"Hel"}}
//	{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"lo"}}
//	{"response_kind":"e2a.complete","body":{"result":{"text":"Hello"}}}
//
// Each frame is written as it arrives with agent.Writer.Write, as the
// upstream wrote it: frames the agent wrote apart are never coalesced, and
// its e2a.error frames (with their code and retryable) pass through. The
// bridge's credentials are taken out of every frame but the answer's
// streamed content (bridge.Scrubber: e2a.error and acp.jsonrpc_error
// frames, final frames, status messages, the frames' metadata; not
// e2a.chunk deltas or acp.session_update frames), should the agent quote
// them. The task and context of an A2A frame are the request's, never the
// agent's (a2aframes.go): the ids an agent names in a status or artifact
// update or a message are taken out (the A2A renderers give them the
// request's task and context), and a task's are replaced with the
// request's (its task_id, else its request_id; its context_id, else the
// task's). An interrupted turn (e2a/interrupt.go: a final
// a2a.stream_event of branch status_update, or a final a2a.task, in state
// input-required or auth-required, status succeeded) passes through so
// (its ids the request's), so every protocol renders the agent's question
// and the client's next message continues the task.
//
// # Bad answers
//
// A line, event or JSON answer that is not a frame as above, is larger than
// the frame bound ([WithMaxFrameBytes], 1 MiB by default: the NATS
// server's default max_payload), or beyond the bound on frames per request
// ([WithMaxFrames]) ends the request with upstream_protocol_error, not
// retryable. An answer cut before its final frame (the connection reset,
// an HTTP/2 stream reset, a body whose length or last chunk never came, a
// body delimited by the connection's close, HTTP/1.0's, ending, mid-line,
// mid-event or not, mid-value or before the first byte of a JSON or text
// answer) ends it with upstream_unavailable, retryable ("closed
// mid-stream"). An answer the agent ended itself before its final frame
// (its Content-Length reached, its last chunk sent, its HTTP/2 stream
// ended, its gzip stream whole) ends it with upstream_protocol_error, not
// retryable, and is not POSTed again: the agent took the request and
// gave no final word, and would do so again. One silent for the client's
// idle timeout ends it with upstream_timeout. Frames after the final one
// are ignored (and logged when they were already received); the answer is
// closed at the final frame.
//
// # Resumption
//
// An HTTP agent cannot be resumed: the upstream holds no durable stream to
// reattach to. [Upstream] is not an agent.Resumer, so a request redelivered
// after its worker died once frames were written ends with the runtime's
// e2a.error agent_interrupted (retryable); one redelivered before any frame
// is called again from the start.
package httpagent
