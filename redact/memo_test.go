package redact

import (
	"strconv"
	"sync"
	"testing"
)

// TestKeyClassMemo: a remembered class is the class computed from the
// key's words, the memo stops growing at memoMax, concurrent lookups agree,
// and a policy extended with a word answers for it at once (a new table, a
// new memo).
func TestKeyClassMemo(t *testing.T) {
	p := New()
	keys := []string{"", "messageId", "api_key", "apiKeyRef", "credentialRef", "$ref", "token", "tokenCount",
		"x-api-key", "Authorization", "parts", "pin", "session_token", "secretName", "oauth2Token", "passwd"}
	tb := p.t.Load()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 3 {
				for _, k := range keys {
					if got, want := tb.class(k), tb.classify(k); got != want {
						t.Errorf("class(%q) = %b, want %b", k, got, want)
					}
				}
			}
		})
	}
	wg.Wait()
	if m := tb.memo.Load(); m == nil || len(*m) != len(keys) {
		t.Fatalf("memo holds %v, want the %d keys", m, len(keys))
	}
	for i := range memoMax + 100 {
		tb.class("random_key_" + strconv.Itoa(i))
	}
	if n := len(*tb.memo.Load()); n != memoMax {
		t.Fatalf("memo grew to %d, bound %d", n, memoMax)
	}
	if got, want := tb.class("another_token"), tb.classify("another_token"); got != want || got&classSecret == 0 {
		t.Fatalf("a key past the bound: %b, want %b", got, want)
	}
	if p.IsSecretKey("pin") {
		t.Fatal("pin is not secret by default")
	}
	p.AddWords("pin")
	if !p.IsSecretKey("pin") || !p.IsSecretKey("user_pin") {
		t.Fatal("pin added but not secret")
	}
}
