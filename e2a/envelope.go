package e2a

import (
	"encoding/json"
)

// Envelope is an E2A request (E2AEnvelope, spec §4). Every ingress protocol
// is normalized into one; agent workers consume it from e2a.req.<pool>.<id>.
//
// Optional fields are omitted when empty. Params, ChannelContext, A2AMetadata
// and ACPMeta hold arbitrary JSON; numbers read by [FromJSON] are json.Number so
// that large integers survive a round trip.
type Envelope struct {
	ProtocolVersion string          `json:"protocol_version,omitempty"`
	RequestID       string          `json:"request_id,omitempty"`
	JSONRPCID       json.RawMessage `json:"jsonrpc_id,omitempty"`
	CorrelationID   string          `json:"correlation_id,omitempty"`
	TaskID          string          `json:"task_id,omitempty"`
	ContextID       string          `json:"context_id,omitempty"`
	SessionID       string          `json:"session_id,omitempty"`
	Channel         string          `json:"channel,omitempty"`
	Method          string          `json:"method,omitempty"`
	MessageID       string          `json:"message_id,omitempty"`
	IsStream        bool            `json:"is_stream,omitempty"`
	Timestamp       string          `json:"timestamp,omitempty"`
	IdentityOrigin  string          `json:"identity_origin,omitempty"`
	UserID          string          `json:"user_id,omitempty"`
	SourceAgentID   string          `json:"source_agent_id,omitempty"`
	Params          map[string]any  `json:"params,omitempty"`
	Provenance      *Provenance     `json:"provenance,omitempty"`

	ExtMethod           string   `json:"ext_method,omitempty"`
	SessionUpdateKind   string   `json:"session_update_kind,omitempty"`
	ExpectedOutputModes []string `json:"expected_output_modes,omitempty"`

	Auth           *Auth          `json:"auth,omitempty"`
	ChannelContext map[string]any `json:"channel_context,omitempty"`
	A2AMetadata    map[string]any `json:"a2a_metadata,omitempty"`
	ACPMeta        map[string]any `json:"acp_meta,omitempty"`

	// Deadline is a pipeline extension: an RFC 3339 instant after which the
	// request is failed with deadline_exceeded instead of being worked on,
	// not retryable (the same request sent again fails the same way).
	Deadline string `json:"deadline,omitempty"`
	// Trace carries W3C trace context (traceparent, tracestate) from the
	// client through every stage; a pipeline extension.
	Trace *TraceContext `json:"trace,omitempty"`
}

// TraceContext is W3C trace context carried with a request.
type TraceContext struct {
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// Provenance records where a request or response came from (E2AProvenance).
type Provenance struct {
	SourceProtocol string         `json:"source_protocol"`
	Converter      string         `json:"converter,omitempty"`
	ConvertedAt    string         `json:"converted_at,omitempty"`
	Details        map[string]any `json:"details,omitempty"`
}

// Auth carries credential references (E2AAuth). BearerToken and the values of
// ExtraHeaders are secrets: the normalizer strips them before anything is
// published.
type Auth struct {
	MethodID      string            `json:"method_id,omitempty"`
	BearerToken   string            `json:"bearer_token,omitempty"`
	APIKeyRef     string            `json:"api_key_ref,omitempty"`
	CredentialRef string            `json:"credential_ref,omitempty"`
	ExtraHeaders  map[string]string `json:"extra_headers,omitempty"`
	Meta          map[string]any    `json:"_meta,omitempty"`
}

// FileRef is an attachment element (E2AFileRef): uri is required.
type FileRef struct {
	URI      string         `json:"uri"`
	Name     string         `json:"name,omitempty"`
	MimeType string         `json:"mime_type,omitempty"`
	Size     *int64         `json:"size,omitempty"`
	Meta     map[string]any `json:"_meta,omitempty"`
}

// Clone returns a deep copy of the envelope (maps and slices are copied).
func (e *Envelope) Clone() *Envelope {
	if e == nil {
		return nil
	}
	c := *e
	c.JSONRPCID = append(json.RawMessage(nil), e.JSONRPCID...)
	if e.JSONRPCID == nil {
		c.JSONRPCID = nil
	}
	c.Params = CloneMap(e.Params)
	c.ChannelContext = CloneMap(e.ChannelContext)
	c.A2AMetadata = CloneMap(e.A2AMetadata)
	c.ACPMeta = CloneMap(e.ACPMeta)
	if e.ExpectedOutputModes != nil {
		c.ExpectedOutputModes = append([]string(nil), e.ExpectedOutputModes...)
	}
	if e.Provenance != nil {
		p := *e.Provenance
		p.Details = CloneMap(e.Provenance.Details)
		c.Provenance = &p
	}
	if e.Auth != nil {
		a := *e.Auth
		if e.Auth.ExtraHeaders != nil {
			a.ExtraHeaders = make(map[string]string, len(e.Auth.ExtraHeaders))
			for k, v := range e.Auth.ExtraHeaders {
				a.ExtraHeaders[k] = v
			}
		}
		a.Meta = CloneMap(e.Auth.Meta)
		c.Auth = &a
	}
	if e.Trace != nil {
		t := *e.Trace
		c.Trace = &t
	}
	return &c
}

// CloneMap deep-copies a JSON object held as map[string]any.
func CloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = CloneValue(v)
	}
	return out
}

// CloneValue deep-copies a decoded JSON value: its objects
// (map[string]any) and arrays ([]any); other values are returned as they
// are.
func CloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return CloneMap(t)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = CloneValue(x)
		}
		return out
	default:
		return v
	}
}

// ParamString returns params[key] when it is a string.
func (e *Envelope) ParamString(key string) string {
	if e == nil || e.Params == nil {
		return ""
	}
	s, _ := e.Params[key].(string)
	return s
}

// PromptBlocks returns the request's content blocks (ACP ContentBlock
// JSON): params.prompt when it is a non-empty array, else
// params.content_blocks, the array spec §4.4 gives as its isomorph (the
// order of merge_params_to_acp_prompt, §7); nil when it has neither. An
// agent reading the user's words or media reads them here too: the
// multimodal request of §11.5 has its text and image in content_blocks
// alone.
func (e *Envelope) PromptBlocks() []any {
	if e == nil || e.Params == nil {
		return nil
	}
	if p, _ := e.Params["prompt"].([]any); len(p) > 0 {
		return p
	}
	cb, _ := e.Params["content_blocks"].([]any)
	return cb
}

// ParamInt returns params[key] as an integer when it is a JSON number (or a
// numeric string), and def otherwise.
func (e *Envelope) ParamInt(key string, def int64) int64 {
	if e == nil || e.Params == nil {
		return def
	}
	if n, ok := toInt(e.Params[key]); ok {
		return n
	}
	return def
}
