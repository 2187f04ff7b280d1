package protocols

import (
	"bytes"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
)

// FillProjections returns a copy of r with the L3 projections (spec
// §12.1) filled: projections.acp with the JSON-RPC response or the
// session/update notification the frame maps to, projections.a2a with the
// stream payload. Projections are auxiliary: renderers never read them.
// The ACP one is left out where there is nothing to project to (the
// specification's adapter "returns None if not applicable"): a response of
// a request without jsonrpc_id (JSON-RPC 2.0 gives a result no null id),
// an update of one without session_id.
func FillProjections(r *e2a.Response) *e2a.Response {
	c := *r
	p := e2a.CloneMap(r.Projections)
	if p == nil {
		p = map[string]any{}
	}
	hasID := len(r.JSONRPCID) > 0 && string(bytes.TrimSpace(r.JSONRPCID)) != "null"
	if r.IsFinal {
		if hasID {
			p["acp"] = e2a.PlainJSON(acp.Final(r, r.JSONRPCID))
		}
	} else if resp, ok := acp.E2AResponseToACPJSONRPCResponse(r); ok {
		if hasID {
			p["acp"] = e2a.PlainJSON(resp)
		}
	} else if ups, err := acp.Updates(r); err == nil && len(ups) > 0 && r.SessionID != "" {
		p["acp"] = e2a.PlainJSON(jsonrpc.Notification{JSONRPC: "2.0", Method: e2a.ACPSessionUpdate,
			Params: acpsdk.SessionNotification{SessionId: acpsdk.SessionId(r.SessionID), Update: ups[0]}})
	}
	if sp, ok := a2amap.E2AResponseToA2AStreamPayload(r); ok {
		p["a2a"] = e2a.PlainJSON(sp)
	}
	if len(p) > 0 {
		c.Projections = p
	}
	return &c
}
