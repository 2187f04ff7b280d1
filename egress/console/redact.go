package console

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/e2a-pipeline/pipeline/internal/obs"
)

// secretKeyParts are the key fragments the page also redacts in frames it
// shows raw (the same list obs uses for logs).
var secretKeyParts = []string{"authorization", "bearer_token", "api_key", "apikey", "x-api-key", "password", "secret", "token", "credential", "cookie", "nkey", "seed"}

// IsSecretKey reports whether a JSON key names a secret: the log rule of
// package obs, except references (…_ref) and counts (…_tokens), which are
// not secrets.
func IsSecretKey(k string) bool {
	l := strings.ToLower(k)
	if strings.HasSuffix(l, "_ref") || strings.HasSuffix(l, "_tokens") {
		return false
	}
	return obs.IsSecretKey(k)
}

// Redacted replaces the value of every secret key.
const Redacted = "[redacted]"

// RedactEnvelope decodes a stored envelope for display: the auth object is
// dropped whole (the normalizer already stripped its secrets; even the
// references stay out of the console) and the value of every key naming a
// secret is replaced by Redacted, at any depth. It returns nil for data
// that is not a JSON object.
func RedactEnvelope(data []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil
	}
	delete(m, "auth")
	redact(m)
	return m
}

func redact(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if IsSecretKey(k) {
				t[k] = Redacted
				continue
			}
			redact(x)
		}
	case []any:
		for _, x := range t {
			redact(x)
		}
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
