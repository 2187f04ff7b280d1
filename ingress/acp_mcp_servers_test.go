package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestACPSessionNewRejectsNonMcpServers: ACP's NewSessionRequest
// (schema.json) has "mcpServers": {"type":"array","items":{"$ref":
// "#/$defs/McpServer"}}, and every McpServer variant is an object with
// required fields (stdio: name, command, args, env; http/sse: name, url,
// headers). A session/new whose mcpServers holds no McpServer is invalid
// params (-32602), as session/prompt's content blocks are
// (TestACPPromptBlocksValidated); it must not create a session whose
// configuration every later prompt hands to the agent.
func TestACPSessionNewRejectsNonMcpServers(t *testing.T) {
	z := startACPHTTP(t, demo.New())
	ctx := acpCtx(t)
	for _, servers := range []string{`[1]`, `["fs"]`, `[{}]`, `[null]`, `[{"name":"fs"}]`} {
		msgs := z.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":`+servers+`}}`)
		if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Code != -32602 {
			var res json.RawMessage
			if len(msgs) > 0 {
				res = msgs[0].Result
			}
			t.Errorf("session/new with mcpServers %s (no McpServer): want -32602 invalid params, got %d message(s), result %s", servers, len(msgs), res)
		}
	}
	for _, servers := range []string{`[{"name":"fs","command":"/bin/fs","args":[],"env":[]}]`,
		`[{"type":"http","name":"h","url":"https://mcp.example/","headers":[]},{"type":"sse","name":"s","url":"https://mcp.example/sse","headers":[]}]`} {
		msgs := z.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":`+servers+`}}`)
		if len(msgs) != 1 || msgs[0].Error != nil || !strings.Contains(string(msgs[0].Result), "sessionId") {
			t.Errorf("session/new with mcpServers %s: %+v", servers, msgs)
		}
	}
}

// startACPEnvelopes starts a pipeline whose pool demo (demo.New) first
// hands the envelope of its first request to got (the next ones only when
// got was read).
func startACPEnvelopes(t *testing.T) (*acpHTTP, <-chan *e2a.Envelope) {
	t.Helper()
	got := make(chan *e2a.Envelope, 1)
	z := startACPHTTP(t, agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		select {
		case got <- env:
		default:
		}
		return demo.New().Serve(ctx, env, w)
	}))
	return z, got
}

