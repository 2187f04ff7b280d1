package normalizer_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
)

// TestSecretPlacements runs secrets placed as clients place them through
// every adapter: none survives in the envelope, and the ordinary fields
// (max_tokens, token_count, ids, references) do.
func TestSecretPlacements(t *testing.T) {
	const s = "SECRET-placement-"
	n := normalizer.New(normalizer.Config{})
	params := `{"text":"hi","max_tokens":64,"token_count":3,"secret":"` + s + `1","token":"` + s + `2","auth_token":"` + s + `3",` +
		`"session_token":"` + s + `4","passwd":"` + s + `5","credentials":"` + s + `6","auth":{"user":"` + s + `7","credentialRef":"vault:ok"},` +
		`"deep":[{"x":{"clientSecret":"` + s + `8"}}],"cmd":["tool","--api-key","` + s + `9","--password=` + s + `10"],"credential_ref":"vault:ok2",` +
		`"db":"postgresql://app:` + s + `23@db/x","signed":"https://h/x?sig=` + s + `24&key=` + s + `25&page=2"}`
	cases := []struct {
		name string
		ad   normalizer.Adapter
		body string
	}{
		{"e2a", n.FromE2A, `{"request_id":"r1","session_id":"sess-keep","params":` + params + `,"channel_context":{"cookie":"` + s + `11"},"acp_meta":{"authorization":"` + s + `12"},"a2a_metadata":{"x-api-key":"` + s + `13"}}`},
		{"a2a", n.FromA2A, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","contextId":"ctx-keep","parts":[{"kind":"text","text":"hi"},{"kind":"data","data":` + params + `}],"metadata":{"bearer_token":"` + s + `14"}},"metadata":{"session_secret":"` + s + `15"}}}`},
		{"agentvault", n.FromAgentVault, `{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"hi"}],"metadata":{"mcp_context":` + params + `}}}}`},
		{"acp new", n.FromACP, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"m","command":"mcp","args":["--token","` + s + `16","--api-key=` + s + `17"],"env":[{"name":"HOME_DIR","value":"` + s + `18"}],"headers":[{"name":"X-Custom","value":"` + s + `19"}]}]}}`},
		{"acp prompt", n.FromACP, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"sess-keep","prompt":[{"type":"text","text":"hi"}],"_meta":{"e2a_params":` + params + `}}}`},
		{"a2e", n.FromA2E, `{"a2e":"1.0","id":"c1","type":"chat/req","req_id":"r-1","text":"hi","auth":{"token":"` + s + `20","scheme":"` + s + `21"},"max_tokens":64,"token_count":3}`},
		{"workflow", n.FromWorkflow, `{"workflow":` + jsonString(`{"type":"operationUpdate","operationId":"a","operation":{"ApiCall":{"method":"GET","url":"https://api.example.com/x","headers":{"Authorization":{"credentialRef":{"id":"api-key-123"},"prefix":"Bearer "},"X-Api-Key":"`+s+`22"},"outputPath":"/workflow/x"}}}`+"\n"+`{"type":"beginExecution","executionId":"e1","operationOrder":["a"]}`) + `}`},
		// An A2E workflow as JSONL text, and as a JSON array in a string:
		// the workflow worker reads both, so the secrets in them are found.
		{"a2e workflow jsonl", n.FromA2E, `{"a2e":"1.0","id":"w1","type":"a2e.workflow.execute","req_id":"r-w1","workflow":` + jsonString(a2eSecretOp(s+`26`)+"\n"+`{"type":"beginExecution","executionId":"e1","operationOrder":["a"]}`) + `}`},
		{"workflow array in a string", n.FromWorkflow, `{"workflow":` + jsonString(`[`+a2eSecretOp(s+`28`)+`,{"type":"beginExecution","executionId":"e1","operationOrder":["a"]}]`) + `}`},
		{"a2e workflow array in a string", n.FromA2E, `{"a2e":"1.0","id":"w2","type":"a2e.workflow.execute","req_id":"r-w2","workflow":` + jsonString(`[`+a2eSecretOp(s+`27`)+`,{"type":"beginExecution","executionId":"e1","operationOrder":["a"]}]`) + `}`},
	}
	for _, c := range cases {
		res, err := c.ad(normalizer.Input{Body: []byte(c.body)})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		b, _ := json.Marshal(res.Envelope)
		out := string(b)
		if i := strings.Index(out, s); i >= 0 {
			t.Errorf("%s: a secret survived: …%s…", c.name, out[max(0, i-60):min(len(out), i+30)])
		}
		for _, keep := range []string{"max_tokens", "token_count", "vault:ok", "sess-keep", "ctx-keep", "api-key-123", `Bearer `} {
			if strings.Contains(c.body, keep) && !strings.Contains(out, keep) {
				t.Errorf("%s: %q lost: %s", c.name, keep, out)
			}
		}
		if res.Envelope.Provenance.Details[normalizer.DetailStrippedSecrets] == nil {
			t.Errorf("%s: stripped_secrets not counted", c.name)
		}
	}
}

