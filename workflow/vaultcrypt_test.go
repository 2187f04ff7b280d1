package workflow

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestVaultEncryptedAtRest: with vault keys, stored credentials are sealed
// with AES-256-GCM (the file and the environment hold no plaintext), opened
// only when loaded, bound to their id; plaintext stored values are refused;
// a key is rotated by putting the new one first and re-sealing (issue 16:
// the vault read plaintext).
func TestVaultEncryptedAtRest(t *testing.T) {
	const secret = "sk-live-0123456789"
	oldKey, newKeyS := newKey(t), newKey(t)
	k1, err := ParseKeyring(oldKey)
	if err != nil || k1 == nil {
		t.Fatal(err)
	}
	sealed, err := k1.Seal("api-key-123", secret)
	if err != nil || !IsSealed(sealed) || strings.Contains(sealed, secret) {
		t.Fatalf("%q %v", sealed, err)
	}
	if pt, err := k1.Open("api-key-123", sealed); err != nil || pt != secret {
		t.Fatalf("open: %q %v", pt, err)
	}
	if _, err := k1.Open("other-id", sealed); !errors.Is(err, ErrVaultKey) {
		t.Fatalf("moved to another id: %v", err)
	}
	if _, err := ParseKeyring("c2hvcnQ="); !errors.Is(err, ErrVaultKey) || strings.Contains(err.Error(), "c2hvcnQ") {
		t.Fatalf("short key: %v", err)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "creds.json")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load := func(k *Keyring) (*Vault, error) {
		v := NewVault()
		v.SetKeyring(k)
		return v, v.LoadVaultFile(file)
	}
	u, _ := url.Parse("https://api.example.com/x")

	// sealed file, right key
	write(`{"credentials":[{"id":"api-key-123","value":"` + sealed + `"}]}`)
	v, err := load(k1)
	if got, werr := v.resolve(Anonymous, "api-key-123", u); err != nil || werr != nil || got != secret {
		t.Fatalf("sealed load: %v %v %q", err, werr, got)
	}
	// no key, or the wrong key: refused, nothing echoed
	if _, err := load(nil); !errors.Is(err, ErrVaultKey) {
		t.Fatalf("no key: %v", err)
	}
	k2, _ := ParseKeyring(newKeyS)
	if _, err := load(k2); !errors.Is(err, ErrVaultKey) {
		t.Fatalf("wrong key: %v", err)
	}
	// plaintext with keys configured: refused (file and environment)
	write(`{"plain":"` + secret + `","obj":{"value":"` + secret + `"}}`)
	if _, err := load(k1); !errors.Is(err, ErrPlaintextCredential) || strings.Contains(err.Error(), secret) {
		t.Fatalf("plaintext file: %v", err)
	}
	ve := NewVault()
	ve.SetKeyring(k1)
	if err := ve.LoadEnv([]string{EnvCredentialPrefix + "X=" + secret}); !errors.Is(err, ErrPlaintextCredential) {
		t.Fatalf("plaintext env: %v", err)
	}
	envSealed, _ := k1.Seal("x", secret)
	if err := ve.LoadEnv([]string{EnvCredentialPrefix + "X=" + envSealed}); err != nil {
		t.Fatalf("sealed env: %v", err)
	}

	// rotation: seal the plaintext file with the old key, then put the new
	// key first, re-seal, and drop the old key.
	if err := RotateVaultFile(file, k1); err != nil {
		t.Fatal(err)
	}
	both, _ := ParseKeyring(newKeyS, oldKey)
	if err := RotateVaultFile(file, both); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), secret) || strings.Count(string(b), SealedPrefix) != 2 {
		t.Fatalf("rotated file: %s", b)
	}
	v, err = load(k2) // the new key alone
	if got, _ := v.resolve(Anonymous, "obj", u); err != nil || got != secret {
		t.Fatalf("after rotation: %v %q", err, got)
	}
	if _, err := load(k1); !errors.Is(err, ErrVaultKey) {
		t.Fatalf("old key still opens the rotated file: %v", err)
	}

	// Config: keys from the environment and a key file.
	kf := filepath.Join(dir, "keys")
	_ = os.WriteFile(kf, []byte("# new first\n"+newKeyS+"\n"), 0o600)
	o, err := Config{CredentialsFile: file, VaultKeyFile: kf}.Options([]string{}, nil)
	if err != nil || o.Vault.size() != 2 {
		t.Fatalf("config: %v", err)
	}
	if _, err := (Config{CredentialsFile: file, VaultKeys: []string{"nope"}}).Options([]string{}, nil); !errors.Is(err, ErrVaultKey) {
		t.Fatalf("bad key in config: %v", err)
	}
}
