package console

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRedactEnvelopePolicy: the console shows what package redact leaves.
func TestRedactEnvelopePolicy(t *testing.T) {
	in := `{"request_id":"r1","session_id":"sess-1","params":{"max_tokens":5,"token_count":2,"auth":{"user":"u-secret"},
	  "passwd":"p-secret","args":["--token","t-secret"],"env":[{"name":"GITHUB_TOKEN","value":"g-secret"}],"contextId":"ctx-1"}}`
	b, _ := json.Marshal(RedactEnvelope([]byte(in)))
	s := string(b)
	if strings.Contains(s, "-secret") {
		t.Errorf("secret shown: %s", s)
	}
	for _, keep := range []string{`"max_tokens":5`, `"token_count":2`, `"sess-1"`, `"ctx-1"`} {
		if !strings.Contains(s, keep) {
			t.Errorf("%s missing: %s", keep, s)
		}
	}
	if !IsSecretKey("session_token") || IsSecretKey("sessionId") {
		t.Error("IsSecretKey is not the redact rule")
	}
}