// TestHeaderLineSecrets runs secrets written as header lines ("Name:
// value") and [name, value] pairs through the adapters: mcp-remote's
// documented args ["--header", "Authorization: Bearer <token>"], a curl
// command line, header tuples. The secret is gone, the header names and
// the rest of the command line stay, and the count is in the provenance.
func TestHeaderLineSecrets(t *testing.T) {
	const s = "SECRET-headerline-"
	n := normalizer.New(normalizer.Config{})
	cases := []struct {
		name   string
		ad     normalizer.Adapter
		body   string
		keep   []string
		hidden int
	}{
		{"acp session/new mcp-remote --header", n.FromACP, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` +
			`{"name":"remote","command":"npx","args":["mcp-remote","https://mcp.example.com/sse","--header","Authorization: Bearer ` + s + `1"],"env":[]}]}}`,
			[]string{`"mcp-remote"`, `"https://mcp.example.com/sse"`, `"--header"`, `"Authorization: [redacted]"`}, 1},
		{"acp session/new mcp-remote no space", n.FromACP, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` +
			`{"name":"remote","command":"npx","args":["mcp-remote","https://mcp.example.com/sse","--header","Authorization:Bearer ` + s + `2"],"env":[]}]}}`,
			[]string{`"--header"`, `"Authorization:[redacted]"`}, 1},
		{"e2a curl -H", n.FromE2A, `{"request_id":"r1","params":{"cmd":["curl","-H","Cookie: session=` + s + `3","https://example.com"]}}`,
			[]string{`["curl","-H","Cookie: [redacted]","https://example.com"]`}, 1},
		{"e2a header tuples", n.FromE2A, `{"request_id":"r1","params":{"headers":[["Authorization","Bearer ` + s + `4"],["X-Api-Key","` + s + `5"],["Accept","text/plain"]]}}`,
			[]string{`[["Authorization","[redacted]"],["X-Api-Key","[redacted]"],["Accept","text/plain"]]`}, 2},
	}
	for _, c := range cases {
		res, err := c.ad(normalizer.Input{Body: []byte(c.body)})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		b, err := json.Marshal(res.Envelope)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		out := string(b)
		if i := strings.Index(out, s); i >= 0 {
			t.Errorf("%s: a secret survived in the envelope: …%s…", c.name, out[max(0, i-60):min(len(out), i+30)])
		}
		for _, k := range c.keep {
			if !strings.Contains(out, k) {
				t.Errorf("%s: %s missing from %s", c.name, k, out)
			}
		}
		if got := fmt.Sprint(res.Envelope.Provenance.Details[normalizer.DetailStrippedSecrets]); got != fmt.Sprint(c.hidden) {
			t.Errorf("%s: stripped_secrets %s, want %d", c.name, got, c.hidden)
		}
	}
}

