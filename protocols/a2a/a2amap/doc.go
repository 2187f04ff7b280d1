// Package a2amap maps the frames of a request (e2a.Response) to A2A v0.3
// events and values, for every answer that speaks A2A or follows its
// events: A2A v0.3's renderers and AgentVault's (package protocols/a2a),
// egress's event iterator, message/send result and task view that the A2A
// v1.0 bindings convert (egress.Service.A2AEvents, A2AResult, A2ATask,
// A2ASubscription), egress's L3 projections and ACP's reading of a2a.*
// frames (egress.ACPUpdates), and the outcome of a final frame that every
// protocol's renderer reads ([FinalOutcome]).
//
// It is a leaf: it imports the frame types (package e2a) and a2a-go's
// v0.3 types, never egress or a protocol package, so that egress and the
// protocol packages (which import egress) can both import it.
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
//     would replace the artifact); a result streamed as no chunk is one
//     artifact-update with lastChunk=true. a2a.* frames pass
//     through (proto-style snake_case is accepted, [NativeEvent]), an
//     agent's own status given the task's ids where it has none: the
//     status-update of an interrupted turn (agent.Interrupt: input-required
//     or auth-required with the agent's question, [Interrupted]) ends the
//     stream.
//   - [Aggregator]: message/send's result from the frames (a Message or a
//     Task, trpc "Non-streaming" rules); [BuildTask] rebuilds a task from
//     its requests ([Request]) as tasks/get answers it.
//   - [Params]: the A2A call an answer is for (egress.A2AParams).
//   - The pieces the other protocols' renderers read: [ContentChunk] (an
//     e2a.chunk or acp.session_update frame as a chunk), [FinalOutcome],
//     [FrameTime], [DeltaText], [AsMap], [ACPUpdate], [StopReason],
//     [LLMResponseID], and the metadata keys of the interaction spec
//     ([MetaThought], [MetaPartType]…).
package a2amap
