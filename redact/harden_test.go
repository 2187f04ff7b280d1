package redact_test

import (
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/redact"
)

// TestGluedPhrases: a secret phrase written as one word is the phrase
// (Docker registry's S3 driver takes "accesskey" and "secretkey"; an
// upper-case env name loses its camelCase: SECRETKEY).
func TestGluedPhrases(t *testing.T) {
	for _, k := range []string{"secretkey", "SECRETKEY", "accesskey", "ACCESSKEY", "awssecretkey", "privatekeys",
		"sessionkey", "signingkey", "encryptionkey", "masterkey", "seedphrase", "natsseed", "s3_secretkey"} {
		if !redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false (words %q)", k, redact.Words(k))
		}
	}
	for _, k := range []string{"secretkey_ref", "accesskey_name", "key", "sortkey", "cachekey", "keys", "publickey", "seed"} {
		if redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = true (words %q)", k, redact.Words(k))
		}
	}
	p := redact.New("X-Vendor-Sig")
	if !p.IsSecretKey("xvendorsig") || p.IsSecretKey("vendorsig") {
		t.Errorf("configured phrase glued: xvendorsig %v, vendorsig %v", p.IsSecretKey("xvendorsig"), p.IsSecretKey("vendorsig"))
	}
}

// TestArrayStrings: the string elements of arrays (command lines, header
// lists) that the array rules read.
func TestArrayStrings(t *testing.T) {
	checkCases(t, []redactCase{
		{"url userinfo", `["-y","@modelcontextprotocol/server-postgres","postgresql://app:hunter2@db:5432/app"]`,
			`["-y","@modelcontextprotocol/server-postgres","postgresql://app:[redacted]@db:5432/app"]`, 1},
		{"url token as user", `["git","clone","https://ghp_T1@github.com/o/r.git"]`,
			`["git","clone","https://[redacted]@github.com/o/r.git"]`, 1},
		{"url query", `["https://h/x?a=1&token=T1&key=T2&sig=T3&page=2"]`,
			`["https://h/x?a=1&token=[redacted]&key=[redacted]&sig=[redacted]&page=2"]`, 3},
		{"url fragment", `["https://app/cb#access_token=T1&token_type=bearer&state=s"]`,
			`["https://app/cb#access_token=[redacted]&token_type=bearer&state=s"]`, 1},
		{"url in an assignment", `["DATABASE_URL=postgres://u:T1@h/db","--dsn=mysql://u:T2@h/db"]`,
			`["DATABASE_URL=postgres://u:[redacted]@h/db","--dsn=mysql://u:[redacted]@h/db"]`, 2},
		{"url in a command", `["sh","-c","psql 'postgres://u:T1@h/db' && curl https://h/?api_key=T2"]`,
			`["sh","-c","psql 'postgres://u:[redacted]@h/db' && curl https://h/?api_key=[redacted]"]`, 2},
		{"plain urls survive", `["https://auth.example.com/cb?state=1","https://medium.com/@user?x=1","https://api.example.com/token?grant=x"]`,
			`["https://auth.example.com/cb?state=1","https://medium.com/@user?x=1","https://api.example.com/token?grant=x"]`, 0},
		{"header line in a flag", `["--header=Authorization: Bearer T1","-H=X-Api-Key:T2","--header=Accept: */*"]`,
			`["--header=Authorization: [redacted]","-H=X-Api-Key:[redacted]","--header=Accept: */*"]`, 2},
		{"header name with underscores", `["X_API_KEY: T1","SESSION_TOKEN:T2","MAX_TOKENS: 5"]`,
			`["X_API_KEY: [redacted]","SESSION_TOKEN:[redacted]","MAX_TOKENS: 5"]`, 2},
		{"form", `["curl","-d","user=bob&password=T1&remember=1","-d","password=T2&x=y","a=1&b=2"]`,
			`["curl","-d","user=bob&password=[redacted]&remember=1","-d","password=[redacted]","a=1&b=2"]`, 2},
		{"name value by key", `[{"key":"openai_api_key","name":"OpenAI","value":"T1"},{"key":"model","name":"Model","value":"m"}]`,
			`[{"key":"openai_api_key","name":"OpenAI","value":"[redacted]"},{"key":"model","name":"Model","value":"m"}]`, 1},
	})
}

