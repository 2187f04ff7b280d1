package redact_test

import (
	"encoding/json"
	"fmt"

	"github.com/e2a-pipeline/pipeline/redact"
)

func Example() {
	p := redact.New("pin") // as E2A_SECRET_KEYS=pin does for redact.Default
	var params map[string]any
	_ = json.Unmarshal([]byte(`{
		"text": "hello", "max_tokens": 256, "token_count": 12, "sessionId": "s-1",
		"auth": {"user": "bob", "credentialRef": "vault:bob"},
		"card_pin": "1234", "apiKey": "sk-live-1",
		"mcp": {"args": ["--token", "ghp_1", "--port", "8080"], "env": [{"name": "GITHUB_TOKEN", "value": "ghp_2"}]}
	}`), &params)
	n := p.Redact(params, nil)
	out, _ := json.Marshal(params)
	fmt.Println(n, string(out))
	fmt.Println(p.IsSecretKey("X-Api-Key"), p.IsSecretKey("max_tokens"), p.IsSecretKey("session_id"))
	// Output:
	// 5 {"apiKey":"[redacted]","auth":{"credentialRef":"vault:bob","user":"[redacted]"},"card_pin":"[redacted]","max_tokens":256,"mcp":{"args":["--token","[redacted]","--port","8080"],"env":[{"name":"GITHUB_TOKEN","value":"[redacted]"}]},"sessionId":"s-1","text":"hello","token_count":12}
	// true false false
}
