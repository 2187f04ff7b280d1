// Package a2a is A2A v0.3 and the AgentVault A2A profile (JSON-RPC 2.0)
// as one package: the calls of their shared endpoint POST /a2a, their
// renderers, AgentVault's task view, and their error tables.
//
// The transports are the host's (ingress: HTTP with batches and
// notifications); the calls are this package's, described by its
// [Endpoint], which ingress serves from the registry
// (protocols.Protocol.Service, a host.TaskRPCServer through [TaskEndpoint], on the A2A entry; the AgentVault entry names
// [AgentVaultMethods], its format and [AgentVaultError]):
//
//   - message/send and message/stream (A2A), tasks/send and
//     tasks/sendSubscribe (AgentVault) submit the envelope the
//     normalizer's adapter made as a turn of its task, once
//     ([host.Submitter]: the host records it in its task store, claims
//     the context, takes the stream slot and publishes). A message naming
//     a task continues it (the caller's own, else not found), keeping its
//     context; a message to a finished A2A task is -32004
//     UnsupportedOperation ([host.Tasks] CheckTaskOpen), but for the retry
//     of a turn the task holds (its Idempotency-Key: [Retried]), answered
//     as the duplicate it is; one to a task
//     whose turn was interrupted (input-required, auth-required) is its
//     answer, a new turn. A context id the client chose must be the
//     caller's (another principal's is a conflict). Streams and a
//     blocking message/send (its answer waits for the final frame) take
//     one of the caller's stream slots; a send answered at once takes none.
//   - tasks/get and tasks/cancel are both protocols' names: they are
//     answered in the shape of the protocol whose record made the task
//     (only the caller's own tasks are looked at, so the shape says
//     nothing of another principal's); tasks/resubscribe follows an A2A
//     task from the oldest of its own turns that has not ended (the one
//     running) to the newest's final frame, one turn after another in one
//     stream (Answers.FollowedTurns), its event ids naming their turn
//     ("<requestID>:<seq>"): a Last-Event-ID naming one resumes there,
//     through each later turn (Answers.TurnsFrom).
//   - push-config methods and agent/getAuthenticatedExtendedCard are
//     refused by the adapter (-32003, -32007).
//   - a single call of an A2A v1.0 method ([V1Methods]) is handed, before
//     the gate, to the host's v1.0 JSON-RPC binding
//     ([host.TaskHost.BindingRPC]; the
//     endpoint's Peek): clients that resolve the card's v0.3 url whatever
//     the version reach v1.0 here too.
//
// The answers are this package's renderers, served over the host
// (message/stream with Serve, message/send with ServeFrom, tasks/resubscribe
// and AgentVault's streams with [host.TaskFrames]' ServeExisting):
// A2A v0.3's SSE renderer ([NewStream], format [StreamFormat]: a JSON-RPC
// response per A2A event, plain text chunks written straight from the
// frame's bytes by its text fast path) and message/send's ([NewSend],
// [SendFormat]: a Message or a Task), both without the parts the client
// must not get (no DataPart unless its accepted output modes admit JSON,
// no thought or function parts unless it declared the interaction spec);
// AgentVault's SSE renderer ([NewAgentVaultStream], [AgentVaultFormat]:
// the A2A events of the frames in the profile's events), its task view
// ([AgentVaultTask]) and cancel result. A streaming method's JSON answer
// (an error) is sent as one SSE event, so its client reads every answer as
// the stream it asked for. Refusals of the gate are JSON-RPC errors with
// the HTTP status, echoing the call's id when it is readable. The error
// tables are this package's ([Error], [AgentVaultError]), and so are the
// renderers' conformance cases and golden files under testdata/
// (a2a_sse[_basic|_text_only], a2a_json[…], agentvault_sse; the task views
// a2a_task, agentvault_task).
//
// The mapping of frames to A2A events and values is subpackage a2amap's,
// a leaf that egress imports too. It builds A2A v1.0 values (a2a-go/v2's),
// which the A2A v1.0 handler answers as they are ([Answers]: tasks/get's
// task, message/send's result, a stream's events); this package's v0.3
// and AgentVault renderers and answers convert them at their edge, once
// (a2amap.V03Event, V03Task, V03Result). The A2A v1.0 package (protocols/a2av1) imports
// this one for [Continued], [Interaction] and [Path]; the v1.0 method
// names ([V1Methods]) are here because this endpoint's Peek needs them.
//
// A2A and AgentVault are one package because they are one endpoint: one
// dispatch table, two shared method names answered by the task's record,
// and one submit flow that AgentVault takes less the terminal-task check.
package a2a
