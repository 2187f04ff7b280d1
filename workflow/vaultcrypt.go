package workflow

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// SealedPrefix starts a sealed credential value:
// "a2e-sealed:v1:<key id>:<base64url(nonce ‖ AES-256-GCM ciphertext)>". The
// key id is the first 8 hex digits of the key's SHA-256; the credential id
// is the additional data, so a sealed value cannot be moved to another id.
const SealedPrefix = "a2e-sealed:v1:"

// Environment of the vault keys (see [ParseKeyring], [Config]).
const (
	EnvVaultKeys    = "E2A_WORKFLOW_VAULT_KEYS"     // base64 32-byte keys, comma-separated, the first seals
	EnvVaultKeyFile = "E2A_WORKFLOW_VAULT_KEY_FILE" // the same, one a line ('#' comments)
)

// Keyring holds the vault keys: the first seals, every one opens, so a key
// is rotated by putting the new one first, re-sealing ([RotateVaultFile])
// and then removing the old one.
type Keyring struct {
	keys []vaultKey
}

type vaultKey struct {
	id   string
	aead cipher.AEAD
}

// ParseKeyring reads base64 (standard or URL alphabet, padded or not)
// 32-byte AES-256 keys. No key gives a nil Keyring (plaintext vault).
func ParseKeyring(keys ...string) (*Keyring, error) {
	k := &Keyring{}
	for i, s := range keys {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		var raw []byte
		var err error
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if raw, err = enc.DecodeString(s); err == nil {
				break
			}
		}
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("%w: key %d is not 32 bytes of base64", ErrVaultKey, i+1) // never echo the key
		}
		block, _ := aes.NewCipher(raw)
		aead, _ := cipher.NewGCM(block)
		sum := sha256.Sum256(raw)
		k.keys = append(k.keys, vaultKey{id: hex.EncodeToString(sum[:4]), aead: aead})
	}
	if len(k.keys) == 0 {
		return nil, nil
	}
	return k, nil
}

// ReadKeyFile returns the keys of a key file: one base64 key a line, blank
// lines and lines starting with '#' ignored.
func ReadKeyFile(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVaultKey, err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, nil
}

// IsSealed reports whether a stored value is sealed.
func IsSealed(v string) bool { return strings.HasPrefix(v, SealedPrefix) }

// Seal encrypts the value of credential id with the first key.
func (k *Keyring) Seal(id, value string) (string, error) {
	if k == nil || len(k.keys) == 0 {
		return "", fmt.Errorf("%w: no key configured", ErrVaultKey)
	}
	key := k.keys[0]
	nonce := make([]byte, key.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	ct := key.aead.Seal(nonce, nonce, []byte(value), []byte(id))
	return SealedPrefix + key.id + ":" + base64.RawURLEncoding.EncodeToString(ct), nil
}

// Open decrypts a sealed value of credential id.
func (k *Keyring) Open(id, sealed string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, SealedPrefix)
	kid, data, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return "", fmt.Errorf("%w: credential %q: not a sealed value", ErrVaultKey, id)
	}
	if k == nil {
		return "", fmt.Errorf("%w: credential %q is sealed and no vault key is configured (%s)", ErrVaultKey, id, EnvVaultKeys)
	}
	ct, err := base64.RawURLEncoding.DecodeString(data)
	if err != nil {
		return "", fmt.Errorf("%w: credential %q: malformed sealed value", ErrVaultKey, id)
	}
	for _, key := range k.keys {
		if key.id != kid || len(ct) < key.aead.NonceSize() {
			continue
		}
		n := key.aead.NonceSize()
		if pt, err := key.aead.Open(nil, ct[:n], ct[n:], []byte(id)); err == nil {
			return string(pt), nil
		}
	}
	return "", fmt.Errorf("%w: credential %q: no configured key opens it (key id %s)", ErrVaultKey, id, kid)
}

// unseal returns the plaintext of a stored value: a sealed one opened with
// k; a plaintext one only when k is nil (no keys: the vault is plaintext).
func (k *Keyring) unseal(id, stored string) (string, error) {
	if IsSealed(stored) {
		return k.Open(id, stored)
	}
	if k != nil {
		return "", fmt.Errorf("%w: credential %q; seal it with 'e2a vault seal %s < value' (a credentials file: 'e2a vault rotate FILE')", ErrPlaintextCredential, id, id)
	}
	return stored, nil
}

// RotateVaultFile rewrites a credentials file (any form LoadVaultFile
// reads) with every value sealed by the first key of k: plaintext values
// are sealed, sealed ones re-sealed (opened with any key of k). Run it after
// putting a new key first; then the old key can be removed. The file is
// replaced atomically, mode 0600.
func RotateVaultFile(file string, k *Keyring) error {
	if k == nil {
		return fmt.Errorf("%w: no key configured", ErrVaultKey)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("workflow: vault: %w", err)
	}
	reseal := func(id string, v any) (any, error) {
		s, ok := v.(string)
		if !ok {
			return v, nil
		}
		if IsSealed(s) {
			if s, err = k.Open(id, s); err != nil {
				return nil, err
			}
		}
		return k.Seal(id, s)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("workflow: vault %s: not a credentials file", file)
	}
	if list, ok := doc["credentials"].([]any); ok {
		for _, e := range list {
			if c, ok := e.(map[string]any); ok {
				id, _ := c["id"].(string)
				if c["value"], err = reseal(id, c["value"]); err != nil {
					return err
				}
			}
		}
	} else {
		for id, e := range doc {
			if c, ok := e.(map[string]any); ok {
				cid := id
				if s, ok := c["id"].(string); ok && s != "" {
					cid = s
				}
				if c["value"], err = reseal(cid, c["value"]); err != nil {
					return err
				}
			} else if doc[id], err = reseal(id, e); err != nil {
				return err
			}
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o600); err != nil {
		return fmt.Errorf("workflow: vault: %w", err)
	}
	return os.Rename(tmp, file)
}
