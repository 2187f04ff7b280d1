// Package acp is the Agent Client Protocol (ACP, JSON-RPC 2.0) as one
// package: its calls, its answers from a request's frames (the ACP
// renderer: session/update notifications, then the session/prompt result
// {stopReason} or an error) and its error table.
//
// ACP is served at POST /acp and over stdio (`e2a acp`); the transports are
// the host's (ingress: HTTP with batches and notifications, lines on stdio
// with $/cancel_request), the calls this package's, described by its
// [Endpoint], which ingress serves from the registry
// (protocols.Protocol.Service, a host.RPCServer):
//
//   - initialize, authenticate, logout are answered locally: protocol
//     version 1, loadSession, the prompt capabilities of the pool prompts
//     go to (image and audio by its input modes: [InputModes]), the MCP
//     capabilities http and sse (servers forwarded to the agent), and one auth method
//     per scheme the host has (host.Authentication; over HTTP the
//     credential travels in the headers, so authenticate only checks the
//     method id), described for the transport: over stdio, where the
//     editor sends no headers, as the variable of `e2a acp`'s environment
//     that holds it (host.AuthMethod.StdioDescription).
//   - session/new creates a session (a UUIDv7) in the host's task store
//     (host.Sessions) with its cwd and MCP servers (secret values removed)
//     and answers {sessionId}. An MCP server of type acp (MCP over ACP,
//     not advertised: the door does not relay the client's connection)
//     is -32602 naming it, in session/new and session/load alike
//     (checkMCPServers), nothing stored.
//   - session/prompt publishes the envelope, appends the request to the
//     session, and streams session/update notifications then the result
//     {stopReason}: NDJSON (default, Accept: application/x-ndjson) or SSE
//     (Accept: text/event-stream), one JSON-RPC message per line or event;
//     on stdio, lines from the first frame (host.FromAnswerer). The
//     session's cwd and mcpServers are added to the envelope's params (when
//     the prompt has no such keys), and the keys of params._meta.e2a_params
//     are lifted into params (never overwriting): ACP's PromptRequest has
//     no room for pipeline parameters, and normalizer.EnvelopeToACPPeerCall
//     moves them to the same place. params._meta.traceparent and
//     tracestate (the root keys ACP reserves for W3C trace context) are
//     the request's trace context when the call had no traceparent
//     header (metaTrace, checked by e2a.CleanTrace). Tool calls: an e2a function_call
//     starts a tool_call (in_progress), its function_response ends it
//     completed (rawInput and rawOutput the args and response, a JSON
//     object or array in a string decoded: rawJSON), or failed when the response carries an error ("error",
//     or an MCP result's isError), its content the output or the error
//     as one text block an editor's tool card shows (toolOutputText,
//     at most [MaxToolContent] bytes; a start has none); a call the turn ends without a result
//     for (a model's tool call nobody runs: the OpenAI bridge's
//     finish_reason "tool_calls"; a failed or cancelled turn) gets a
//     tool_call_update failed before the answer, never left running, its
//     content a line saying why (ended, failed or cancelled: endText); a
//     turn interrupted for input or auth leaves its open calls pending,
//     and the session's next turn ends them: with their results, or
//     failed at its end when it gives none. An agent's native updates
//     have their enum members (tool kind and status, plan priority and
//     status) made ones of ACP's schema.
//   - session/load replays the session's history (user_message_chunk for
//     each prompt, then the agent's updates; host.Frames) as
//     session/update notifications, framed like session/prompt, then the
//     result LoadSessionResponse {} (no modes, models or config options;
//     _meta MetaHistoryExpired when part of the history aged out);
//     each ended turn's tool calls end as they did live. Its cwd and
//     mcpServers replace the session's when the caller may write the
//     session; a caller who may only read it (the audit role) gets the
//     replay, the settings left as they are.
//   - session/cancel (a notification) cancels the session's last request
//     (host.Canceler); the pending session/prompt then ends with
//     stopReason "cancelled".
//   - session/list, session/fork, session/resume and session/close: the
//     pipeline owns sessions and does not implement these: -32601.
//   - session/set_mode, session/set_model and session/set_config_option:
//     session/new advertises no modes, models or config options (an agent
//     pool cannot announce them), so by the schema these are -32601 and are
//     never forwarded to an agent.
//   - any other method the normalizer accepts (extension methods "_…",
//     document and provider methods, …) is passed through to the agent
//     pool: published, then answered with the request's final frame
//     (e2a.complete → result, e2a.error → error). As a notification it is
//     only published. One whose params name a session (sessionId, or
//     session_id) is a call into it: the session must be one the caller
//     may write, as for session/prompt, else -32002 and nothing is
//     published. One whose schema requires a sessionId (document/*,
//     nes/* but nes/start) without one, or any call whose sessionId or
//     session_id is not a string, is -32602 and nothing is published
//     (normalizer.FromACP).
//
// Unknown sessions are answered with ACP's -32002 (resource not found); a
// session of another principal is unknown. Auth failures use ACP's -32000
// (authentication required) with HTTP 401 ([Refuse]); initialize alone is
// answered over HTTP to a caller without a credential ([Open]), so that it
// reads the authMethods. Over stdio
// ([host.Lines]), a session/cancel also cancels the session's prompts in
// flight on the connection, and $/cancel_request cancels a session/prompt
// in the pipeline (it then ends with stopReason "cancelled") and stops any
// other call, answered -32800.
//
// Requests are decoded by the normalizer's ACP adapter
// (normalizer.FromACP); the frame-to-ACP mapping the renderer and
// session/load share ([Updates], [Final], [TextUpdate] for plain text
// chunks, [E2AResponseToACPJSONRPCResponse]) is mapping.go's; the L3
// projections (package protocols' FillProjections) use it too.
//
// Files: calls.go (the endpoint and its calls), render.go (the renderer),
// errors.go (the error table); conformance_test.go runs the renderer
// through protocols/conformance's scenarios against
// testdata/acp_ndjson/<scenario>.golden and testdata/acp_sse/ (go test
// ./protocols/acp -update rewrites them); calls_test.go runs the calls
// over a fake host.
package acp
