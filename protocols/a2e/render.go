package a2e

import (
	"encoding/json"
	"strings"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/render"
)

// Format is the output format of the renderer (egress.Formats, the label
// of egress's metrics).
const Format = egress.FormatA2ENDJSON

// Params describes the A2E request a response answers.
type Params struct {
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

func (p Params) respType() string {
	if p.ReqType == "" {
		return "invoke/resp"
	}
	if t, ok := strings.CutSuffix(p.ReqType, "/req"); ok {
		return t + "/resp"
	}
	return p.ReqType + "/resp"
}

func (p Params) capability() string {
	if p.Capability != "" {
		return p.Capability
	}
	return capabilityOf(p.ReqType)
}

// maxCapability bounds a capability_name, in runes (the normalizer's
// bound on the client values it echoes).
const maxCapability = 64

// capabilityOf is the capability namespace of an A2E message type: its
// first segment (tool of tool/call/req), the type itself when it has
// one segment; cut after maxCapability runes, with an ellipsis, since the
// type is the client's (a normalizer error's Method is not bounded). The
// renderer's error lines and the front door's name it alike.
func capabilityOf(reqType string) string {
	c, _, _ := strings.Cut(reqType, "/")
	n := 0
	for i := range c {
		if n == maxCapability {
			return c[:i] + "…"
		}
		n++
	}
	return c
}

var _ render.Renderer = (*renderer)(nil)

// renderer renders A2E NDJSON: each content frame as invoke/event
// {kind, req_id, data, seq = frame sequence}, then the response of the
// request's type with the result, or error {code, message, detail,
// retryable, capability_name}. A heartbeat is a ping line.
type renderer struct {
	o *render.Output
	p Params
}

// NewRenderer returns the A2E NDJSON renderer of the request p describes.
func NewRenderer(o *render.Output, p Params) render.Renderer { return &renderer{o: o, p: p} }

func (r *renderer) Start() error {
	render.NDJSONHead(r.o)
	return nil
}

func (r *renderer) base(f *e2a.Response, typ string) Message {
	m := Message{A2E: Version, ID: strings.ReplaceAll(f.ResponseID, "-", ""), Type: typ, Version: Version, ReqID: r.p.ReqID}
	if t := a2amap.FrameTime(f); t != nil {
		m.TS = float64(t.UnixMicro()) / 1e6
	}
	if m.ReqID == "" {
		m.ReqID = f.RequestID
	}
	return m
}

// finalID is the id of the response (or error) of a final frame that is
// also rendered as an invoke/event, which has the frame's id: every A2E
// message has its own id. It is a name-based UUID (SHA-1, OID namespace)
// of the response id and "/resp", as hex, so that a frame rendered again
// (a resumed stream) has the same ids.
func finalID(f *e2a.Response) string {
	return strings.ReplaceAll(uuid.NewSHA1(uuid.NameSpaceOID, []byte(f.ResponseID+"/resp")).String(), "-", "")
}

// messages returns the A2E messages a frame stands for.
func (r *renderer) messages(f *e2a.Response) []Message {
	var out []Message
	if kind, data, ok := event(f); ok {
		m := r.base(f, EventType)
		seq := f.Sequence
		m.Kind, m.Data, m.Seq = kind, data, &seq
		out = append(out, m)
	}
	if !f.IsFinal {
		return out
	}
	base := r.base
	if len(out) > 0 {
		base = func(f *e2a.Response, typ string) Message {
			m := r.base(f, typ)
			m.ID = finalID(f)
			return m
		}
	}
	o := a2amap.FinalOutcome(f)
	if f.Status != e2a.StatusFailed && o.Code == "" {
		m := base(f, r.p.respType())
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
	m := base(f, ErrorType)
	m.Code, m.Message, m.Detail, m.CapabilityName = o.Code, o.Message, o.Details, r.p.capability()
	retry := o.Retryable
	m.Retryable = &retry
	if m.Code == "" {
		m.Code = e2a.ErrCodeHandlerError
	}
	return append(out, m)
}

// event maps a non-final content frame to an invoke/event kind and
// data: text → progress {text}, reasoning → log {level: thought, text},
// tool deltas → artifact, custom {kind, data} → that kind, other kinds of
// frames → status {response_kind, body}.
func event(f *e2a.Response) (string, map[string]any, bool) {
	if c, ok := a2amap.ContentChunk(f); ok {
		switch c.DeltaKind {
		case e2a.DeltaText:
			return KindProgress, map[string]any{"text": a2amap.DeltaText(c.Delta)}, true
		case e2a.DeltaReasoning:
			return KindLog, map[string]any{"level": "thought", "text": a2amap.DeltaText(c.Delta)}, true
		case e2a.DeltaCustom:
			if obj, ok := a2amap.AsMap(c.Delta); ok {
				if k, _ := obj["kind"].(string); k == KindProgress || k == KindArtifact || k == KindLog || k == KindStatus {
					if d, ok := obj["data"].(map[string]any); ok {
						return k, d, true
					}
					d := e2a.CloneMap(obj)
					delete(d, "kind")
					return k, d, true
				}
				return KindArtifact, obj, true
			}
		}
		if obj, ok := a2amap.AsMap(c.Delta); ok {
			return KindArtifact, obj, true
		}
		return KindArtifact, map[string]any{"value": c.Delta}, true
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
	return KindStatus, map[string]any{"response_kind": f.ResponseKind, "body": body}, true
}

func (r *renderer) Frame(f *render.Frame) error {
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	for _, m := range r.messages(resp) {
		if err := render.WriteLineJSON(r.o, m); err != nil {
			return err
		}
	}
	return nil
}

// Heartbeat writes a ping naming the call (req_id): every NDJSON line is
// an A2E message (the spec's wire format; an empty line, as this was, is
// not JSON to a client decoding each line). A client need not answer it.
// Its id is its own (NewMessage): it was derived from the req_id and a
// count, so that the pings of two calls sharing a req_id had the same ids.
func (r *renderer) Heartbeat() error {
	return render.WriteLineJSON(r.o, NewMessage("ping", r.p.ReqID))
}

func (r *renderer) End(err error) error {
	if err == nil {
		return nil
	}
	st, code := egress.Classify(err)
	// (its own id, as a heartbeat's: not the req_id's, which calls may share)
	m := NewError(r.p.ReqID, code, egress.ClientMessage(err), st == 503 || st == 504, nil)
	m.CapabilityName = r.p.capability()
	if !r.o.Started() {
		r.o.Header().Set("Content-Type", "application/x-ndjson")
		r.o.WriteHeader(st)
	}
	return render.WriteLineJSON(r.o, m)
}
