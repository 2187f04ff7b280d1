package push

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// SealKeyEnv names the file of the key that seals the configs' secrets in
// E2A_PUSH (WithSealKey): 32 bytes, base64 (`openssl rand -base64 32`).
const SealKeyEnv = "E2A_PUSH_SEAL_KEY"

// sealPrefix starts a sealed value: "e2a-sealed:v1:" then base64url of
// the nonce and the AES-256-GCM ciphertext.
const sealPrefix = "e2a-sealed:v1:"

// errSealed reports a stored secret that cannot be opened: no key, another
// key, or a value changed in the bucket.
var errSealed = errors.New("a stored push secret cannot be opened (" + SealKeyEnv + ")")

// sealer seals and opens the secrets of stored configs (a config's URL,
// token and credentials) with AES-256-GCM. The URL is one: a webhook's
// path or query may be its secret (Slack's and Discord's hooks), which
// the envelope, the console and an audit read never show. The additional data binds each value
// to its task key, config id and field, so a sealed value copied into
// another config, principal's or not, does not open. A nil sealer stores
// values as they are (no key configured) and opens none.
type sealer struct {
	aead cipher.AEAD
}

// LoadSealKey reads a seal key file (SealKeyEnv): base64 of 32 bytes,
// white space around it ignored.
func LoadSealKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("push: seal key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("push: seal key %s: want base64 of 32 bytes (openssl rand -base64 32)", path)
	}
	return key, nil
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("seal key of %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// seal returns v sealed for ad; "" stays "", and without a key v is
// returned as it is.
func (s *sealer) seal(v, ad string) string {
	if s == nil || v == "" {
		return v
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(v)+s.aead.Overhead())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24)
	return sealPrefix + base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(v), []byte(ad)))
}

// open returns the value v sealed for ad (v itself when it is not sealed:
// stored before a key was configured), errSealed when it cannot.
func (s *sealer) open(v, ad string) (string, error) {
	b64, ok := strings.CutPrefix(v, sealPrefix)
	if !ok {
		return v, nil
	}
	if s == nil {
		return "", errSealed
	}
	b, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(b) < s.aead.NonceSize() {
		return "", errSealed
	}
	n := s.aead.NonceSize()
	p, err := s.aead.Open(nil, b[:n], b[n:], []byte(ad))
	if err != nil {
		return "", errSealed
	}
	return string(p), nil
}

// secretAD is the additional data of field of config id under task key.
func secretAD(key, id, field string) string { return key + "\x00" + id + "\x00" + field }

// sealed returns tc with its configs' secrets sealed for task key (a copy:
// tc stays as it is).
func (s *sealer) sealed(tc taskConfigs, key string) taskConfigs {
	if s == nil {
		return tc
	}
	out := taskConfigs{Configs: make([]Config, len(tc.Configs)), Slot: tc.Slot}
	for i, c := range tc.Configs {
		c.URL = s.seal(c.URL, secretAD(key, c.ID, "url"))
		c.Token = s.seal(c.Token, secretAD(key, c.ID, "token"))
		if c.Auth != nil {
			a := *c.Auth
			a.Credentials = s.seal(a.Credentials, secretAD(key, c.ID, "credentials"))
			c.Auth = &a
		}
		out.Configs[i] = c
	}
	return out
}

// opened opens the secrets of tc's configs, read under task key, in place.
func (s *sealer) opened(tc *taskConfigs, key string) error {
	for i := range tc.Configs {
		c := &tc.Configs[i]
		var err error
		if c.URL, err = s.open(c.URL, secretAD(key, c.ID, "url")); err != nil {
			return fmt.Errorf("config %s's URL: %w", c.ID, err)
		}
		if c.Token, err = s.open(c.Token, secretAD(key, c.ID, "token")); err != nil {
			return fmt.Errorf("config %s's token: %w", c.ID, err)
		}
		if c.Auth != nil {
			if c.Auth.Credentials, err = s.open(c.Auth.Credentials, secretAD(key, c.ID, "credentials")); err != nil {
				return fmt.Errorf("config %s's credentials: %w", c.ID, err)
			}
		}
	}
	return nil
}
