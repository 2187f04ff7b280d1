package pushtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// SigningKeyFile writes a fresh Ed25519 key as `openssl genpkey
// -algorithm ed25519` does (PKCS #8 PEM, the format of
// E2A_PUSH_SIGNING_KEY) and returns its path.
func SigningKeyFile(t testing.TB) string {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "push-signing.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// FetchJWKS gets the JWK Set served at url, with the raw body.
func FetchJWKS(t testing.TB, url string) (jose.JSONWebKeySet, *http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatalf("JWK Set %s: %v", raw, err)
	}
	return set, resp, raw
}

// Verify checks the detached JWS sig (E2A-Signature) over body with the
// key of its kid in set (EdDSA only); it returns the verified payload
// and the parsed signature.
func Verify(set jose.JSONWebKeySet, sig string, body []byte) ([]byte, *jose.JSONWebSignature, error) {
	jws, err := jose.ParseDetached(sig, body, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, nil, err
	}
	keys := set.Key(jws.Signatures[0].Protected.KeyID)
	if len(keys) != 1 {
		return nil, jws, errNoKey(jws.Signatures[0].Protected.KeyID)
	}
	p, err := jws.Verify(keys[0].Key)
	return p, jws, err
}

type errNoKey string

func (e errNoKey) Error() string { return "kid " + string(e) + " is not in the JWK Set" }
