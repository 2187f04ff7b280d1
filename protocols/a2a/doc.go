// Package a2a is A2A v0.3 and the AgentVault A2A profile (JSON-RPC 2.0)
// as one package: the calls of their shared endpoint POST /a2a, and
// AgentVault's renderer, task view and error table.
//
// The transports are the host's (ingress: HTTP with batches and
// notifications); the calls are this package's, described by its
// [Endpoint], which ingress serves from the registry
// (protocols.Protocol.RPC, on the A2A entry; the AgentVault entry names
// [AgentVaultMethods], its format and [AgentVaultError]):
//
//   - message/send and message/stream (A2A), tasks/send and
//     tasks/sendSubscribe (AgentVault) publish the envelope the
//     normalizer's adapter made and record the request on its task in the
//     host's task store ([host.Tasks]). A message naming a task continues
//     it (the caller's own, else not found), keeping its context; a
//     message to a finished A2A task is -32004 UnsupportedOperation
//     (TaskOpen). A context id the client chose must be the caller's
//     (ClaimContext: another principal's is a conflict). Streams take one
//     of the caller's stream slots.
//   - tasks/get and tasks/cancel are both protocols' names: they are
//     answered in the shape of the protocol whose record made the task
//     (only the caller's own tasks are looked at, so the shape says
//     nothing of another principal's); tasks/resubscribe follows an A2A
//     task's last request.
//   - push-config methods and agent/getAuthenticatedExtendedCard are
//     refused by the adapter (-32003, -32007).
//   - a single call of an A2A v1.0 method ([V1Methods]) is handed, before
//     the gate, to the host's v1.0 handler ([host.TaskHost.A2AV1]; the
//     endpoint's Peek): clients that resolve the card's v0.3 url whatever
//     the version reach v1.0 here too.
//
// A2A's answers come from egress's A2A renderers and values
// ([host.TaskAnswers]); AgentVault's are this package's: its SSE renderer
// ([NewAgentVaultStream], format [AgentVaultFormat], on egress's
// A2AMapper: the A2A events of the frames, in the profile's events), its
// task view ([AgentVaultTask], from egress.BuildA2ATask over the task's
// requests) and cancel result, with their conformance case and golden
// files under testdata/ (agentvault_sse, agentvault_task). A streaming
// method's JSON answer (an error) is sent as one SSE event, so its client
// reads every answer as the stream it asked for. Refusals of the gate are
// JSON-RPC errors with the HTTP status, echoing the call's id when it is
// readable. The A2A error table is egress's ([Error] is egress.A2AError),
// as are A2A's renderers, their conformance cases and golden files, and
// the frame-to-A2A mapping shared with the A2A v1.0 handler, which imports
// this package for [Continued], [Interaction] and [HistoryLength].
//
// A2A and AgentVault are one package because they are one endpoint: one
// dispatch table, two shared method names answered by the task's record,
// and one submit flow that AgentVault takes less the terminal-task check.
package a2a