// a2eSecretOp is an operationUpdate whose ApiCall sends a literal bearer
// token (secret) and a vault reference.
func a2eSecretOp(secret string) string {
	return `{"type":"operationUpdate","operationId":"a","operation":{"ApiCall":{"method":"GET","url":"https://api.example.com/x",` +
		`"headers":{"Authorization":"Bearer ` + secret + `","X-Key":{"credentialRef":{"id":"api-key-123"},"prefix":"Bearer "}},"outputPath":"/workflow/x"}}}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestStripMCPServers(t *testing.T) {
	var servers []any
	_ = json.Unmarshal([]byte(`[{"name":"a","command":"x","args":["-v","--token","T1"],"env":[{"name":"PATH","value":"/bin"},{"name":"E","value":""}],"headers":{"X-Key":"T2"}},"junk"]`), &servers)
	n := normalizer.StripMCPServers(servers)
	b, _ := json.Marshal(servers)
	want := `[{"args":["-v","--token","[redacted]"],"command":"x","env":[{"name":"PATH","value":"[redacted]"},{"name":"E","value":""}],"headers":{"X-Key":"[redacted]"},"name":"a"},"junk"]`
	if string(b) != want || n != 3 {
		t.Errorf("got %s (%d)\nwant %s", b, n, want)
	}
	if normalizer.StripMCPServers(servers) != 0 {
		t.Error("second pass changed values")
	}
}

// TestMCPServersByName: an MCP configuration as Claude Desktop, Cursor and
// the MCP SDKs' samples write it, {"mcpServers": {"<name>": {command,
// args, env: {…}, headers: {…}}}}, loses every env and headers value,
// whatever its name, as ACP's array of servers does: env values named
// GH_PAT or OPENAI_KEY (no secret word) were stored as sent.
func TestMCPServersByName(t *testing.T) {
	const s = "SECRET-mcp-by-name-"
	n := normalizer.New(normalizer.Config{})
	servers := `{"github":{"command":"npx","args":["-y","@modelcontextprotocol/server-github"],"env":{"GH_PAT":"` + s + `1","OPENAI_KEY":"` + s + `2"}},` +
		`"remote":{"url":"https://mcp.example.com/mcp","headers":{"X-Custom":"` + s + `3"}}}`
	for _, c := range []struct {
		name string
		ad   normalizer.Adapter
		body string
	}{
		{"e2a params", n.FromE2A, `{"request_id":"r1","params":{"text":"hi","mcpServers":` + servers + `}}`},
		{"e2a nested mcp_servers", n.FromE2A, `{"request_id":"r1","params":{"config":{"mcp_servers":` + servers + `}}}`},
		{"a2a data part", n.FromA2A, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user",` +
			`"parts":[{"kind":"data","data":{"mcpServers":` + servers + `}}]}}}`},
	} {
		res, err := c.ad(normalizer.Input{Body: []byte(c.body)})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := json.Marshal(res.Envelope)
		out := string(b)
		if i := strings.Index(out, s); i >= 0 {
			t.Errorf("%s: a secret survived: …%s…", c.name, out[max(0, i-60):min(len(out), i+30)])
		}
		for _, keep := range []string{`"GH_PAT":"[redacted]"`, `"OPENAI_KEY":"[redacted]"`, `"X-Custom":"[redacted]"`, "@modelcontextprotocol/server-github", "https://mcp.example.com/mcp"} {
			if !strings.Contains(out, keep) {
				t.Errorf("%s: %s missing from %s", c.name, keep, out)
			}
		}
	}
}

// TestStrippedHeaderNamesKept: the names of the auth.extra_headers an
// envelope loses are kept in auth._meta.stripped_headers, every one of
// them: two names, the first a secret one, were read by the redaction as a
// name/value pair, and the second was stored "[redacted]".
func TestStrippedHeaderNamesKept(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	res, err := n.FromE2A(normalizer.Input{Body: []byte(`{"request_id":"r1","params":{"text":"hi"},` +
		`"auth":{"extra_headers":{"Authorization":"Bearer SECRET-h1","X-Trace":"SECRET-h2"},"_meta":{"scope":"read","password":"SECRET-h3"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.Envelope.Auth)
	if strings.Contains(string(b), "SECRET-") {
		t.Errorf("a secret survived: %s", b)
	}
	got := fmt.Sprint(res.Envelope.Auth.Meta["stripped_headers"])
	if got != "[Authorization X-Trace]" || res.Envelope.Auth.Meta["scope"] != "read" {
		t.Errorf("auth = %s, want stripped_headers [Authorization X-Trace] and scope read", b)
	}
}

// TestE2AAttachmentsURIKeptWhole: spec §4.4 gives a message's attachments
// as params.files or params.attachments (E2AFileRef lists, uri required);
// the uri of both is kept whole, a presigned URL's signature included (it
// is how the agent reads the file), where the same URL elsewhere is
// redacted. params.attachments' was redacted: the agent got a URL it could
// not read.
func TestE2AAttachmentsURIKeptWhole(t *testing.T) {
	const signed = "https://s3.example.com/b/a.png?X-Amz-Signature=abcdef&X-Amz-Credential=AKIA1"
	n := normalizer.New(normalizer.Config{})
	res, err := n.FromE2A(normalizer.Input{Body: []byte(`{"request_id":"r1","params":{"text":"hi",` +
		`"files":[{"uri":"` + signed + `","name":"a.png"}],"attachments":[{"uri":"` + signed + `","name":"a.png"}],"link":"` + signed + `"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Envelope.Params
	for _, list := range []string{"files", "attachments"} {
		if got := p[list].([]any)[0].(map[string]any)["uri"]; got != signed {
			t.Errorf("params.%s[0].uri = %v, want it whole", list, got)
		}
	}
	if p["link"] == signed {
		t.Error("the same URL outside a file list kept its signature")
	}
}