// TestACPMCPServerURLSecretsStripped: an HTTP or SSE MCP server
// (McpServerHttp / McpServerSse: name, url, headers) often carries its
// credential in its url (user information, or a query parameter such as
// access_token / api_key). The README promises that secrets are replaced
// "before anything is published", and the normalizer already cleans URLs of
// both (cleanURL: user information removed, secret-named query parameters
// [redacted]) for A2A push configurations; MCP servers' headers, env and
// args are stripped (StripMCPServers), but their url is passed on as sent:
// the agent (and E2A_REQUESTS, the session's record) get the password and
// tokens.
func TestACPMCPServerURLSecretsStripped(t *testing.T) {
	z, got := startACPEnvelopes(t)
	ctx := acpCtx(t)
	msgs := z.post(ctx, `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/w","mcpServers":[
	 {"type":"http","name":"h","url":"https://alice:pw-hunter2@mcp.example.com/mcp?access_token=tok-query-1&q=1","headers":[]},
	 {"type":"sse","name":"s","url":"https://mcp.example.com/sse?api_key=tok-query-2","headers":[]}]}}`)
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if len(msgs) != 1 || msgs[0].Error != nil || json.Unmarshal(msgs[0].Result, &res) != nil || res.SessionID == "" {
		t.Fatalf("session/new: %+v", msgs)
	}
	out := z.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"`+res.SessionID+`","prompt":[{"type":"text","text":"hi"}]}}`)
	if len(out) == 0 {
		t.Fatal("session/prompt: no answer")
	}
	env := testkit.Receive(t, got, 30*time.Second, "the prompt's envelope")
	b, _ := json.Marshal(env.Params["mcpServers"])
	for _, secret := range []string{"pw-hunter2", "tok-query-1", "tok-query-2"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the MCP servers' url secret %q reached the agent (so E2A_REQUESTS): %s", secret, b)
		}
	}
}

// TestACPMCPCapabilities: the door forwards HTTP and SSE MCP servers
// (session/new stores them, every prompt hands them to the agent:
// TestACPMCPServerURLSecretsStripped), so initialize advertises them in
// agentCapabilities.mcpCapabilities, as ACP requires before a client may
// send one (stdio servers need no capability); it advertises no "acp"
// (MCP over ACP: the agent would have to reach the server through the
// client's connection, which the door does not relay). Read by
// acp-go-sdk's client over stdio, and decoded as the SDK's
// InitializeResponse over HTTP. Both read http and sse false: initialize
// left mcpCapabilities out.
func TestACPMCPCapabilities(t *testing.T) {
	z := startACPHTTP(t, demo.New())
	s := acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ingress.ServeACPStdio(ctx, in, out, z.p.Ingress)
	})
	ini, err := s.Conn.Initialize(s.Ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	msgs := z.post(s.Ctx, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	var overHTTP acp.InitializeResponse
	if len(msgs) != 1 || msgs[0].Error != nil || json.Unmarshal(msgs[0].Result, &overHTTP) != nil {
		t.Fatalf("initialize over HTTP: %+v", msgs)
	}
	for name, got := range map[string]acp.McpCapabilities{"stdio": ini.AgentCapabilities.McpCapabilities,
		"HTTP": overHTTP.AgentCapabilities.McpCapabilities} {
		if !got.Http || !got.Sse || got.Acp {
			t.Errorf("initialize over %s: mcpCapabilities %+v; want http and sse true (forwarded), acp false", name, got)
		}
	}
}

// TestACPMCPServerOverACPRefused: initialize advertises no mcpCapabilities
// acp (TestACPMCPCapabilities), and by ACP a client may send only the MCP
// servers the agent advertises, so a session/new or session/load naming
// an "acp" server (MCP over ACP: the agent would reach it through the
// client's connection, which the door does not relay) is -32602 invalid
// params naming the server and why: session/new creates no session,
// session/load leaves the session's cwd and mcpServers as they were (the
// next prompt's envelope has them). acp-go-sdk's client over stdio. Both
// were accepted: the session stored the server and every prompt handed
// the agent one it could not reach.
func TestACPMCPServerOverACPRefused(t *testing.T) {
	z, got := startACPEnvelopes(t)
	s := acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ingress.ServeACPStdio(ctx, in, out, z.p.Ingress)
	})
	httpServer := acp.McpServer{Http: &acp.McpServerHttpInline{Type: "http", Name: "h", Url: "https://mcp.example/", Headers: []acp.HttpHeader{}}}
	bridge := acp.McpServer{Acp: &acp.McpServerAcpInline{Type: "acp", Name: "bridge", Id: "bridge-1"}}
	refused := func(call string, err error) {
		t.Helper()
		var re *acp.RequestError
		if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Message, `"bridge"`) || !strings.Contains(re.Message, "acp") {
			t.Errorf("%s with an acp MCP server: %v; want -32602 naming the server \"bridge\" and its type acp", call, err)
		}
	}
	_, err := s.Conn.NewSession(s.Ctx, acp.NewSessionRequest{Cwd: "/w", McpServers: []acp.McpServer{httpServer, bridge}})
	refused("session/new", err)
	if keys := recordKeys(t, z.p.JS, ingress.KindSession); len(keys) != 1 {
		t.Errorf("sessions %v; want only the one OpenStdio opened", keys)
	}
	_, err = s.Conn.LoadSession(s.Ctx, acp.LoadSessionRequest{SessionId: s.ID, Cwd: "/elsewhere", McpServers: []acp.McpServer{bridge}})
	refused("session/load", err)
	if _, err := s.Conn.NewSession(s.Ctx, acp.NewSessionRequest{Cwd: "/w", McpServers: []acp.McpServer{httpServer}}); err != nil {
		t.Errorf("session/new with an http MCP server: %v", err)
	}
	s.Prompt(t, "hi")
	env := testkit.Receive(t, got, 30*time.Second, "the prompt's envelope")
	if servers, _ := json.Marshal(env.Params["mcpServers"]); env.Params["cwd"] != "/work" || string(servers) != "[]" {
		t.Errorf("after the refused session/load the prompt has cwd %v, mcpServers %s; want /work and [] (as the session was)", env.Params["cwd"], servers)
	}
}
