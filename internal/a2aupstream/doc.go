// Package a2aupstream runs real A2A agents for tests: a2a-go/v2's server
// (a2asrv) with an agent whose behaviour the message chooses, on a
// loopback port, over one binding (JSON-RPC, HTTP+JSON or gRPC) with its
// agent card at /.well-known/agent-card.json declaring that binding. It is
// the upstream the A2A bridge's tests talk to, and is not test code
// itself so that any package's tests can import it.
//
// Scenarios, by the prefix of the first text part of the message that
// starts a task ([Scenario]); the content is derived from the text, so
// tests compare it exactly ([StreamChunks], [AskReply]…):
//
//   - "stream:" working, a thought (TextPart, metadata thought=true), the
//     text in several chunks of one artifact (append, lastChunk), a
//     DataPart artifact {"k":"v"}, completed.
//   - "tool:" a function_call and a function_response DataPart (trpc
//     spec shapes), a text, completed.
//   - "ask:" a chunk, then input-required with the agent's question; the
//     next message on the task (the answer) completes it with "Hello,
//     <answer>".
//   - "auth:" auth-required with a message. a2a-go/v2 (like @a2a-js/sdk)
//     treats auth-required as not final: the stream stays open and the
//     execution waits for credentials to arrive out of band, and a new
//     message on the task would be refused while it waits. Here the next
//     message naming the task is that credential: the server hands it to
//     the waiting execution, which completes with "Authorized: <text>"
//     (the new call streams the rest, or answers the final task). A
//     client must end its turn at auth-required on its own.
//   - "fail:" failed with a message.
//   - "slow:" a chunk every Options.SlowInterval until canceled (CancelTask
//     → canceled) or Options.SlowChunks were sent.
//   - "message:" a direct Message (no task).
//   - "file:" an artifact with a file's bytes, one with a file URL.
//   - "reject:" working, then rejected with a message ([RejectText]).
//   - "agent-cancel:" working, then canceled by the agent itself (no
//     CancelTask) with a message ([AgentCancelText]).
//   - "artifact-meta:" a text artifact with a name and metadata, in two
//     chunks (the second appended), each text part with metadata of its
//     own; a data artifact with metadata on it and its part; completed
//     ([MetaArtifactName]).
//   - anything else: one Task event, completed, with an echo artifact.
//
// Variants ([Options]): no streaming capability (SendMessage and GetTask
// only), A2A v0.3 (a2a-go/v2's server-side compat layer, a2acompat/a2av0
// and a2agrpc/v0, with a v0.3 card), a required bearer token or headers
// (refused with the protocol's unauthenticated error), and faults
// ([Fault], [Server.SetFault]): an HTTP error status (503, 429 with
// Retry-After) for the next N calls, a call that hangs, a garbage answer,
// a connection dropped in the middle of an event; and the card and
// JSON-RPC answers framed as another language's SDK frames them ([Wire]:
// the Python SDK's, reproduced from its source, since it cannot be
// installed here).
//
// What the server received is recorded: every call with its headers
// ([Server.Calls]), every turn the agent ran with the task history it saw
// ([Server.Executions]), every cancel ([Server.Cancels]).
package a2aupstream
