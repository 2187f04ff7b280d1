package jsonrpc

// The error codes of every protocol the pipeline serves over JSON-RPC, in
// one table. -32768..-32000 is reserved by JSON-RPC 2.0; -32000..-32099 is
// "implementation-defined server errors", which each protocol assigns its
// own way, so the same number means different things per protocol: always
// use the name of the protocol that answers.

// JSON-RPC 2.0.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// A2A v0.3 (specification §8.2, "A2A-specific errors").
const (
	CodeA2ATaskNotFound                 = -32001
	CodeA2ATaskNotCancelable            = -32002
	CodeA2APushNotificationNotSupported = -32003
	CodeA2AUnsupportedOperation         = -32004
	CodeA2AContentTypeNotSupported      = -32005
	CodeA2AInvalidAgentResponse         = -32006
	CodeA2AExtendedCardNotConfigured    = -32007
)

// The AgentVault A2A profile.
const (
	CodeAVServerError    = -32000
	CodeAVTaskNotFound   = -32001
	CodeAVAuthentication = -32002
	CodeAVAuthorization  = -32003
	CodeAVInvalidState   = -32004
)

// ACP (agent-client-protocol), beyond JSON-RPC's.
const (
	CodeACPAuthRequired     = -32000
	CodeACPResourceNotFound = -32002
	CodeACPRequestCancelled = -32800
)

// A2A v1.0 defines no JSON-RPC code for a refused credential (its
// bindings answer HTTP 401/403); these are a2a-go/v2's, which its client
// reads as a2a.ErrUnauthenticated and a2a.ErrUnauthorized. The v1.0
// JSON-RPC endpoint answers them.
const (
	CodeA2AUnauthenticated = -31401
	CodeA2AUnauthorized    = -31403
)

// The pipeline's own, on every JSON-RPC endpoint.
const (
	// CodeRateLimited refuses a request over the principal's rate limit
	// (429 as a mnemonic).
	CodeRateLimited = -32029
	// CodeAuthentication and CodeAuthorization are the AgentVault
	// profile's codes for credential failures, used where the protocol
	// has none of its own (A2A endpoints answer HTTP 401/403 as well).
	CodeAuthentication = CodeAVAuthentication
	CodeAuthorization  = CodeAVAuthorization
)
