package normalizer_test

import (
	"errors"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// acpSessionScoped are the client → agent methods whose request type in
// ACP's schema (the ACP Go SDK's types) has a required sessionId.
var acpSessionScoped = []string{
	acp.AgentMethodSessionPrompt, acp.AgentMethodSessionCancel, acp.AgentMethodSessionLoad,
	acp.AgentMethodSessionSetMode, acp.AgentMethodSessionSetModel, acp.AgentMethodSessionSetConfigOption,
	acp.AgentMethodSessionClose, acp.AgentMethodSessionFork, acp.AgentMethodSessionResume,
	acp.AgentMethodDocumentDidChange, acp.AgentMethodDocumentDidClose, acp.AgentMethodDocumentDidFocus,
	acp.AgentMethodDocumentDidOpen, acp.AgentMethodDocumentDidSave,
	acp.AgentMethodNesAccept, acp.AgentMethodNesClose, acp.AgentMethodNesReject, acp.AgentMethodNesSuggest,
}

// TestACPSessionIDRequired: every ACP method whose schema requires a
// sessionId is refused without a usable one (absent, empty, null, not a
// string) with JSON-RPC -32602 naming the field and echoing the request's
// id, and nothing is normalized (no envelope to publish). session/set_model,
// set_config_option, close, fork, resume (and the document and nes
// methods) were accepted without one and went on as OpSubmit envelopes
// with no session.
func TestACPSessionIDRequired(t *testing.T) {
	n := testNormalizer(t)
	prompt := `"prompt":[{"type":"text","text":"hi"}]`
	for _, method := range acpSessionScoped {
		for _, c := range []struct{ name, params, want string }{
			{"no params", ``, "params are required"},
			{"absent", `{` + prompt + `}`, "sessionId is required"},
			{"empty", `{"sessionId":"",` + prompt + `}`, "sessionId is required"},
			{"null", `{"sessionId":null,` + prompt + `}`, "sessionId is required"},
			{"number", `{"sessionId":5,` + prompt + `}`, "sessionId must be a string"},
			{"object", `{"sessionId":{"id":"s1"},` + prompt + `}`, "sessionId must be a string"},
			{"spec form not a string", `{"session_id":["s1"],` + prompt + `}`, "session_id must be a string"},
		} {
			body := `{"jsonrpc":"2.0","id":"q1","method":"` + method + `"`
			if c.params != "" {
				body += `,"params":` + c.params
			}
			res, err := n.FromACP(normalizer.Input{Body: []byte(body + `}`)})
			if !errors.Is(err, normalizer.ErrInvalidParams) || normalizer.JSONRPCCode(err) != -32602 || res != nil {
				t.Errorf("%s, sessionId %s: %v (result %v), want invalid params -32602", method, c.name, err, res != nil)
				continue
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s, sessionId %s: %q, want it to say %q", method, c.name, err, c.want)
			}
			if id := string(normalizer.ErrorJSONRPCID(err)); id != `"q1"` {
				t.Errorf("%s, sessionId %s: error id %s, want the request's", method, c.name, id)
			}
		}
		for _, params := range []string{`{"sessionId":"s1",` + prompt + `}`, `{"session_id":"s1",` + prompt + `}`} {
			res, err := n.FromACP(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":"q1","method":"` + method + `","params":` + params + `}`)})
			if err != nil || res.Envelope.SessionID != "s1" {
				t.Errorf("%s %s: %v, want accepted with session s1", method, params, err)
			}
		}
	}
	// A method whose session is optional accepts none, but not one of the
	// wrong type: the front door reads a named session as the call's.
	for _, params := range []string{`{"cwd":"/w","mcpServers":[]}`, `{"cwd":"/w","mcpServers":[],"sessionId":null}`} {
		if _, err := n.FromACP(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":` + params + `}`)}); err != nil {
			t.Errorf("session/new %s: %v", params, err)
		}
	}
	_, err := n.FromACP(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"_vendor/x","params":{"sessionId":7}}`)})
	if normalizer.JSONRPCCode(err) != -32602 || !strings.Contains(err.Error(), "sessionId must be a string") {
		t.Errorf("extension method with sessionId 7: %v, want -32602", err)
	}
}

// TestACPPeerCallSessionIDRequired: exporting an envelope to a pure ACP
// peer refuses, for every method whose schema requires a sessionId, an
// envelope without one, as it refused it for session/cancel, load and
// set_mode only.
func TestACPPeerCallSessionIDRequired(t *testing.T) {
	for _, method := range acpSessionScoped {
		if method == e2a.ACPSessionPrompt {
			continue // checkPeerPrompt's
		}
		_, err := normalizer.EnvelopeToACPPeerCall(&e2a.Envelope{Method: method, RequestID: "r1", Params: map[string]any{"cwd": "/w"}})
		if !errors.Is(err, normalizer.ErrInvalidParams) || !strings.Contains(err.Error(), "sessionId is required") {
			t.Errorf("%s without a session: %v, want invalid params", method, err)
		}
		call, err := normalizer.EnvelopeToACPPeerCall(&e2a.Envelope{Method: method, RequestID: "r1", SessionID: "s1"})
		if err != nil || call.Params["sessionId"] != "s1" {
			t.Errorf("%s with session s1: %v %v", method, err, call)
		}
	}
}
