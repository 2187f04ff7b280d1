package egress

import (
	"encoding/json"
	"fmt"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// ACPUpdates returns the ACP session updates a frame stands for: e2a.chunk
// text → agent_message_chunk, reasoning → agent_thought_chunk, tool
// function_call → tool_call, function_response → tool_call_update, custom
// {type: plan, entries} → plan; acp.session_update frames as they are;
// a2a.* frames through their parts. Frames without content give none.
func ACPUpdates(r *e2a.Response) ([]acp.SessionUpdate, error) {
	switch r.ResponseKind {
	case e2a.KindChunk:
		c, err := r.Chunk()
		if err != nil {
			return nil, err
		}
		if u, ok := chunkToACP(c); ok {
			return []acp.SessionUpdate{u}, nil
		}
		return nil, nil
	case e2a.KindACPSessionUpd:
		body, err := r.BodyMap()
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(a2amap.ACPUpdate(body))
		u, err := decodeACPUpdate(b)
		if err != nil {
			return nil, fmt.Errorf("%w: %s body: %v", ErrInvalidFrame, e2a.KindACPSessionUpd, err)
		}
		return []acp.SessionUpdate{u}, nil
	case e2a.KindA2AStreamEvent, e2a.KindA2ATask, e2a.KindA2AMessage:
		ev, err := a2amap.NativeEvent(r)
		if err != nil || ev == nil {
			return nil, err
		}
		var out []acp.SessionUpdate
		for _, p := range eventParts(ev) {
			if u, ok := partToACP(p); ok {
				out = append(out, u)
			}
		}
		return out, nil
	}
	return nil, nil
}

// chunkToACP maps one e2a.chunk body to an ACP session update.
func chunkToACP(c e2a.ChunkBody) (acp.SessionUpdate, bool) {
	switch c.DeltaKind {
	case e2a.DeltaText:
		return acp.UpdateAgentMessageText(a2amap.DeltaText(c.Delta)), true
	case e2a.DeltaReasoning:
		return acp.UpdateAgentThoughtText(a2amap.DeltaText(c.Delta)), true
	}
	obj, ok := a2amap.AsMap(c.Delta)
	if !ok {
		return acp.SessionUpdate{}, false
	}
	typ, _ := obj["type"].(string)
	id, _ := obj["id"].(string)
	name, _ := obj["name"].(string)
	switch typ {
	case e2a.ToolFunctionCall:
		return acp.StartToolCall(acp.ToolCallId(id), name, acp.WithStartKind(acp.ToolKindOther),
			acp.WithStartStatus(acp.ToolCallStatusInProgress), acp.WithStartRawInput(obj["args"])), true
	case e2a.ToolFunctionResponse:
		return acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
			acp.WithUpdateRawOutput(obj["response"])), true
	case "plan":
		b, _ := json.Marshal(map[string]any{"sessionUpdate": e2a.UpdatePlan, "entries": obj["entries"]})
		if u, err := decodeACPUpdate(b); err == nil {
			return u, true
		}
	}
	return acp.SessionUpdate{}, false
}

// decodeACPUpdate reads an ACP session update from its JSON. The SDK
// reads some objects it cannot write back (no variant: {}; a content
// block without its type), so the update must also encode: renderers
// write it, and one that fails there would end the answer with an
// internal error.
func decodeACPUpdate(b []byte) (acp.SessionUpdate, error) {
	var u acp.SessionUpdate
	if err := json.Unmarshal(b, &u); err != nil {
		return acp.SessionUpdate{}, err
	}
	if _, err := json.Marshal(u); err != nil {
		return acp.SessionUpdate{}, err
	}
	return u, nil
}

// eventParts returns the content parts an A2A event carries.
func eventParts(ev any) []any {
	var out []any
	add := func(ps []any) { out = append(out, ps...) }
	b, _ := json.Marshal(ev)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if a, ok := m["artifact"].(map[string]any); ok {
		if ps, ok := a["parts"].([]any); ok {
			add(ps)
		}
	}
	if ps, ok := m["parts"].([]any); ok {
		add(ps)
	}
	if st, ok := m["status"].(map[string]any); ok {
		if msg, ok := st["message"].(map[string]any); ok {
			if ps, ok := msg["parts"].([]any); ok {
				add(ps)
			}
		}
	}
	return out
}

// partToACP maps an A2A part (as JSON) to an ACP session update.
func partToACP(p any) (acp.SessionUpdate, bool) {
	m, ok := p.(map[string]any)
	if !ok {
		return acp.SessionUpdate{}, false
	}
	meta, _ := m["metadata"].(map[string]any)
	switch m["kind"] {
	case "text":
		text, _ := m["text"].(string)
		if meta[a2amap.MetaThought] == true {
			return acp.UpdateAgentThoughtText(text), true
		}
		return acp.UpdateAgentMessageText(text), true
	case "data":
		data, _ := m["data"].(map[string]any)
		typ, _ := meta[a2amap.MetaPartType].(string)
		d := map[string]any{"type": typ}
		for k, v := range data {
			if k != "type" {
				d[k] = v
			}
		}
		return chunkToACP(e2a.ChunkBody{DeltaKind: e2a.DeltaTool, Delta: d})
	}
	return acp.SessionUpdate{}, false
}

