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
// HTTP call (bridge.Client.HTTP). The client's idle timeout bounds the wait
// for an answer on every binding: HTTP's response headers, and on gRPC a
// unary call's answer and a stream's first message (grpcidle.go).
//
// [Upstream.Call] sends the request's user message: its text
// (bridge.UserText), its files (params.files: bytes from a data: URI, or
// a URL) and data parts (params.data_parts), or the image, audio and
// resource blocks of an ACP prompt (else of E2A's params.content_blocks,
// spec §11.5). Its messageId is derived from the
// request (a name-based UUID of the pool and request id): the same on
// every attempt of the request (a retry before any frame, a redelivery),
// so an agent can dedupe a retried call, and another for every other
// request (each turn is one). It streams (SendStreamingMessage)
// when the card says the agent streams, else sends with returnImmediately
// and polls GetTask until the task ends or is interrupted (a poll that
// fails as a cut stream does is tried again, up to three times in a row,
// with the re-subscriptions' backoff). Every call activates the A2A
// extensions of the card (capabilities.extensions) whose content the
// bridge reads (the A2A-Extensions service parameter; X-A2A-Extensions on
// v0.3): the trpc interaction spec's trpc-a2a-version, without which an
// agent such as the pipeline's own A2A door keeps thoughts and tool parts
// from its client. No other extension, nor the client's own, is asked for.
// Every event becomes frames:
//
//   - a text part: an e2a.chunk text delta; a text part whose metadata says
//     thought: true (ADK's: adk_thought): a reasoning delta;
//   - a data part holding a function_call or function_response (the trpc
//     interaction spec's DataParts; ADK's, marked adk_type): a tool delta
//     (e2a.ToolDelta);
//   - the deltas of an artifact carry its id as the frames'
//     llm_response_id (agent.Writer.SetMetadata), so the pipeline's A2A
//     renderers keep them in one artifact of that id, and its name,
//     description and metadata (artifact_name, artifact_description,
//     artifact_metadata: on its first chunk, and again when an appended
//     update changes the metadata), its extensions (artifact_extensions,
//     on its first chunk) and the text part's metadata
//     (artifact_part_metadata, on each chunk of that part), and its
//     mediaType and filename (artifact_part_fields, on each chunk of
//     that part; on a native frame, below, of a text or data part's:
//     A2A v0.3's text and data parts, the frames' shape, have neither),
//     which the renderers give the artifact and its part;
//   - the metadata of an artifact-update event (A2A
//     TaskArtifactUpdateEvent.metadata): artifact_event_metadata on the
//     chunks of its parts, the native frame's event's own (below), which
//     the renderers give the stream's artifact-update events beside their
//     own members (an event's metadata is no part of the task); that of a
//     final status-update (TaskStatusUpdateEvent.metadata): the frame's
//     own status_update event's (input-required, auth-required, the
//     agent's own rejected or canceled end), else the final frame's
//     status_event_metadata (completed, failed), which the renderers give
//     the status-update they end the stream with, and the pipeline's task
//     its metadata (GetTask, tasks/get: a2amap merges every
//     status-update's into the task's, as a2a-go's task manager does); a
//     working status-update's is its own frame's event's (below);
//   - any other data part, and a file part (bytes or URL): an
//     a2a.stream_event frame of branch artifact_update (the A2A v0.3
//     TaskArtifactUpdateEvent with the part, the artifact's id, its name
//     and description, append when frames of it were written before),
//     which the A2A renderers pass through as the agent sent it; the later
//     parts of that artifact are written the same way, so that its
//     appends stay in order;
//   - an artifact update without append of an artifact already written
//     replaces it (A2A): when both are text only and its text extends
//     what was written, the text beyond it is written as above; else the
//     artifact whole, as one artifact_update without append (the A2A
//     streams show it replaced, and so does e2a.complete's result text;
//     the E2A text deltas, an ACP session and the aggregated
//     message/send task of a2amap do not replace);
//   - the data and file parts of a message (a completed status's message;
//     a direct Message answer that is not the turn's first frame, below) likewise,
//     as an artifact named after the message;
//     its text parts as text deltas of no artifact (no llm_response_id),
//     each part's metadata and its mediaType and filename as
//     artifact_part_metadata and artifact_part_fields on its chunks (the
//     renderers keep a run of chunks of the same fields one part);
//   - a status-update while the task works (a state that neither ends the
//     task nor asks for input: working) with a message, or with metadata:
//     the agent's status-update as it sent it, an a2a.stream_event frame of
//     branch status_update, not final (turn.statusMessage), its message's
//     id, role, parts, metadata and extensions and the event's metadata
//     kept, but the upstream's task, context and reference task ids: A2A
//     v1.0 and v0.3 clients get that status-update where the agent sent it
//     among its artifact updates, and the task (GetTask, tasks/get) has
//     the message in its history once a later status replaces it and the
//     metadata merged into its own, as from the agent itself (a2amap
//     applies status-updates as a2a-go's task manager does); E2A clients
//     get the frame (not the answer's text: e2a.complete's text has not
//     its words), ACP clients its parts (agent_message_chunk, a thought's
//     agent_thought_chunk, a tool part's call), A2E a status event. A
//     thought or tool part marked the ADK way is marked as the renderers
//     read it (thought, type), which keep it from an A2A client that did
//     not ask for the trpc interaction spec's parts. The Handler scrubs
//     the frame of the bridge's credentials (bridge.Scrubber: a status
//     message is the agent's own words, not its answer). Once each
//     message by its id, also when only a snapshot shows it (a poll, a
//     re-subscription after a cut: the task's history, written as working
//     status-updates, and its status) and when the agent sends it again (a
//     status-update replayed, a completed status with the same message:
//     not written again; a takeover's first snapshot's messages count as
//     written, but a completed status's); a completed status's message:
//     its parts, as the answer's (below), its text scrubbed; input-required
//     and auth-required: the turn ends interrupted with the agent's
//     final status-update (e2a.InterruptBody's frame) and its message as
//     it sent it but its thoughts and the upstream's ids, as the agent's
//     own end below: its parts in their order (each text part its own, and
//     its data and file parts: a form to fill in) with their metadata, its
//     metadata and extensions (the Handler scrubs the frame;
//     e2a.Response.Interrupt joins the text), and the text and data parts'
//     mediaType and filename (the frame's artifact_part_fields);
//     completed: e2a.complete, whose result is
//     {"upstream_task_id", "upstream_context_id", "text"} when deltas were
//     written and none otherwise (the renderers would make a part of it);
//     its text is the text deltas of each artifact (and of no artifact:
//     messages'), in the order first written, with an artifact's later
//     text parts written natively, and the text of an artifact replaced
//     whole replaced; a text too large for one frame (the NATS server's
//     max_payload; its deltas were split into frames that fit), or for
//     what its deltas left of the answer bound
//     (bridge.WithMaxAnswerBytes), is left out, "text_omitted" saying so;
//     failed: e2a.error upstream_failed (not retryable) with the agent's
//     message; rejected, and canceled by the agent itself: the agent's
//     final status-update (an a2a.stream_event status_update frame,
//     final, status succeeded) with its message, which A2A clients see as
//     the task rejected or canceled with that message (a2amap's
//     FinalOutcome), ACP's as stopReason refusal or cancelled; a cancel
//     of the request ends as the runtime's cancelled;
//   - a Message answer (no task), the turn's first frame (as A2A has it:
//     the stream's one event, SendMessage's result): the request's final
//     frame, the pipeline's own direct answer (e2a.ReplyBody's frame: an
//     a2a.stream_event of branch message), with the Message as the agent
//     sent it, its id, role, metadata, extensions and parts (a text or
//     data part's mediaType and filename in artifact_part_fields), but
//     the upstream's task, context and reference task ids: A2A v1.0 and
//     v0.3 clients get that Message, SendMessage's result or a stream of
//     that one event, with the pipeline's context, as a client of the
//     agent gets it. A client whose message named a task (a continuation)
//     gets the Task all the same, its stream the task's final
//     status-update carrying the Message (the renderers': a task it knows
//     is not taken back); E2A clients the frame, ACP its parts as
//     agent_message_chunk and the other protocols its text. A Message
//     after frames of the turn (an agent that sent task events first;
//     a takeover's) is written as a completed status's message is: its parts, then
//     e2a.complete;
//   - an event naming another task than the turn's, once the turn's task
//     is known (the first event naming one, or the task a continuation or
//     a takeover goes on with): nothing. It is not this request's answer
//     (an agent whose event queues cross); it is dropped and logged with
//     the count of such events (the first, then at each power of two), and
//     the turn's task, which it records and cancels, stays its own.
//
// The upstream's task and context ids are kept with the conversation
// (bridge.Conversations, by A2A context, ACP session, E2A session_id, per
// owner: e2a.Envelope.Owner) as soon as they are known, one write per request: the
// upstream task per pipeline task (bridge.Thread; an ACP session's prompts
// are one), the upstream context per conversation. A new task of the
// conversation goes to the same upstream context as a new upstream task;
// the next turn of a task goes to that task's upstream task while it waits
// for input (the task's last turn's final frame is an interrupt: read, not
// written), whatever the context's other tasks did meanwhile. A snapshot
// that still shows the task as that turn left it (the same question: an
// agent that opens the follow-up stream with its stored task as is, a
// poll before the agent took the message up) is not the turn's end. That task
// holds its earlier turns' artifacts, which some of its events hold too
// (a task snapshot: GetTask, the first event of @a2a-js/sdk's follow-up
// stream): the turn reads the task (GetTask) before it sends the message,
// and writes only what the task gets beyond them. What it read (the
// baseline: per artifact, the length and hash of its text of each kind
// and the count of its other parts, at most bridge.MaxBaseline bytes) is
// recorded with the request's upstream task, in the same write
// (bridge.Thread.Baseline, the thread's latest only), with the
// interrupted status the turn found (a worker taking the turn over does
// not take a snapshot still showing it for the turn's end either). Each of a
// thread's last turns keeps the upstream task it recorded
// (bridge.Thread.Tasks): requests of one session that run at once, each
// in an upstream task of its own, are each taken over to their own. A
// cancel of the request is forwarded (CancelTask), by the running Call
// (also when the agent had not named its task yet: its stream, or its
// answer to SendMessage, is waited for on, up to
// agent.CancelRequestTimeout, and the task it names cancelled), or, when the request was cancelled while no worker held it (its worker
// died), by the worker that picks its redelivery up
// (agent.RequestCanceller: the task the request recorded is cancelled; a
// refusal is logged and the request ends cancelled all the same); so is
// the cancel of a task whose turn ended interrupted (a cancel turn,
// agent.TurnCanceller: the agent's refusal, e.g. a task it already ended,
// is recorded in the turn's final frame, which ends cancelled all the
// same).
//
// A worker that dies mid-stream: the worker taking the request over
// (agent.Writer.ResumeAfter ≥ 0) reads the request's stored frames
// (E2A_RESPONSES) into what each artifact holds (the text and reasoning
// written, the count of other parts; for a continuation, first the
// baseline the request recorded, each artifact's text of it the start of
// that artifact in the task's first snapshot when its length and hash
// match, else the artifact was replaced since and is written whole; the
// stored frames of the thread's earlier requests that recorded the same
// upstream task, those the record keeps: its last four, serve for the
// artifacts past the baseline's bound and for a record written without
// one), subscribes to the
// upstream task (SubscribeToTask), whose first event is the task as it
// stands, and writes only what the frames lack: the text of each artifact
// beyond what was written, the parts after those written (an artifact
// that does not extend them was replaced: written whole); then the events
// that follow (an agent that sends the running turn's events again from
// their start after a task without its artifacts, as another E2A
// pipeline's A2A door does, has the updates that repeat what the frames
// hold left out: replay.go); a completed status's message that the stored frames end
// with (the worker stopped before its e2a.complete) is not written
// again. A subscription that begins with a later event instead
// (a2a-go v0.3's resubscribe) is left: the task is read with GetTask and
// polled, as is that of an agent that does not stream; a task that ended
// is read whole (GetTask) when the agent refuses the subscription. The
// text deltas stored count in the answer's text (e2a.complete's result).
// The request ends upstream_cannot_resume when the task
// is unknown to the worker (the first worker stopped before the agent
// named it, or four later requests of its thread recorded theirs since;
// retryable) or gone from the agent (not retryable).
package a2abridge
