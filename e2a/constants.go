package e2a

// ProtocolVersion is the E2A protocol version written when none is given.
const ProtocolVersion = "1.0"

// Source protocols for [Provenance.SourceProtocol]: the specification's set
// (§4.2, E2A_SOURCE_PROTOCOL_*) is e2a, acp and a2a, and only those are
// written there.
const (
	SourceE2A = "e2a"
	SourceACP = "acp"
	SourceA2A = "a2a"
)

// Finer origins the pipeline's ingress reads. They are not source_protocol
// values: [SpecifyProvenance] writes SourceProtocolOf(origin) there and the
// origin in provenance.details[DetailIngressProtocol].
const (
	SourceAgentVault = "agentvault"    // A2A AgentVault profile (tasks/send …): source_protocol a2a
	SourceA2E        = "a2e"           // A2E NDJSON messages and workflows: source_protocol e2a
	SourceLegacy     = "agent_request" // legacy AgentRequest body: source_protocol e2a
)

// DetailIngressProtocol is the provenance.details key holding the finer
// origin of an envelope whose protocol is not in the specification's set
// (agentvault, a2e, agent_request).
const DetailIngressProtocol = "ingress_protocol"

// SourceProtocolOf maps an origin to the specification's source_protocol:
// acp → acp; a2a and agentvault (an A2A profile) → a2a; anything else
// (e2a, agent_request, a2e, unknown values) → e2a, the specification's
// default for envelopes built by hand.
func SourceProtocolOf(origin string) string {
	switch origin {
	case SourceACP:
		return SourceACP
	case SourceA2A, SourceAgentVault:
		return SourceA2A
	}
	return SourceE2A
}

// SpecifyProvenance keeps p.SourceProtocol within the specification's set:
// any other value (a finer origin, or one an integrator wrote) moves to
// details[DetailIngressProtocol] (unless that is already set) and
// source_protocol becomes SourceProtocolOf of it. An empty source_protocol
// is left for the caller to fill.
func SpecifyProvenance(p *Provenance) {
	if p == nil || p.SourceProtocol == "" {
		return
	}
	switch p.SourceProtocol {
	case SourceE2A, SourceACP, SourceA2A:
		return
	}
	if p.Details == nil {
		p.Details = map[string]any{}
	}
	if _, ok := p.Details[DetailIngressProtocol]; !ok {
		p.Details[DetailIngressProtocol] = p.SourceProtocol
	}
	p.SourceProtocol = SourceProtocolOf(p.SourceProtocol)
}

// Identity origins for Envelope.IdentityOrigin.
const (
	IdentitySystem  = "system"
	IdentityUser    = "user"
	IdentityAgent   = "agent"
	IdentityService = "service"
)

// Response kinds (spec §12.5, E2A_RESPONSE_KINDS).
const (
	KindComplete       = "e2a.complete"
	KindChunk          = "e2a.chunk"
	KindError          = "e2a.error"
	KindACPSessionUpd  = "acp.session_update"
	KindACPPromptRes   = "acp.prompt_result"
	KindACPJSONRPCErr  = "acp.jsonrpc_error"
	KindA2ATask        = "a2a.task"
	KindA2AMessage     = "a2a.message"
	KindA2AStreamEvent = "a2a.stream_event"
	KindExt            = "ext"
)

// ResponseKinds lists every response kind of §12.5.
var ResponseKinds = []string{
	KindComplete, KindChunk, KindError,
	KindACPSessionUpd, KindACPPromptRes, KindACPJSONRPCErr,
	KindA2ATask, KindA2AMessage, KindA2AStreamEvent, KindExt,
}

// Response statuses (E2A_RESPONSE_STATUS_*).
const (
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
	StatusInProgress = "in_progress"
)

// Delta kinds of an e2a.chunk body.
const (
	DeltaText      = "text"
	DeltaReasoning = "reasoning"
	DeltaTool      = "tool"
	DeltaCustom    = "custom"
)

// A2A stream branches for a2a.stream_event bodies (E2A_A2A_STREAM_BRANCHES).
const (
	BranchTask           = "task"
	BranchMessage        = "message"
	BranchStatusUpdate   = "status_update"
	BranchArtifactUpdate = "artifact_update"
)

// A2AStreamBranches lists every branch of an a2a.stream_event.
var A2AStreamBranches = []string{BranchTask, BranchMessage, BranchStatusUpdate, BranchArtifactUpdate}

// ACP client → agent method names (ACP_CLIENT_TO_AGENT_METHODS).
const (
	ACPInitialize     = "initialize"
	ACPAuthenticate   = "authenticate"
	ACPSessionNew     = "session/new"
	ACPSessionLoad    = "session/load"
	ACPSessionPrompt  = "session/prompt"
	ACPSessionCancel  = "session/cancel"
	ACPSessionSetMode = "session/set_mode"
)

