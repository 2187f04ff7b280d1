package redact_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/e2a-pipeline/pipeline/redact"
)

func TestWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"token", []string{"token"}},
		{"max_tokens", []string{"max", "tokens"}},
		{"X-Api-Key", []string{"x", "api", "key"}},
		{"apiKey", []string{"api", "key"}},
		{"APIKey", []string{"api", "key"}},
		{"APIKEY", []string{"apikey"}},
		{"HTTPHeaderName", []string{"http", "header", "name"}},
		{"OAuthToken", []string{"o", "auth", "token"}},
		{"oauth2Token", []string{"oauth", "2", "token"}},
		{"x-hub-signature-256", []string{"x", "hub", "signature", "256"}},
		{"auth.bearer_token", []string{"auth", "bearer", "token"}},
		{"SessionID", []string{"session", "id"}},
		{"sessionId", []string{"session", "id"}},
		{"GITHUB_TOKEN", []string{"github", "token"}},
		{"client secret", []string{"client", "secret"}},
		{"__meta__", []string{"meta"}},
		{"$ref", []string{"ref"}},
		{"s3Bucket", []string{"s", "3", "bucket"}},
		{"ÄpfelSchlüssel", []string{"äpfel", "schlüssel"}},
		{"a--b..c", []string{"a", "b", "c"}},
		{"ID", []string{"id"}},
	} {
		if got := redact.Words(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Words(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// secretKeys and plainKeys are the rule's table, both directions.
var secretKeys = []string{
	// secret words
	"secret", "Secret", "secrets", "client_secret", "clientSecret", "client-secret", "CLIENT_SECRET", "clientsecret",
	"session_secret", "webhook_secret",
	"password", "Password", "db_password", "DB_PASSWORD", "dbPassword", "dbpassword", "passwords", "password_hash",
	"passwd", "pwd", "mysql_pwd", "passphrase", "ssh_passphrase",
	"token", "Token", "auth_token", "authToken", "AUTH_TOKEN", "x-auth-token", "session_token", "sessionToken",
	"access_token", "accessToken", "accesstoken", "refresh_token", "id_token", "idToken", "bearer_token",
	"github_token", "GITHUB_TOKEN", "slackBotToken", "OAuthToken", "oauth2_token", "token_value", "token_id",
	"credential", "credentials", "Credentials", "aws_credentials", "credential_id", "secret_id",
	"apikey", "api_key", "apiKey", "APIKey", "API_KEY", "x-api-key", "X-Api-Key", "xapikey", "OPENAI_API_KEY", "api_keys",
	"auth", "Auth", "authorization", "Authorization", "proxy-authorization", "Proxy-Authorization",
	"authorization_code",
	"cookie", "Cookie", "set-cookie", "Set-Cookie", "setcookie", "cookies", "session_cookie",
	"private_key", "privateKey", "PRIVATE_KEY", "private-key", "privatekey", "ssh_private_key",
	"secret_key", "secretKey", "aws_secret_access_key", "session_key", "sessionKey", "signing_key", "encryption_key",
	"master_key", "access_key",
	"bearer", "Bearer", "signature", "x-hub-signature-256", "webhook_signature",
	"nkey", "NKEY", "nats_seed", "seed_phrase",
	// lists of credentials: plural tokens after a credential's word
	"access_tokens", "accessTokens", "refresh_tokens", "refreshTokens", "api_tokens", "apiTokens", "session_tokens",
	"auth_tokens", "bearer_tokens", "ACCESSTOKENS",
	// Azure: API Management's subscription key, Storage's account key
	"Ocp-Apim-Subscription-Key", "ocp-apim-subscription-key", "subscription_key", "subscriptionKey",
	"AccountKey", "account_key", "AZURE_STORAGE_ACCOUNT_KEY", "storage_account_key",
}

var plainKeys = []string{
	"", "text", "content", "query", "id", "key", "keys", "sort_key", "cache_key", "idempotency_key", "idempotencyKey",
	"max_tokens", "maxTokens", "max_token", "token_count", "tokenCount", "tokens", "input_tokens", "output_tokens",
	"total_tokens", "prompt_tokens", "completion_tokens", "inputTokens", "token_usage", "token_limit", "token_budget",
	"token_type", "tokenizer", "tokenize", "maxtokens", "num_tokens", "stripped_secrets", "redacted_count",
	"session", "session_id", "sessionId", "SessionID", "contextId", "context_id", "request_id", "task_id",
	"seed", "random_seed", "public_key", "publicKey", "private", "is_private",
	"auth_method", "authMethod", "auth_methods", "auth_type", "auth_scheme", "authScheme", "auth_url", "auth_required",
	"authority", "authorities", "author", "authenticated", "oauth", "oauth_provider", "OAuthProvider", "OAuthScopes",
	"authentication",
	"credential_ref", "credentialRef", "credentials_ref", "api_key_ref", "apiKeyRef", "token_ref", "secretRef",
	"secret_ref", "$ref", "password_reference",
	"secret_name", "secretName", "token_endpoint", "tokenUrl", "token_url", "authorizationUrl", "authorization_url",
	"bearerFormat", "bearer_format", "cookie_name", "password_policy", "password_min_length", "token_expires_in",
	"token_expires_at", "signature_algorithm", "signature_method", "key_file", "private_key_path", "private_key_file",
	"cwd", "pass", "passed", "pass_rate", "mcpServers", "env", "headers", "args",
	// Gemini's thought signatures (sent back with the next turn's tool calls)
	"thought_signature", "thoughtSignature", "thought_signatures",
	"subscription_id", "subscription_key_name", "account_name", "AccountName", "account_key_ref", "primary_key_id",
	"stop_tokens", "special_tokens", "tokens", "suppress_tokens",
}

func TestIsSecretKey(t *testing.T) {
	if n := len(secretKeys) + len(plainKeys); n < 60 {
		t.Fatalf("table of %d keys", n)
	}
	for _, k := range secretKeys {
		if !redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false, want true (words %q)", k, redact.Words(k))
		}
	}
	for _, k := range plainKeys {
		if redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = true, want false (words %q)", k, redact.Words(k))
		}
	}
	t.Logf("%d secret keys, %d plain keys", len(secretKeys), len(plainKeys))
}

func TestIsReferenceKey(t *testing.T) {
	for k, want := range map[string]bool{"credentialRef": true, "api_key_ref": true, "$ref": true, "token_refs": true,
		"secret_reference": true, "token": false, "refresh_token": false, "reference_task_ids": false, "": false} {
		if got := redact.IsReferenceKey(k); got != want {
			t.Errorf("IsReferenceKey(%q) = %v", k, got)
		}
	}
}

func TestAddWords(t *testing.T) {
	p := redact.New("pin", "X-Vendor-Sig", " ", "")
	for k, want := range map[string]bool{"pin": true, "card_pin": true, "pinned": false, "pinCode": true, "x_vendor_sig": true,
		"xVendorSig": true, "vendor_sig": false, "sig": false, "pin_ref": false, "token": true} {
		if got := p.IsSecretKey(k); got != want {
			t.Errorf("IsSecretKey(%q) = %v, want %v", k, got, want)
		}
	}
	if got := p.Extra(); !reflect.DeepEqual(got, []string{"pin", "x_vendor_sig"}) {
		t.Errorf("Extra = %q", got)
	}
	if redact.New().IsSecretKey("pin") {
		t.Error("words leak between policies")
	}
	p.AddWords("p")
	a := []any{"-p", "hunter2", "--port", "80"}
	p.Redact(a, nil)
	if a[1] != redact.Marker || a[3] != "80" {
		t.Errorf("configured one-letter flag: %v", a)
	}
}

// TestAddWordsConcurrent matches while words are added (run with -race).
func TestAddWordsConcurrent(t *testing.T) {
	p := redact.New()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 200 {
				p.AddWords("w" + strings.Repeat("x", i) + string(rune('a'+j%26)))
			}
		}()
		go func() {
			defer wg.Done()
			for range 200 {
				if !p.IsSecretKey("api_key") || p.IsSecretKey("max_tokens") {
					t.Error("built-in rule changed")
				}
				p.Redact(map[string]any{"token": "x"}, nil)
			}
		}()
	}
	wg.Wait()
	if !p.IsSecretKey("wxxxz") {
		t.Error("added word missing")
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRedact(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		n              int
	}{
		{"flat", `{"token":"T","max_tokens":100,"token_count":3,"text":"hi"}`,
			`{"max_tokens":100,"text":"hi","token":"[redacted]","token_count":3}`, 1},
		{"numbers and bools", `{"password":12345,"auth":true,"secret":null}`,
			`{"auth":true,"password":"[redacted]","secret":null}`, 1},
		{"nested", `{"a":[{"b":{"api_key":"K"}}],"c":{"d":[{"Authorization":"Bearer X"}]}}`,
			`{"a":[{"b":{"api_key":"[redacted]"}}],"c":{"d":[{"Authorization":"[redacted]"}]}}`, 2},
		{"secret object", `{"auth":{"user":"bob","password":"P","type":"basic","deep":[{"x":"Y"}],"ok":true}}`,
			`{"auth":{"deep":[{"x":"[redacted]"}],"ok":true,"password":"[redacted]","type":"[redacted]","user":"[redacted]"}}`, 4},
		{"secret array", `{"credentials":["a","b",{"c":"d"}]}`,
			`{"credentials":["[redacted]","[redacted]",{"c":"[redacted]"}]}`, 3},
		{"reference in secret object", `{"auth":{"credentialRef":"vault:k","token":"T"}}`,
			`{"auth":{"credentialRef":"vault:k","token":"[redacted]"}}`, 1},
		{"credentialRef header", `{"headers":{"Authorization":{"credentialRef":{"id":"api-key-123"},"value":"V"},"X-Api-Key":"literal"}}`,
			`{"headers":{"Authorization":{"credentialRef":{"id":"api-key-123"},"value":"[redacted]"},"X-Api-Key":"[redacted]"}}`, 2},
		{"references kept", `{"credential_ref":"r1","api_key_ref":"r2","token_ref":{"id":"r3"}}`,
			`{"api_key_ref":"r2","credential_ref":"r1","token_ref":{"id":"r3"}}`, 0},
		{"name value pairs", `{"env":[{"name":"GITHUB_TOKEN","value":"G"},{"name":"HOME","value":"/h"}],"h":[{"key":"Cookie","value":"c=1"}]}`,
			`{"env":[{"name":"GITHUB_TOKEN","value":"[redacted]"},{"name":"HOME","value":"/h"}],"h":[{"key":"Cookie","value":"[redacted]"}]}`, 2},
		{"args", `{"args":["serve","--token","T1","--api-key=T2","-password","T3","--verbose","GITHUB_TOKEN=T4","--auth","--debug","-p","8080","--port=1"]}`,
			`{"args":["serve","--token","[redacted]","--api-key=[redacted]","-password","[redacted]","--verbose","GITHUB_TOKEN=[redacted]","--auth","--debug","-p","8080","--port=1"]}`, 4},
		{"ids survive", `{"sessionId":"s1","session_id":"s2","contextId":"c1","session":{"id":"s3"}}`,
			`{"contextId":"c1","session":{"id":"s3"},"sessionId":"s1","session_id":"s2"}`, 0},
		{"marker is stable", `{"token":"[redacted]"}`, `{"token":"[redacted]"}`, 0},
		{"header lines", `{"args":["mcp-remote","https://mcp.example.com/sse","--header","Authorization: Bearer T1","--header","Authorization:Bearer T2",` +
			`"  X-Api-Key : T3","Cookie: session=T4","Content-Type: application/json","https://h:8080/p","Authorization:  ","Authorization: [redacted]"]}`,
			`{"args":["mcp-remote","https://mcp.example.com/sse","--header","Authorization: [redacted]","--header","Authorization:[redacted]",` +
				`"  X-Api-Key : [redacted]","Cookie: [redacted]","Content-Type: application/json","https://h:8080/p","Authorization:  ","Authorization: [redacted]"]}`, 4},
		{"header line in a command", `{"cmd":["curl","-H","Cookie: session=T","https://example.com"]}`,
			`{"cmd":["curl","-H","Cookie: [redacted]","https://example.com"]}`, 1},
		{"name value tuples", `{"headers":[["Authorization","Bearer T1"],["X-Api-Key","T2"],["Accept","*/*"],["token",{"a":"T3"}],["password",["T4"]],["credentialRef","vault:k"]]}`,
			`{"headers":[["Authorization","[redacted]"],["X-Api-Key","[redacted]"],["Accept","*/*"],["token",{"a":"[redacted]"}],["password",["[redacted]"]],["credentialRef","vault:k"]]}`, 4},
		{"tuples need a key name", `{"a":["--auth","--debug"],"b":["Authorization: x y","https://h"],"c":["token","a","b"],"d":["GITHUB_TOKEN=T","x"],"e":[1,"token"]}`,
			`{"a":["--auth","--debug"],"b":["Authorization: [redacted]","https://h"],"c":["token","a","b"],"d":["GITHUB_TOKEN=[redacted]","x"],"e":[1,"token"]}`, 2},
	} {
		v := decode(t, c.in)
		n := redact.Redact(v, nil)
		b, _ := json.Marshal(v)
		if string(b) != c.want || n != c.n {
			t.Errorf("%s:\n got %s (%d)\nwant %s (%d)", c.name, b, n, c.want, c.n)
		}
	}
}

func TestReplacer(t *testing.T) {
	v := decode(t, `{"token":"T","auth":{"password":"P"},"ref":"vault:1","api_key":"vault:2"}`)
	var keys []string
	n := redact.Redact(v, func(key, value string) string {
		keys = append(keys, key)
		switch {
		case strings.HasPrefix(value, "vault:"):
			return value // already a reference
		case value == "P":
			return ""
		}
		return "vault:" + value
	})
	b, _ := json.Marshal(v)
	if string(b) != `{"api_key":"vault:2","auth":{"password":"[redacted]"},"ref":"vault:1","token":"vault:T"}` || n != 2 {
		t.Errorf("got %s (%d), keys %q", b, n, keys)
	}
}

func TestMaxDepth(t *testing.T) {
	deep := map[string]any{"token": "T"}
	var v any = deep
	for range redact.MaxDepth + 10 {
		v = map[string]any{"a": v}
	}
	redact.Redact(v, nil)
	b, _ := json.Marshal(v)
	if strings.Contains(string(b), `"T"`) {
		t.Error("a secret below MaxDepth survived")
	}
}
