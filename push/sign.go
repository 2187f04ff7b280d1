package push

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"

	"github.com/e2a-pipeline/pipeline/internal/option"
)

const (
	// HeaderSignature carries a delivery's detached JWS (RFC 7515
	// appendix F): "<protected header>..<signature>", the payload being
	// the request body as sent. A receiver puts base64url(body) between
	// the dots and verifies with the key of the header's kid from the
	// pipeline's JWKS (JWKSPath).
	HeaderSignature = "E2A-Signature"
	// JWKSPath is where ingress serves the public keys (RFC 7517 JWK Set)
	// of the signing key (SigningKeyEnv) when one is configured.
	JWKSPath = "/.well-known/jwks.json"
	// SigningKeyEnv names the file holding the Ed25519 private key
	// (PKCS #8, PEM) that signs every delivery; unset, nothing is signed.
	SigningKeyEnv = "E2A_PUSH_SIGNING_KEY"
)

// Signer signs deliveries with an Ed25519 key (JWS alg EdDSA) and serves
// its public part as a JWK Set. Detached rather than compact: the body
// stays the A2A JSON a receiver's SDK parses, unchanged, and a receiver
// that does not verify ignores one header. The protected header names the
// key (kid, its RFC 7638 thumbprint) and binds the event id (eid), so a
// signature cannot be replayed on another event's body. It is safe for
// concurrent use.
type Signer struct {
	key  ed25519.PrivateKey
	kid  string
	jwks []byte
}

// Compile-time check: the Signer serves its JWK Set.
var _ http.Handler = (*Signer)(nil)

// LoadSigner reads an Ed25519 private key (PKCS #8, PEM "PRIVATE KEY",
// as `openssl genpkey -algorithm ed25519` writes) from path. It returns
// an error wrapping ErrInvalidOption when the file cannot be read or
// holds no such key; the key itself is never part of an error.
func LoadSigner(path string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: cannot read the signing key file", ErrInvalidOption, SigningKeyEnv)
	}
	return NewSigner(b)
}

// NewSigner is LoadSigner on the file's contents.
func NewSigner(pemBytes []byte) (*Signer, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: %s: no PEM PRIVATE KEY block", ErrInvalidOption, SigningKeyEnv)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: not a PKCS #8 private key", ErrInvalidOption, SigningKeyEnv)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s: %T, want an Ed25519 key", ErrInvalidOption, SigningKeyEnv, k)
	}
	return newSigner(key), nil
}

func newSigner(key ed25519.PrivateKey) *Signer {
	x := b64(key.Public().(ed25519.PublicKey))
	// RFC 7638: the required members in lexicographic order, no spaces.
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + x + `"}`))
	kid := b64(sum[:])
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "use": "sig", "alg": "EdDSA"}}})
	return &Signer{key: key, kid: kid, jwks: jwks}
}

// KeyID is the key's kid (its RFC 7638 JWK thumbprint).
func (s *Signer) KeyID() string { return s.kid }

// JWKS is the JWK Set of the public key.
func (s *Signer) JWKS() []byte { return append([]byte(nil), s.jwks...) }

// Sign returns the detached JWS of body for the event eventID.
func (s *Signer) Sign(eventID string, body []byte) string {
	hdr, _ := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Eid string `json:"eid"`
	}{"EdDSA", s.kid, eventID})
	protected := b64(hdr)
	sig := ed25519.Sign(s.key, []byte(protected+"."+b64(body)))
	return protected + ".." + b64(sig)
}

// ServeHTTP answers the JWK Set (application/jwk-set+json).
func (s *Signer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(s.jwks)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// WithSigner signs every delivery (HeaderSignature) with s; nil is
// ErrInvalidOption.
func WithSigner(s *Signer) Option {
	return option.NotNil(ErrInvalidOption, "signer", s, func(o *options) { o.signer = s })
}