// ACPClientToAgentMethods lists the ACP methods a client sends to an agent.
var ACPClientToAgentMethods = []string{
	ACPInitialize, ACPAuthenticate, ACPSessionNew, ACPSessionLoad,
	ACPSessionPrompt, ACPSessionCancel, ACPSessionSetMode,
}

// ACP agent → client methods and notifications (ACP_AGENT_TO_CLIENT_METHODS,
// ACP_NOTIFICATION_NAMES).
const (
	ACPSessionUpdate            = "session/update"
	ACPSessionRequestPermission = "session/request_permission"
	ACPFSReadTextFile           = "fs/read_text_file"
	ACPFSWriteTextFile          = "fs/write_text_file"
	ACPTerminalCreate           = "terminal/create"
	ACPTerminalOutput           = "terminal/output"
	ACPTerminalRelease          = "terminal/release"
	ACPTerminalWaitForExit      = "terminal/wait_for_exit"
	ACPTerminalKill             = "terminal/kill"
)

// ACPAgentToClientMethods lists the requests an ACP agent may send a client.
var ACPAgentToClientMethods = []string{
	ACPSessionRequestPermission, ACPFSReadTextFile, ACPFSWriteTextFile,
	ACPTerminalCreate, ACPTerminalOutput, ACPTerminalRelease,
	ACPTerminalWaitForExit, ACPTerminalKill,
}

// ACPNotificationNames lists the ACP notifications.
var ACPNotificationNames = []string{ACPSessionUpdate, ACPSessionCancel}

// ACP session/update kinds (ACP_SESSION_UPDATE_KINDS).
const (
	UpdateUserMessageChunk        = "user_message_chunk"
	UpdateAgentMessageChunk       = "agent_message_chunk"
	UpdateAgentThoughtChunk       = "agent_thought_chunk"
	UpdateToolCall                = "tool_call"
	UpdateToolCallUpdate          = "tool_call_update"
	UpdatePlan                    = "plan"
	UpdateAvailableCommandsUpdate = "available_commands_update"
	UpdateCurrentModeUpdate       = "current_mode_update"
)

// ACPSessionUpdateKinds lists every ACP session/update kind.
var ACPSessionUpdateKinds = []string{
	UpdateUserMessageChunk, UpdateAgentMessageChunk, UpdateAgentThoughtChunk,
	UpdateToolCall, UpdateToolCallUpdate, UpdatePlan,
	UpdateAvailableCommandsUpdate, UpdateCurrentModeUpdate,
}

// ACP stop reasons for acp.prompt_result.
const (
	StopEndTurn         = "end_turn"
	StopMaxTokens       = "max_tokens"
	StopMaxTurnRequests = "max_turn_requests"
	StopRefusal         = "refusal"
	StopCancelled       = "cancelled"
)

// Well-known e2a.error codes written by the pipeline itself.
const (
	ErrCodeCancelled        = "cancelled"
	ErrCodeAgentInterrupted = "agent_interrupted"
	ErrCodeMaxDeliveries    = "max_deliveries"
	ErrCodeDeadlineExceeded = "deadline_exceeded"
	ErrCodeHandlerPanic     = "handler_panic"
	ErrCodeHandlerError     = "handler_error"
	ErrCodeInvalidRequest   = "invalid_request"
	// ErrCodeFrameTooLarge ends a request one of whose frames is larger
	// than the message broker accepts (its max_payload); not retryable.
	ErrCodeFrameTooLarge = "frame_too_large"
	// ErrCodeFramesEvicted ends a request whose frames already stored were
	// dropped from E2A_RESPONSES by its limits (DiscardOld at
	// E2A_RESPONSES_MAX_BYTES) while its agent was still writing: the
	// answer cannot go on after frames that are gone, so it ends, written
	// as the frame after those the client was sent. Retryable.
	ErrCodeFramesEvicted = "frames_evicted"
)

// Wire keys for legacy AgentServer payloads kept in Response.Metadata
// (E2A_WIRE_LEGACY_AGENT_RESPONSE_KEY / E2A_WIRE_LEGACY_AGENT_CHUNK_KEY).
const (
	WireLegacyAgentResponseKey = "legacy_agent_response"
	WireLegacyAgentChunkKey    = "legacy_agent_chunk"
)

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// IsResponseKind reports whether k is one of [ResponseKinds].
func IsResponseKind(k string) bool { return contains(ResponseKinds, k) }

// IsStatus reports whether s is a valid response status.
func IsStatus(s string) bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusInProgress
}
