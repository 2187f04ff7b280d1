package push

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A sealed value opens only where it was sealed: its task key (so its
// principal), config id and field. Copied into another principal's
// config, or from token to credentials, it does not open; nor once
// changed.
func TestSealBinding(t *testing.T) {
	s, err := newSealer(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	v := s.seal("secret", secretAD("cfg.alice.t1", "c1", "token"))
	if !strings.HasPrefix(v, sealPrefix) || strings.Contains(v, "secret") {
		t.Fatalf("sealed %q", v)
	}
	if got, err := s.open(v, secretAD("cfg.alice.t1", "c1", "token")); err != nil || got != "secret" {
		t.Fatalf("opened %q %v", got, err)
	}
	tampered := v[:len(v)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(v, "AA")]
	for name, c := range map[string]struct{ v, ad string }{
		"another principal's key": {v, secretAD("cfg.mallory.t1", "c1", "token")},
		"another config":          {v, secretAD("cfg.alice.t1", "c2", "token")},
		"another field":           {v, secretAD("cfg.alice.t1", "c1", "credentials")},
		"changed":                 {tampered, secretAD("cfg.alice.t1", "c1", "token")},
		"cut":                     {sealPrefix + "AAAA", secretAD("cfg.alice.t1", "c1", "token")},
	} {
		if got, err := s.open(c.v, c.ad); !errors.Is(err, errSealed) {
			t.Errorf("%s: %q %v, want errSealed", name, got, err)
		}
	}
	if got, err := (*sealer)(nil).open(v, secretAD("cfg.alice.t1", "c1", "token")); !errors.Is(err, errSealed) {
		t.Errorf("no key: %q %v", got, err)
	}
	if got := (*sealer)(nil).seal("plain", "ad"); got != "plain" {
		t.Errorf("no key seals %q", got)
	}
	if got := s.seal("", "ad"); got != "" {
		t.Errorf("an empty value sealed %q", got)
	}
}
