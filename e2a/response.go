package e2a

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Response is one E2A response frame (E2AResponse, spec §12). Every record an
// agent publishes on e2a.resp.<request_id> is one Response.
//
// Body is kept as raw JSON so that frames pass through the pipeline without
// being re-encoded; use the typed accessors ([Response.Chunk],
// [Response.Complete], [Response.Error]) to read it.
type Response struct {
	ProtocolVersion string          `json:"protocol_version"`
	ResponseID      string          `json:"response_id"`
	RequestID       string          `json:"request_id"`
	Sequence        int64           `json:"sequence"`
	IsFinal         bool            `json:"is_final"`
	Status          string          `json:"status"`
	ResponseKind    string          `json:"response_kind"`
	Timestamp       string          `json:"timestamp"`
	Provenance      Provenance      `json:"provenance"`
	Body            json.RawMessage `json:"body"`

	JSONRPCID      json.RawMessage `json:"jsonrpc_id,omitempty"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	TaskID         string          `json:"task_id,omitempty"`
	ContextID      string          `json:"context_id,omitempty"`
	SessionID      string          `json:"session_id,omitempty"`
	MessageID      string          `json:"message_id,omitempty"`
	IsStream       bool            `json:"is_stream,omitempty"`
	IdentityOrigin string          `json:"identity_origin,omitempty"`
	Channel        string          `json:"channel,omitempty"`
	UserID         string          `json:"user_id,omitempty"`
	SourceAgentID  string          `json:"source_agent_id,omitempty"`
	Method         string          `json:"method,omitempty"`
	Metadata       map[string]any  `json:"metadata,omitempty"`
	Projections    map[string]any  `json:"projections,omitempty"`
	ChannelContext map[string]any  `json:"channel_context,omitempty"`
	A2AMetadata    map[string]any  `json:"a2a_metadata,omitempty"`
	ACPMeta        map[string]any  `json:"acp_meta,omitempty"`
}

// ChunkBody is the body of an e2a.chunk frame.
type ChunkBody struct {
	DeltaKind string `json:"delta_kind"`
	// Delta is a string for text and reasoning, an object for tool calls
	// and custom deltas.
	Delta    any    `json:"delta"`
	MimeType string `json:"mime_type,omitempty"`
}

// CompleteBody is the body of an e2a.complete frame.
type CompleteBody struct {
	Result any `json:"result"`
}

// ErrorBody is the body of an e2a.error frame (spec §12.5: code, message,
// details; optional external). Details is always written, {} when nil.
// Retryable is a pipeline extension: whether the client may retry the same
// request.
type ErrorBody struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details"`
	Retryable bool           `json:"retryable"`
	External  map[string]any `json:"external,omitempty"`
}

// MarshalJSON writes details as {} when it is nil.
func (b ErrorBody) MarshalJSON() ([]byte, error) {
	type plain ErrorBody
	if b.Details == nil {
		b.Details = map[string]any{}
	}
	return json.Marshal(plain(b))
}

// StreamEventBody is the body of an a2a.stream_event frame.
type StreamEventBody struct {
	Branch  string `json:"branch"`
	Payload any    `json:"payload"`
}

// ExtBody is the body of an ext frame.
type ExtBody struct {
	ExtMethod string         `json:"ext_method"`
	Params    map[string]any `json:"params,omitempty"`
}

// ToolDelta is the structured delta of a chunk with delta_kind "tool". Type is
// "function_call" or "function_response" (the A2A tRPC encoding), and the
// call id ties a response to its call.
type ToolDelta struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Name     string `json:"name"`
	Args     any    `json:"args,omitempty"`
	Response any    `json:"response,omitempty"`
}

// Tool delta types.
const (
	ToolFunctionCall     = "function_call"
	ToolFunctionResponse = "function_response"
)

// Chunk decodes the body of an e2a.chunk frame.
// It returns ErrInvalidResponse when the frame is of another kind or the
// body does not decode.
func (r *Response) Chunk() (ChunkBody, error) {
	var b ChunkBody
	return b, r.decodeBody(KindChunk, &b)
}

// Complete decodes the body of an e2a.complete frame.
func (r *Response) Complete() (CompleteBody, error) {
	if fastRead && r.ResponseKind == KindComplete {
		if b, ok := completeFast(r.Body); ok {
			return b, nil
		}
	}
	var b CompleteBody
	return b, r.decodeBody(KindComplete, &b)
}

// Error decodes the body of an e2a.error frame.
func (r *Response) Error() (ErrorBody, error) {
	var b ErrorBody
	return b, r.decodeBody(KindError, &b)
}

// StreamEvent decodes the body of an a2a.stream_event frame.
func (r *Response) StreamEvent() (StreamEventBody, error) {
	var b StreamEventBody
	return b, r.decodeBody(KindA2AStreamEvent, &b)
}

// BodyMap decodes the body into a generic object (numbers as json.Number).
func (r *Response) BodyMap() (map[string]any, error) {
	var m map[string]any
	if err := DecodeStrict(r.Body, &m); err != nil {
		return nil, fmt.Errorf("%w: body: %v", ErrInvalidResponse, err)
	}
	return m, nil
}

func (r *Response) decodeBody(kind string, v any) error {
	if r.ResponseKind != kind {
		return fmt.Errorf("%w: response_kind is %q, not %q", ErrInvalidResponse, r.ResponseKind, kind)
	}
	if err := DecodeStrict(r.Body, v); err != nil {
		return fmt.Errorf("%w: %s body: %v", ErrInvalidResponse, kind, err)
	}
	return nil
}

// MarshalBody encodes v as a frame body. It panics on values that cannot be
// encoded as JSON (channels, functions), which is a programming error.
func MarshalBody(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("e2a: body does not encode as JSON: %v", err))
	}
	return b
}