// TestURLCredentialsInAnyString: the URL rule applies to every string the
// walk reaches, not only to array elements: a URL's password (or lone
// user) and its secret-named, key and sig parameters are replaced in an
// object's string value and in free text, and nothing else of the text
// changes; a reference's value is kept.
func TestURLCredentialsInAnyString(t *testing.T) {
	checkCases(t, []redactCase{
		{"object values", `{"db":"postgresql://app:DBPW_SECRET@db/x","api":"https://user:PW@api.example.com/v1",` +
			`"signed":"https://h/x?sig=SIG&key=KEY&page=2","clone":"https://ghp_T1@github.com/o/r.git"}`,
			`{"db":"postgresql://app:[redacted]@db/x","api":"https://user:[redacted]@api.example.com/v1",` +
				`"signed":"https://h/x?sig=[redacted]&key=[redacted]&page=2","clone":"https://[redacted]@github.com/o/r.git"}`, 5},
		{"free text", `{"text":"use postgresql://app:PW1@db/x, then https://h/?api_key=T2 ok","parts":[{"text":"see https://h/cb#access_token=T3&state=s"}]}`,
			`{"text":"use postgresql://app:[redacted]@db/x, then https://h/?api_key=[redacted] ok","parts":[{"text":"see https://h/cb#access_token=[redacted]&state=s"}]}`, 3},
		{"name value", `{"env":[{"name":"UPSTREAM","value":"https://u:PW@h/x"}]}`,
			`{"env":[{"name":"UPSTREAM","value":"https://u:[redacted]@h/x"}]}`, 1},
		{"kept", `{"u":"https://h/hook/PATH?state=1","m":"https://medium.com/@user?x=1","credentialRef":"https://u:p@vault/x","n":"a://"}`,
			`{"u":"https://h/hook/PATH?state=1","m":"https://medium.com/@user?x=1","credentialRef":"https://u:p@vault/x","n":"a://"}`, 0},
	})
}

// redactCase is a document, what Redact makes of it and how many values
// it replaces.
type redactCase struct {
	name, in, want string
	n              int
}

// checkCases redacts each case's document and checks the result, the
// count, and that a second pass changes nothing.
func checkCases(t *testing.T, cases []redactCase) {
	t.Helper()
	for _, c := range cases {
		var v any
		if err := json.Unmarshal([]byte(c.in), &v); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		n := redact.Redact(v, nil)
		b, _ := json.Marshal(v)
		got := string(b)
		var want any
		_ = json.Unmarshal([]byte(c.want), &want)
		wb, _ := json.Marshal(want)
		if got != string(wb) || n != c.n {
			t.Errorf("%s:\n got %s (%d)\nwant %s (%d)", c.name, got, n, wb, c.n)
		}
		if again := redact.Redact(v, nil); again != 0 {
			t.Errorf("%s: second pass changed %d", c.name, again)
		}
	}
}

// TestNestedPairsWalkedOnce: a name/value object or [name, value] pair
// holding another is walked once, not once per level above it (a
// replacer was called depth × leaves times: 1.3 million calls for 10,000
// strings under 128 levels).
func TestNestedPairsWalkedOnce(t *testing.T) {
	const depth, leaves = 64, 100
	for _, shape := range []string{"name value", "pair"} {
		bottom := make([]any, leaves)
		for i := range bottom {
			bottom[i] = "x"
		}
		var v any = bottom
		for range depth {
			if shape == "pair" {
				v = []any{"token", v}
			} else {
				v = map[string]any{"name": "token", "value": v}
			}
		}
		calls := 0
		redact.Redact(map[string]any{"list": []any{v}}, func(_, value string) string { calls++; return value })
		if calls > leaves+depth {
			t.Errorf("%s: the replacer was called %d times for %d strings", shape, calls, leaves+depth)
		}
	}
}
