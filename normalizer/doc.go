// Package normalizer turns every external protocol the pipeline speaks into
// an [e2a.Envelope], and exports envelopes back to ACP JSON-RPC. It is pure:
// no I/O, no clock or randomness except through [Input.Now] and
// [Input.NewID], no global state besides read-only tables.
//
// # Adapters
//
// One file per protocol, all with the signature [Adapter]
// (func(Input) (*Result, error)) and all held to one conformance suite:
//
//	e2a.go         FromE2A         raw E2A envelope or legacy AgentRequest (spec §9–§11)
//	acp.go         FromACP         ACP JSON-RPC (§8, §11.3); MergeParamsToACPPrompt (§7);
//	                               EnvelopeToACPJSONRPCCall (§11.4); EnvelopeToACPPeerCall
//	a2a.go         FromA2A         A2A v0.3: message/send, message/stream, tasks/get,
//	                               tasks/cancel, tasks/resubscribe (a2a-go types)
//	agentvault.go  FromAgentVault  AgentVault profile: tasks/send (new / continued),
//	                               tasks/get, tasks/cancel, tasks/sendSubscribe
//	a2e.go         FromA2E         one A2E NDJSON message, with the type [Registry]
//	workflow.go    FromWorkflow    A2E workflow, JSONL or REST {"workflow": "..."}
//
// [Normalizer.Adapter] returns an adapter by protocol name ([Protocols]).
//
// # What every adapter does
//
//   - protocol_version "1.0"; request_id from the body (E2A), else
//     Input.RequestID, else a UUIDv7; timestamp from the body (E2A, A2E ts),
//     else now; channel from the body (E2A), else Input.Channel, else the
//     protocol name.
//   - a body that is not valid UTF-8 is ErrParse (never silently repaired);
//     the request id, and the task, context and session ids of A2A,
//     AgentVault, ACP and workflows (an E2A envelope's task and context
//     ids), must pass subjects.ValidateRequestID
//     (ErrInvalidParams wrapping subjects.ErrInvalidID otherwise), so that
//     nothing is published under an id a NATS header cannot carry exactly.
//   - provenance: source_protocol (the specification's e2a, acp or a2a;
//     AgentVault is a2a, A2E and a legacy AgentRequest e2a, with the finer
//     origin — agentvault, a2e, agent_request — in details.ingress_protocol),
//     converter "e2a-pipeline/normalizer/<adapter>", converted_at now
//     (an E2A envelope whose sender already set a converter keeps it), and
//     details: jsonrpc_method, op, and the protocol hints listed at the
//     Detail* constants.
//   - transport facts from Input only: W3C traceparent/tracestate headers →
//     Envelope.Trace (invalid ones dropped); identity per [Principal]: an
//     authenticated principal's user id wins, unless it is a gateway that
//     AssertsUser; otherwise X-User-ID, then the ids the body claims (A2A
//     metadata user_id …). No other header is read: Authorization,
//     X-Api-Key, Cookie never reach an envelope.
//   - secrets stripped before the envelope leaves the adapter (DESIGN
//     guarantee 5): auth.bearer_token removed (its reference in
//     auth.credential_ref with a [SecretRefFunc]), auth.extra_headers values
//     replaced by references or dropped (names kept in
//     auth._meta.stripped_headers), scalar values under secret keys
//     ([IsSecretKey]) in every free-form object replaced by a reference or
//     [Redacted], A2A push notification token and credentials, and
//     credentials in webhook/push URLs (counted), which are kept as their
//     scheme and host only (redact.URL: a webhook's path or query may be
//     its secret); a URL's password and secret parameters in any string
//     (package redact) but the uri of a message's files (params.files,
//     params.attachments, content_blocks, an ACP prompt's resource links:
//     a presigned URL is how a client hands its agent a file).
//     details.stripped_secrets counts them.
//   - the pool chosen by the routing rule ([Routes]: explicit Input.Agent,
//     then method, method prefix, channel, the workflow rule, default), and
//     the [Op] telling the front door what to do (submit, query, cancel,
//     subscribe, local).
//
// # JSON-RPC ids and the kind of request
//
// The request's id is kept in Envelope.JSONRPCID as raw canonical JSON: a
// number keeps its exact text, a string stays a string, so the answer echoes
// exactly what the client sent; "id": null gives no JSONRPCID (answer with
// null); a missing id is a notification (Result.Notification and
// details.jsonrpc_notification; no answer). Errors carry the id too
// ([ErrorJSONRPCID]).
//
// Envelope.Method is always the protocol's own method (message/send,
// message/stream, tasks/send, tasks/sendSubscribe, session/prompt, the A2E
// type, a2e.workflow.execute), as spec §2 does for ACP; provenance
// source_protocol says which protocol (details.ingress_protocol the finer
// origin where source_protocol cannot: agentvault, a2e), details.jsonrpc_method
// repeats the wire method and details.op the action; an A2A message's
// details.a2a_version names the version of the door it came in ("0.3"
// here; the v1.0 door, which normalizes SendMessage as message/send, sets
// "1.0"). So the answer's shape
// follows from (origin, method, is_stream):
//
//	a2a        message/send        JSON-RPC result: Message, or Task (task_id, context_id)
//	a2a        message/stream      SSE of JSON-RPC responses (status-update, artifact-update)
//	a2a        tasks/resubscribe   same SSE, replayed from the stream
//	agentvault tasks/send          JSON-RPC result {"id": task_id}
//	agentvault tasks/sendSubscribe SSE task_status / task_message / task_artifact
//	acp        session/prompt      session/update notifications, then {"stopReason"}
//	a2e        <type>              NDJSON invoke/event (seq, req_id = correlation_id), then …/resp or error
//	a2e        a2e.workflow.execute REST JSON (workflow_format rest) or NDJSON (jsonl)
//	e2a / agent_request            E2A SSE, NDJSON or JSON (§12)
//
// details.task_created / task_continued / context_created say whether the
// adapter assigned a new A2A/AgentVault task or context id (the answer must
// then report it); details.interaction_spec_version says the A2A client
// understands the trpc-agent-go encoding (tool calls as DataParts,
// thoughts).
//
// # Errors
//
// Every error is an [*Error] wrapping one sentinel: [ErrParse],
// [ErrInvalidRequest], [ErrMethodNotFound], [ErrInvalidParams],
// [ErrUnsupportedOperation]. [JSONRPCCode], [HTTPStatus] and [A2ECode] map
// them to each front door's own error shape; workflow structure errors list
// every bad line in Error.Lines. Error() is the text for logs ("normalizer
// a2a \"foo/bar\": method not found: …"); [Error.ClientMessage] is what the
// front doors answer: the kind and what was wrong, in JSON's and the
// protocol's words, without the package prefixes or Go type names ("method
// not found: \"foo/bar\": …", "invalid request: invalid envelope: field
// \"params\": must be an object, not a string"). A value of the client's
// that a message quotes (a method, a part kind, a media type, an id …) is
// escaped and cut after 64 runes, so that no message carries a client's
// value whole.
package normalizer
