package redact_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/redact"
)

// FuzzWords checks the splitter: words are non-empty, lower case, made of
// letters and digits of the key, never both letters and digits, and
// splitting is stable (Words of a word is that word).
func FuzzWords(f *testing.F) {
	for _, s := range []string{"max_tokens", "X-Api-Key", "APIKey", "oauth2Token", "ÄpfelSchlüssel", "a\xffb", "ǅungla", "ⅫToken"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		ws := redact.Words(key)
		joined := strings.Join(ws, "")
		if len(joined) > len(key)*3+8 {
			t.Fatalf("Words(%q) = %q: longer than the key", key, ws)
		}
		for _, w := range ws {
			if w == "" {
				t.Fatalf("Words(%q) has an empty word: %q", key, ws)
			}
			if !utf8.ValidString(key) {
				continue
			}
			if again := redact.Words(w); len(again) != 1 && strings.ToLower(w) == w {
				// a lower-case word may only split again at a letter/digit
				// boundary, which Words never leaves inside a word
				t.Fatalf("Words(%q) = %q, but Words(%q) = %q", key, ws, w, again)
			}
		}
		_ = redact.IsSecretKey(key)
	})
}

// FuzzRedact checks the redactor on a JSON document holding one secret
// under a secret key at some path: the secret never survives, the result
// still encodes, redacting again changes nothing.
func FuzzRedact(f *testing.F) {
	f.Add(`{"a":[{"b":1}],"c":"x"}`, "api_key")
	f.Add(`{"args":["--token"]}`, "password")
	f.Add(`[{"name":"X","value":"y"}]`, "Authorization")
	f.Add(`{"auth":{"credentialRef":{"id":"k"}}}`, "token")
	f.Add(`{"args":["--header","Authorization: Bearer x"],"h":[["Cookie","c=1"]]}`, "X-Api-Key")
	f.Add(`{"stop_token_ids":[1,[2]],"e":[{"name":"eos_token_id","value":[3]}],"p":[["token_ids",4]]}`, "eos_token_id")
	f.Add(`{"h":[["XAPIKey",1]],"thought_signature":"s"}`, "XAPIKey")
	f.Add(`{"db":{"ConnectionStrings":{"a":"Server=h;Password='x;y'"}},"u":"Bearer abcdefgh12","j":"eyJhbGciOiJI.eyJ.x"}`, "DATABASE_URL")
	f.Add(`["jdbc:sqlserver://h;password={p}","host=h password=p"]`, "id_token_hint")
	f.Add(`{"type":"thinking","signature":"s","a":["--eos-token-id","2","h/?eos_token_id=1,2","X_TOKEN_ID: 3"]}`, "signature")
	f.Add(`{"reasoningContent":{"reasoningText":{"text":"t","signature":"s"}},"reasoning_details":[{"type":"reasoning.encrypted","data":"d"}]}`, "signature")
	f.Fuzz(func(t *testing.T, doc, key string) {
		const secret = "SECRET-fuzz-0123456789"
		var v any
		d := json.NewDecoder(strings.NewReader(doc))
		d.UseNumber()
		if d.Decode(&v) != nil {
			return
		}
		if !redact.IsSecretKey(key) || redact.IsReferenceKey(key) {
			return
		}
		holder := map[string]any{key: secret, "doc": v, "list": []any{v, map[string]any{key: []any{secret}}}}
		redact.Redact(holder, nil)
		b, err := json.Marshal(holder)
		if err != nil {
			t.Fatalf("does not encode: %v", err)
		}
		if strings.Contains(string(b), secret) {
			t.Fatalf("secret under %q survived: %s", key, b)
		}
		if n := redact.Redact(holder, nil); n != 0 {
			t.Fatalf("second pass changed %d values", n)
		}
	})
}