// ACPFinal returns the JSON-RPC response ending a turn: the spec mapping
// of E2AResponseToACPJSONRPCResponse, extended for the pipeline's own
// final frames: e2a.complete → {stopReason: end_turn} (or the result's
// stopReason), e2a.error cancelled / refusal / max_tokens /
// max_turn_requests → that stopReason. id is the session/prompt's
// JSON-RPC id (the frame's jsonrpc_id when empty).
func ACPFinal(r *e2a.Response, id json.RawMessage) jsonrpc.Response {
	if len(id) == 0 {
		id = r.JSONRPCID
	}
	switch r.ResponseKind {
	case e2a.KindComplete:
		c, _ := r.Complete()
		res := acp.PromptResponse{StopReason: acp.StopReasonEndTurn}
		if m, ok := c.Result.(map[string]any); ok {
			if sr := a2amap.StopReason(m); sr != "" {
				res.StopReason = acp.StopReason(sr)
			}
		}
		return jsonrpc.ResultResponse(id, res)
	case e2a.KindError:
		b, _ := r.Error()
		switch b.Code {
		case e2a.ErrCodeCancelled:
			return jsonrpc.ResultResponse(id, acp.PromptResponse{StopReason: acp.StopReasonCancelled})
		case e2a.StopRefusal, e2a.StopMaxTokens, e2a.StopMaxTurnRequests:
			return jsonrpc.ResultResponse(id, acp.PromptResponse{StopReason: acp.StopReason(b.Code)})
		}
	}
	if resp, ok := E2AResponseToACPJSONRPCResponse(r); ok {
		resp.ID = id
		return *resp
	}
	return jsonrpc.ResultResponse(id, acp.PromptResponse{StopReason: acp.StopReasonEndTurn})
}

// E2AResponseToACPJSONRPCResponse is e2a_response_to_acp_jsonrpc_response
// (spec §8, §12.6): one JSON-RPC response object from a frame's
// jsonrpc_id and an acp.prompt_result (result, stop_reason written as
// stopReason) or an e2a.error / acp.jsonrpc_error (error). ok is false for
// any other kind. An e2a.error becomes the error its external member
// describes when that is an ACP error, else -32603 with the E2A code,
// details and retryable in data.
func E2AResponseToACPJSONRPCResponse(r *e2a.Response) (*jsonrpc.Response, bool) {
	switch r.ResponseKind {
	case e2a.KindACPPromptRes:
		body, err := r.BodyMap()
		if err != nil {
			return nil, false
		}
		res := make(map[string]any, len(body))
		for k, v := range body {
			if k == "stop_reason" {
				if _, has := body["stopReason"]; has {
					continue
				}
				k = "stopReason"
			}
			res[k] = v
		}
		out := jsonrpc.ResultResponse(r.JSONRPCID, res)
		return &out, true
	case e2a.KindACPJSONRPCErr:
		body, err := r.BodyMap()
		if err != nil {
			return nil, false
		}
		e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Data: body["data"]}
		if n, ok := body["code"].(json.Number); ok {
			if c, err := n.Int64(); err == nil {
				e.Code = int(c)
			}
		}
		e.Message, _ = body["message"].(string)
		out := jsonrpc.ErrorResponse(r.JSONRPCID, e)
		return &out, true
	case e2a.KindError:
		b, err := r.Error()
		if err != nil {
			return nil, false
		}
		if b.External != nil && b.External["protocol"] == "acp" {
			e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: b.Message, Data: b.External["data"]}
			if n, ok := b.External["code"].(json.Number); ok {
				if c, err := n.Int64(); err == nil {
					e.Code = int(c)
				}
			}
			if m, ok := b.External["message"].(string); ok && m != "" {
				e.Message = m
			}
			out := jsonrpc.ErrorResponse(r.JSONRPCID, e)
			return &out, true
		}
		retry := b.Retryable
		data := map[string]any{"code": b.Code, "retryable": retry}
		if len(b.Details) > 0 {
			data["details"] = b.Details
		}
		out := jsonrpc.ErrorResponse(r.JSONRPCID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: b.Message, Data: data})
		return &out, true
	}
	return nil, false
}

// E2AResponseToA2AStreamPayload is e2a_response_to_a2a_stream_payload
// (spec §8, §12.6): for an a2a.stream_event frame, the A2A StreamResponse
// with exactly one branch, {"<branch>": payload}, branch one of task,
// message, status_update, artifact_update. ok is false for any other kind.
func E2AResponseToA2AStreamPayload(r *e2a.Response) (map[string]any, bool) {
	if r.ResponseKind != e2a.KindA2AStreamEvent {
		return nil, false
	}
	b, err := r.StreamEvent()
	if err != nil {
		return nil, false
	}
	if !a2amap.KnownBranch(b.Branch) {
		return nil, false
	}
	return map[string]any{b.Branch: b.Payload}, true
}

// FillProjections returns a copy of r with the L3 projections (spec
// §12.1) filled: projections.acp with the JSON-RPC response or the
// session/update notification the frame maps to, projections.a2a with the
// stream payload. Projections are auxiliary: renderers never read them.
func FillProjections(r *e2a.Response) *e2a.Response {
	c := *r
	p := e2a.CloneMap(r.Projections)
	if p == nil {
		p = map[string]any{}
	}
	if r.IsFinal {
		p["acp"] = e2a.PlainJSON(ACPFinal(r, r.JSONRPCID))
	} else if resp, ok := E2AResponseToACPJSONRPCResponse(r); ok {
		p["acp"] = e2a.PlainJSON(resp)
	} else if ups, err := ACPUpdates(r); err == nil && len(ups) > 0 {
		p["acp"] = e2a.PlainJSON(jsonrpc.Notification{JSONRPC: "2.0", Method: e2a.ACPSessionUpdate,
			Params: acp.SessionNotification{SessionId: acp.SessionId(r.SessionID), Update: ups[0]}})
	}
	if sp, ok := E2AResponseToA2AStreamPayload(r); ok {
		p["a2a"] = e2a.PlainJSON(sp)
	}
	if len(p) > 0 {
		c.Projections = p
	}
	return &c
}
