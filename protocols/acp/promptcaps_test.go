package acp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// modesHost is the conformance kit's JSON-RPC host that knows the input
// modes of its pools (acp.InputModes); a pool not in modes declares none.
type modesHost struct {
	*conformance.RPCHost
	modes map[string][]string
}

func (h modesHost) PoolInputModes(_ context.Context, pool string) []string { return h.modes[pool] }

var _ acp.InputModes = modesHost{}

// callAt answers one request over h as the endpoint of pool agent ("":
// /acp) does.
func callAt(t *testing.T, h modesHost, agent, method string, params any) *reply {
	t.Helper()
	raw, _ := json.Marshal(params)
	rep := &reply{hdr: http.Header{}}
	in := host.Call{Ctx: context.Background(), Header: http.Header{}, Channel: "http", Agent: agent}
	acp.Endpoint(h).Serve(rep, in, h.Caller(), &jsonrpc.Request{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: method, Params: raw})
	return rep
}

// promptCaps is initialize's promptCapabilities at the endpoint of agent.
func promptCaps(t *testing.T, h modesHost, agent string) map[string]any {
	t.Helper()
	r := callAt(t, h, agent, "initialize", map[string]any{"protocolVersion": 1})
	b, _ := json.Marshal(r.result)
	var res struct {
		AgentCapabilities struct {
			PromptCapabilities map[string]any `json:"promptCapabilities"`
		} `json:"agentCapabilities"`
	}
	if r.err != nil || json.Unmarshal(b, &res) != nil {
		t.Fatalf("initialize at %q: %s %+v", agent, b, r.err)
	}
	return res.AgentCapabilities.PromptCapabilities
}

func newModesHost() modesHost {
	h := modesHost{RPCHost: newHost(), modes: map[string][]string{
		"vision": {"text/plain", "image/png"},
		"voice":  {"text/plain", "audio/*"},
		"any":    {"*/*"},
	}}
	// Prompts (session/*) go to vision; everything else, initialize
	// included, to plain, which declares no modes.
	h.Norm = normalizer.New(normalizer.Config{Routes: normalizer.Routes{Default: "plain", Methods: map[string]string{"session/*": "vision"}}})
	return h
}

// TestInitializePromptCapabilitiesFollowPoolModes: initialize declares
// image only for a pool whose input modes take some image/* type, audio
// only for audio/*, embeddedContext always; a pool that declares no modes
// takes the defaults (text/plain, application/json): neither. At /acp it
// answers for the pool a session/prompt goes to (a method rule may send
// prompts elsewhere than initialize).
func TestInitializePromptCapabilitiesFollowPoolModes(t *testing.T) {
	h := newModesHost()
	for _, c := range []struct {
		agent        string
		image, audio bool
	}{
		{"vision", true, false}, {"voice", false, true}, {"any", true, true}, {"plain", false, false}, {"", true, false},
	} {
		got := promptCaps(t, h, c.agent)
		if got["image"] != c.image || got["audio"] != c.audio || got["embeddedContext"] != true {
			t.Errorf("initialize at pool %q: promptCapabilities %v, want image %v, audio %v, embeddedContext true", c.agent, got, c.image, c.audio)
		}
	}
}

// TestPromptRefusesMediaThePoolDoesNotTake: a session/prompt with an
// image or audio block (or an E2A file in params.files) of a media type
// the pool's input modes do not accept is -32602 naming the block and
// the pool's modes, and nothing is published; one the modes accept is
// published with the block. Resource links and embedded resources are not
// media the capabilities gate (ACP: every agent takes resource_link,
// embeddedContext is declared): they pass.
func TestPromptRefusesMediaThePoolDoesNotTake(t *testing.T) {
	h := newModesHost()
	session := func(agent string) string {
		r := callAt(t, h, agent, "session/new", map[string]any{"cwd": "/w", "mcpServers": []any{}})
		id, _ := r.result.(map[string]any)["sessionId"].(string)
		if r.err != nil || id == "" {
			t.Fatalf("session/new at %q: %+v", agent, r.err)
		}
		return id
	}
	text := map[string]any{"type": "text", "text": "what is this?"}
	png := map[string]any{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}
	jpeg := map[string]any{"type": "image", "data": "aGVsbG8=", "mimeType": "image/jpeg"}
	wav := map[string]any{"type": "audio", "data": "aGVsbG8=", "mimeType": "audio/wav"}
	link := map[string]any{"type": "resource_link", "name": "a.md", "uri": "file:///w/a.md", "mimeType": "text/markdown"}
	res := map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///w/a.go", "text": "package a", "mimeType": "text/x-go"}}
	for _, c := range []struct {
		name, agent string
		params      map[string]any
		refused     string // in the message; "" when published
	}{
		{"png to plain", "plain", map[string]any{"prompt": []any{text, png}}, `prompt[1]`},
		{"wav to vision", "vision", map[string]any{"prompt": []any{wav}}, `prompt[0]`},
		{"jpeg to vision", "vision", map[string]any{"prompt": []any{text, jpeg}}, `"image/jpeg"`},
		{"content_blocks png to plain", "plain", map[string]any{"content_blocks": []any{png}}, `content_blocks[0]`},
		{"file png to plain", "plain", map[string]any{"prompt": []any{text}, "files": []any{
			map[string]any{"uri": "data:image/png;base64,aGVsbG8=", "mime_type": "image/png"}}}, `files[0]`},
		{"png to vision", "vision", map[string]any{"prompt": []any{text, png}}, ""},
		{"wav to voice", "voice", map[string]any{"prompt": []any{text, wav}}, ""},
		{"link and resource to plain", "plain", map[string]any{"prompt": []any{text, link, res}}, ""},
	} {
		id := session(c.agent)
		before := len(h.Published())
		c.params["sessionId"] = id
		r := callAt(t, h, c.agent, "session/prompt", c.params)
		published := len(h.Published()) - before
		if c.refused == "" {
			if r.err != nil || published != 1 {
				t.Errorf("%s: %+v, %d published; want it published", c.name, r.err, published)
			}
			continue
		}
		if r.err == nil || r.err.Code != jsonrpc.CodeInvalidParams || !strings.Contains(r.err.Message, c.refused) ||
			!strings.Contains(r.err.Message, c.agent) || !strings.Contains(r.err.Message, "input modes") {
			t.Errorf("%s: %+v; want -32602 naming %s, the pool and its input modes", c.name, r.err, c.refused)
		}
		if published != 0 {
			t.Errorf("%s: refused, yet %d published", c.name, published)
		}
	}
}
