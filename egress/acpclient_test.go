package egress_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
	"github.com/e2a-pipeline/pipeline/render"
)

// TestACPClient: acp-go-sdk's client talks to an agent whose session/prompt
// turn is protocols/acp's rendering served by egress (NDJSON over HTTP,
// copied onto the client's stdio-like pipe).
func TestACPClient(t *testing.T) {
	egress.RunACPClient(t, func(svc *egress.Service, w http.ResponseWriter, r *http.Request, requestID string, rpcID json.RawMessage) {
		svc.Serve(w, r, requestID, acp.Format, func(o *render.Output) render.Renderer {
			return acp.NewRenderer(o, acp.Params{JSONRPCID: rpcID, SessionID: "s1"})
		})
	})
}
