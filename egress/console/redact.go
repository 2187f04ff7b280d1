package console

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/redact"
)

// IsSecretKey reports whether a JSON key names a secret: the rule of
// package redact (references such as credential_ref and counts such as
// max_tokens are not secrets).
func IsSecretKey(k string) bool { return redact.IsSecretKey(k) }

// Redacted replaces the value of every secret key.
const Redacted = redact.Marker

// RedactEnvelope decodes a stored envelope for display: the auth object is
// dropped whole (the normalizer already stripped its secrets; even the
// references stay out of the console), a webhook URL (an inline push
// config's, AgentVault's webhookUrl) is shown as its scheme and host
// (redact.URL: a webhook's path or query may be its secret; the console's
// push view and the A2A push methods of another's task show no more), and
// everything else is redacted by package redact, at any depth. It returns
// nil for data that is not a JSON object.
func RedactEnvelope(data []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil
	}
	delete(m, "auth")
	if p, ok := m["params"].(map[string]any); ok {
		if pc, ok := p["push_notification_config"].(map[string]any); ok {
			redactURLAt(pc, "url")
		}
	}
	if pv, ok := m["provenance"].(map[string]any); ok {
		if d, ok := pv["details"].(map[string]any); ok {
			redactURLAt(d, normalizer.DetailWebhookURL)
		}
	}
	redact.Redact(m, nil)
	return m
}

// redactURLAt replaces the URL string at m[key], if any, by redact.URL's
// form of it.
func redactURLAt(m map[string]any, key string) {
	if u, ok := m[key].(string); ok {
		m[key] = redact.URL(u)
	}
}

// ReplayCommand returns the e2a replay command line printing the envelope
// and frames of requestID from the durable streams, the id quoted for a
// POSIX shell.
func ReplayCommand(requestID string) string {
	return "e2a replay --request " + shellQuote(requestID)
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:/=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
