package normalizer_test

import (
	"encoding/json"
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
		`"deep":[{"x":{"clientSecret":"` + s + `8"}}],"cmd":["tool","--api-key","` + s + `9","--password=` + s + `10"],"credential_ref":"vault:ok2"}`
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
