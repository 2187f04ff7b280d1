package ingress_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// TestAuthSecretSharedAcrossSchemes: one secret configured as
// alice's API key and as bob's static bearer token made it both
// principals (X-Api-Key → alice, Authorization: Bearer → bob), whoever
// holds it acting as the other. "The same secret twice is an error"
// (AUTH.md) held within a list only. The same secret for the same
// principal in both lists stays allowed: it names one principal.
func TestAuthSecretSharedAcrossSchemes(t *testing.T) {
	const shared = "ak_shared_0123456789abcdef"
	sum := sha256.Sum256([]byte(shared))
	for name, bearer := range map[string]ingress.Credential{
		"clear":  {Principal: "bob", Secret: shared},
		"digest": {Principal: "bob", SecretSHA256: hex.EncodeToString(sum[:])},
	} {
		_, err := ingress.NewAuth(&ingress.AuthConfig{
			APIKeys:      []ingress.Credential{{Principal: "alice", Secret: shared}},
			BearerTokens: []ingress.Credential{bearer}})
		if !errors.Is(err, ingress.ErrAuthConfig) {
			t.Errorf("%s: alice's API key is bob's bearer token: err = %v, want ErrAuthConfig", name, err)
		} else if strings.Contains(err.Error(), shared) {
			t.Errorf("%s: the error reveals the secret: %v", name, err)
		}
	}
	if _, err := ingress.NewAuth(&ingress.AuthConfig{
		APIKeys:      []ingress.Credential{{Principal: "alice", Secret: shared}},
		BearerTokens: []ingress.Credential{{Principal: "alice", Secret: shared}}}); err != nil {
		t.Errorf("one principal's secret in both lists: %v", err)
	}
}

// TestAuthEnvDigestMistyped: E2A_API_KEYS "alice:sha256:<hex>"
// gives a digest; with a digit too few or too many it was taken as a
// clear-text key, "sha256:<hex>" itself, so the value written as a digest
// (not secret) became a working credential. It is refused instead.
func TestAuthEnvDigestMistyped(t *testing.T) {
	sum := sha256.Sum256([]byte("ak_alice_0123456789abcdef"))
	full := hex.EncodeToString(sum[:])
	for _, env := range []string{ingress.EnvAPIKeys, ingress.EnvBearerTokens, ingress.EnvOAuth2Clients} {
		for _, h := range []string{full[:63], full + "0"} {
			vars := map[string]string{env: "alice:sha256:" + h}
			if env == ingress.EnvOAuth2Clients {
				vars[ingress.EnvOAuth2SigningKey] = "sk_0123456789abcdef0123456789abcdef"
			}
			a, err := ingress.LoadAuth(func(k string) string { return vars[k] })
			if !errors.Is(err, ingress.ErrAuthConfig) {
				t.Errorf("%s with a %d-digit digest: err = %v, want ErrAuthConfig", env, len(h), err)
				if a != nil && env == ingress.EnvAPIKeys {
					r, _ := http.NewRequest(http.MethodGet, "/", nil)
					r.Header.Set(ingress.HeaderAPIKey, "sha256:"+h)
					if p, err := a.Authenticate(r); err == nil {
						t.Errorf("  the digest's text authenticates as %q", p.UserID)
					}
				}
			}
		}
	}
}

// TestAuthCardVariesWithForwardedHeaders: without a public URL the
// agent card's URLs (its interfaces, the oauth2 tokenUrl clients send
// their client secret to) come from X-Forwarded-Host/-Proto/-Prefix, and
// the card is served Cache-Control: public. A shared cache keyed on the
// URL (and Host) stored the card one request's X-Forwarded-Host named and
// served it to every client. The answer must vary with those headers.
func TestAuthCardVariesWithForwardedHeaders(t *testing.T) {
	p := startPipeline(t)
	resp := p.get(t, "/.well-known/agent-card.json", "X-Forwarded-Host", "evil.example")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "evil.example") {
		t.Fatalf("control: the card does not follow X-Forwarded-Host: %d %.200s", resp.StatusCode, body)
	}
	if !strings.Contains(resp.Header.Get("Cache-Control"), "public") {
		t.Skipf("the card is not publicly cacheable (%q)", resp.Header.Get("Cache-Control"))
	}
	vary := strings.Join(resp.Header.Values("Vary"), ",")
	for _, h := range []string{"X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Prefix"} {
		if !strings.Contains(vary, h) {
			t.Errorf("Vary %q does not name %s", vary, h)
		}
	}
}