// PlainJSON returns v as encoding/json decodes its encoding: plain maps,
// slices, strings, float64s, bools and nil (a frame body or a projection
// built from typed values, read as a client reads it); v itself when it
// does not encode.
func PlainJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// ResponseFromJSON reads one response frame and validates it with
// [Response.Validate]. It returns an error wrapping ErrInvalidJSON for input
// that is not a JSON object and ErrInvalidResponse for a frame that breaks
// §12.4.
func ResponseFromJSON(data []byte) (*Response, error) {
	if err := checkDepth(data, MaxNesting); err != nil {
		return nil, err
	}
	raw, err := rawObject(data)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"protocol_version", "response_id", "request_id", "sequence", "is_final", "status", "response_kind", "timestamp", "provenance", "body"} {
		if v, ok := raw[k]; !ok || isNull(v) {
			return nil, fmt.Errorf("%w: missing required field %q", ErrInvalidResponse, k)
		}
	}
	var r Response
	if err := DecodeStrict(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidResponse, err)
	}
	id, err := CanonicalJSONRPCID(r.JSONRPCID)
	if err != nil {
		return nil, fmt.Errorf("%w: jsonrpc_id: %v", ErrInvalidResponse, err)
	}
	r.JSONRPCID = id
	if !utf8.Valid(r.Body) {
		// Strings elsewhere are decoded with U+FFFD for invalid bytes; do
		// the same for the raw body so that frames are always valid UTF-8.
		var b any
		if err := DecodeStrict(r.Body, &b); err != nil {
			return nil, fmt.Errorf("%w: body: %v", ErrInvalidResponse, err)
		}
		r.Body = MarshalBody(b)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Validate checks the required fields of §12.4 and the status rules of
// §12.2: status failed ⇒ response_kind e2a.error (or acp.jsonrpc_error);
// e2a.error ⇒ status failed; in_progress frames are never final. It returns
// an error wrapping ErrInvalidResponse.
func (r *Response) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidResponse, fmt.Sprintf(format, a...))
	}
	switch {
	case r.ProtocolVersion == "":
		return bad("protocol_version is required")
	case r.ResponseID == "":
		return bad("response_id is required")
	case r.RequestID == "":
		return bad("request_id is required")
	case r.Sequence < 0:
		return bad("sequence must be ≥ 0, got %d", r.Sequence)
	case !IsStatus(r.Status):
		return bad("status %q is not one of succeeded, failed, in_progress", r.Status)
	case !IsResponseKind(r.ResponseKind):
		return bad("response_kind %q is unknown", r.ResponseKind)
	case r.Timestamp == "":
		return bad("timestamp is required")
	case r.Provenance.SourceProtocol == "":
		return bad("provenance.source_protocol is required")
	}
	if _, err := ParseTime(r.Timestamp); err != nil {
		return bad("timestamp %q is not RFC 3339", r.Timestamp)
	}
	if len(r.Body) == 0 || r.Body[0] != '{' {
		return bad("body must be a JSON object")
	}
	if len(r.JSONRPCID) > 0 {
		if _, err := CanonicalJSONRPCID(r.JSONRPCID); err != nil {
			return bad("jsonrpc_id %s: %v", r.JSONRPCID, err)
		}
	}
	if r.Status == StatusFailed && r.ResponseKind != KindError && r.ResponseKind != KindACPJSONRPCErr {
		return bad("status failed requires response_kind e2a.error, got %q", r.ResponseKind)
	}
	if r.ResponseKind == KindError && r.Status != StatusFailed {
		return bad("e2a.error requires status failed, got %q", r.Status)
	}
	if r.Status == StatusInProgress && r.IsFinal {
		return bad("a final frame cannot be in_progress")
	}
	if r.IsFinal == false && r.Status != StatusInProgress {
		return bad("a non-final frame must be in_progress, got %q", r.Status)
	}
	switch r.ResponseKind {
	case KindChunk:
		c, err := r.Chunk()
		if err != nil {
			return err
		}
		if c.DeltaKind == "" {
			return bad("e2a.chunk body needs delta_kind")
		}
	case KindError:
		e, err := r.Error()
		if err != nil {
			return err
		}
		if e.Code == "" || e.Message == "" {
			return bad("e2a.error body needs code and message")
		}
	case KindA2AStreamEvent:
		s, err := r.StreamEvent()
		if err != nil {
			return err
		}
		if !contains(A2AStreamBranches, s.Branch) {
			return bad("a2a.stream_event branch %q is unknown", s.Branch)
		}
	}
	return nil
}

// ResponseFor returns a frame template for env: protocol version, request_id
// and every id the request carries (jsonrpc_id, correlation_id, session_id,
// task_id, context_id, message_id, channel, user_id, source_agent_id,
// method, is_stream) are echoed (§12.4); sequence, response_id, timestamp,
// kind, status and body are left to the writer.
func ResponseFor(env *Envelope) Response {
	v := env.ProtocolVersion
	if v == "" {
		v = ProtocolVersion
	}
	r := Response{
		ProtocolVersion: v,
		RequestID:       env.RequestID,
		CorrelationID:   env.CorrelationID,
		TaskID:          env.TaskID,
		ContextID:       env.ContextID,
		SessionID:       env.SessionID,
		MessageID:       env.MessageID,
		IsStream:        env.IsStream,
		IdentityOrigin:  IdentityAgent,
		Channel:         env.Channel,
		UserID:          env.UserID,
		SourceAgentID:   env.SourceAgentID,
		Method:          env.Method,
	}
	if len(env.JSONRPCID) > 0 {
		r.JSONRPCID = append(json.RawMessage(nil), env.JSONRPCID...)
	}
	return r
}
