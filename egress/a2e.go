package egress

import (
	"encoding/json"
	"strings"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// A2E wire constants (a2e-message-protocol.md).
const (
	A2EVersion   = "1.0"
	A2EEventType = "invoke/event"
	A2EErrorType = "error"
)

// A2E event kinds.
const (
	A2EKindProgress = "progress"
	A2EKindArtifact = "artifact"
	A2EKindLog      = "log"
	A2EKindStatus   = "status"
)

// A2EParams describes the A2E request a response answers.
type A2EParams struct {
	// ReqID is the id of the A2E request message; every event and the
	// response carry it as req_id.
	ReqID string
	// ReqType is the request's type, e.g. "tool/call/req"; the completion is
	// answered with the matching "…/resp" type ("invoke/resp" when empty).
	ReqType string
	// Capability names the capability namespace for error messages
	// (default: the first segment of ReqType).
	Capability string
}

func (p A2EParams) respType() string {
	if p.ReqType == "" {
		return "invoke/resp"
	}
	if t, ok := strings.CutSuffix(p.ReqType, "/req"); ok {
		return t + "/resp"
	}
	return p.ReqType + "/resp"
}

func (p A2EParams) capability() string {
	if p.Capability != "" {
		return p.Capability
	}
	c, _, _ := strings.Cut(p.ReqType, "/")
	return c
}

// A2EMessage is an A2E NDJSON message: the base fields of A2EMessage and
// the members of invoke/event, error and responses.
type A2EMessage struct {
	A2E     string  `json:"a2e"`
	ID      string  `json:"id"`
	Type    string  `json:"type"`
	Version string  `json:"version"`
	TS      float64 `json:"ts"`
	ReqID   string  `json:"req_id,omitempty"`

	// invoke/event
	Kind string         `json:"kind,omitempty"`
	Data map[string]any `json:"data,omitempty"`
	Seq  *int64         `json:"seq,omitempty"`

	// responses
	Result any `json:"result,omitempty"`

	// error
	Code           string         `json:"code,omitempty"`
	Message        string         `json:"message,omitempty"`
	Detail         map[string]any `json:"detail,omitempty"`
	Retryable      *bool          `json:"retryable,omitempty"`
	CapabilityName string         `json:"capability_name,omitempty"`
}

// MarshalJSON writes an error message with all the members of A2EError
// (a2e-message-protocol.md, Error Handling): detail is {} when nil, and
// retryable false when unset. Other types omit the error members.
func (m A2EMessage) MarshalJSON() ([]byte, error) {
	type plain A2EMessage
	if m.Type != A2EErrorType {
		return json.Marshal(plain(m))
	}
	d := m.Detail
	if d == nil {
		d = map[string]any{}
	}
	retry := m.Retryable != nil && *m.Retryable
	return json.Marshal(struct {
		plain
		Code           string         `json:"code"`
		Message        string         `json:"message"`
		Detail         map[string]any `json:"detail"`
		Retryable      bool           `json:"retryable"`
		CapabilityName string         `json:"capability_name"`
	}{plain(m), m.Code, m.Message, d, retry, m.CapabilityName})
}

var _ Renderer = (*a2eRenderer)(nil)

// a2eRenderer renders A2E NDJSON: each content frame as invoke/event
// {kind, req_id, data, seq = frame sequence}, then the response of the
// request's type with the result, or error {code, message, detail,
// retryable, capability_name}. A heartbeat is an empty line.
type a2eRenderer struct {
	o *Output
	p A2EParams
}

// NewA2E returns the A2E NDJSON renderer.
func NewA2E(o *Output, p A2EParams) Renderer { return &a2eRenderer{o: o, p: p} }

func (r *a2eRenderer) Start() error {
	NDJSONHead(r.o)
	return nil
}

func (r *a2eRenderer) base(f *e2a.Response, typ string) A2EMessage {
	m := A2EMessage{A2E: A2EVersion, ID: strings.ReplaceAll(f.ResponseID, "-", ""), Type: typ, Version: A2EVersion, ReqID: r.p.ReqID}
	if t := FrameTime(f); t != nil {
		m.TS = float64(t.UnixMicro()) / 1e6
	}
	if m.ReqID == "" {
		m.ReqID = f.RequestID
	}
	return m
}

// messages returns the A2E messages a frame stands for.
func (r *a2eRenderer) messages(f *e2a.Response) []A2EMessage {
	var out []A2EMessage
	if kind, data, ok := a2eEvent(f); ok {
		m := r.base(f, A2EEventType)
		seq := f.Sequence
		m.Kind, m.Data, m.Seq = kind, data, &seq
		out = append(out, m)
	}
	if !f.IsFinal {
		return out
	}
	o := FinalOutcome(f)
	if f.Status != e2a.StatusFailed && o.Code == "" {
		m := r.base(f, r.p.respType())
		m.Result = o.Result
		if f.ResponseKind != e2a.KindComplete {
			body, _ := f.BodyMap()
			m.Result = body
		}
		if m.Result == nil {
			m.Result = map[string]any{}
		}
		return append(out, m)
	}
	m := r.base(f, A2EErrorType)
	m.Code, m.Message, m.Detail, m.CapabilityName = o.Code, o.Message, o.Details, r.p.capability()
	retry := o.Retryable
	m.Retryable = &retry
	if m.Code == "" {
		m.Code = e2a.ErrCodeHandlerError
	}
	return append(out, m)
}

// a2eEvent maps a non-final content frame to an invoke/event kind and
// data: text → progress {text}, reasoning → log {level: thought, text},
// tool deltas → artifact, custom {kind, data} → that kind, other kinds of
// frames → status {response_kind, body}.
func a2eEvent(f *e2a.Response) (string, map[string]any, bool) {
	if c, ok := ContentChunk(f); ok {
		switch c.DeltaKind {
		case e2a.DeltaText:
			return A2EKindProgress, map[string]any{"text": DeltaText(c.Delta)}, true
		case e2a.DeltaReasoning:
			return A2EKindLog, map[string]any{"level": "thought", "text": DeltaText(c.Delta)}, true
		case e2a.DeltaCustom:
			if obj, ok := AsMap(c.Delta); ok {
				if k, _ := obj["kind"].(string); k == A2EKindProgress || k == A2EKindArtifact || k == A2EKindLog || k == A2EKindStatus {
					if d, ok := obj["data"].(map[string]any); ok {
						return k, d, true
					}
					d := e2a.CloneMap(obj)
					delete(d, "kind")
					return k, d, true
				}
				return A2EKindArtifact, obj, true
			}
		}
		if obj, ok := AsMap(c.Delta); ok {
			return A2EKindArtifact, obj, true
		}
		return A2EKindArtifact, map[string]any{"value": c.Delta}, true
	}
	if f.IsFinal {
		return "", nil, false
	}
	switch f.ResponseKind {
	case e2a.KindComplete, e2a.KindError, e2a.KindACPPromptRes, e2a.KindACPJSONRPCErr:
		return "", nil, false
	case e2a.KindACPSessionUpd:
		return "", nil, false // an update without content
	}
	var body any
	_ = json.Unmarshal(f.Body, &body)
	return A2EKindStatus, map[string]any{"response_kind": f.ResponseKind, "body": body}, true
}

func (r *a2eRenderer) Frame(f *Frame) error {
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	for _, m := range r.messages(resp) {
		if err := WriteLineJSON(r.o, m); err != nil {
			return err
		}
	}
	return nil
}

func (r *a2eRenderer) Heartbeat() error {
	_, err := r.o.WriteString("\n")
	return err
}

func (r *a2eRenderer) End(err error) error {
	if err == nil {
		return nil
	}
	st, code := Classify(err)
	retry := st == 503 || st == 504
	id := uuid.NewSHA1(uuid.NameSpaceOID, []byte(r.p.ReqID+"\x00"+code))
	m := A2EMessage{A2E: A2EVersion, ID: strings.ReplaceAll(id.String(), "-", ""), Type: A2EErrorType, Version: A2EVersion,
		TS: float64(now().UnixMicro()) / 1e6, ReqID: r.p.ReqID,
		Code: code, Message: err.Error(), Retryable: &retry, CapabilityName: r.p.capability()}
	if !r.o.Started() {
		r.o.Header().Set("Content-Type", "application/x-ndjson")
		r.o.WriteHeader(st)
	}
	return WriteLineJSON(r.o, m)
}
