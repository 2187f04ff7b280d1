// Package a2amap maps the frames of a request (e2a.Response) to A2A
// v1.0 events and values (a2a-go/v2's types, the model of every A2A
// answer), each event built once: the A2A v1.0 bindings and push
// notifications write them as they are (package protocols/a2a's Answers:
// A2AEvents, A2AResult, A2ATask, A2ASubscription; protocols/a2av1's
// stream), and A2A v0.3's renderers and AgentVault's (package
// protocols/a2a) and push's v0.3 task bodies convert them at their edge,
// once ([V03Event], [V03Task], [V03Result]: the SDK's a2acompat/a2av0
// conversion, v0.3's final flag from [Mapper.Final]). It also serves the
// L3 projections (protocols.FillProjections), ACP's reading of a2a.*
// frames (protocols/acp's Updates: [NativeEvent], the frame's event as
// written, in v0.3's JSON shape) and the outcome of a final frame that
// every protocol's renderer reads ([FinalOutcome]).
//
// It imports the frame types (package e2a), a2a-go's v1.0 and v0.3 types
// and egress (its ErrInvalidFrame and StoredRequest), never a protocol
// package, so that every protocol package can import it; egress imports
// no protocol code.
//
//   - [Mapper]: a stream's events, frame by frame ([Mapper.Events]; the
//     status-update a stream opens with, [Mapper.StatusUpdate]; the
//     bookkeeping of a text chunk written from its bytes,
//     [Mapper.TextArtifact]). Mappings follow a2a-interaction-spec-trpc.md:
//     text → TextPart, reasoning → TextPart metadata thought=true, tool
//     call → DataPart {id, type: function, name, args} (part type
//     function_call, object_type chat.completion), tool response →
//     DataPart {id, name, response} (function_response, tool.response),
//     executable_code / code_execution_result with their tags, metadata
//     llm_response_id → artifactId, then the final status-update
//     (completed, failed, canceled): streamed content gets no closing
//     artifact-update (one without parts is invalid, and without append it
//     would replace the artifact); a result streamed as no text chunk is one
//     artifact-update with lastChunk=true. a2a.* frames pass
//     through (proto-style snake_case is accepted, [NativeEvent], read
//     into v1.0 by the SDK's conversion), an
//     agent's own status given the task's ids where it has none: the
//     status-update of an interrupted turn (agent.Interrupt: input-required
//     or auth-required with the agent's question, [Interrupted]) ends the
//     stream. An a2a.* frame whose body is not the A2A object it names is
//     skipped, never an error; final, it ends the task failed
//     ([UnreadableFinal]). Either is logged once per read.
//   - [Aggregator]: message/send's result from the frames (a Message or a
//     Task, trpc "Non-streaming" rules); [BuildTask] rebuilds a task from
//     its requests ([Request]) as tasks/get and GetTask answer it. A
//     status-update the frames carry (an agent's own status_update
//     frame, the final frame's) is applied as a2a-go's task manager
//     applies it: the status message it replaces moves to history, its
//     metadata (status_event_metadata for the final frame's) is merged
//     into the task's.
//   - [Params]: the A2A call an answer is for (protocols/a2a.A2AParams).
//   - The pieces the other protocols' renderers read: [ContentChunk] (an
//     e2a.chunk or acp.session_update frame as a chunk), [FinalOutcome],
//     [FrameTime], [DeltaText], [AsMap], [ACPUpdate], [StopReason],
//     [LLMResponseID], and the metadata keys of the interaction spec
//     ([MetaThought], [MetaPartType]…).
package a2amap
