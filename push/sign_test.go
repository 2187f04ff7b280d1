package push_test

import (
	"bytes"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestSignedDeliveries: with a signing key every delivery carries a
// detached JWS that go-jose verifies over the body as received, with the
// key of its kid from the JWK Set the Signer serves; a changed body or
// another event's signature does not verify.
func TestSignedDeliveries(t *testing.T) {
	signer, err := push.LoadSigner(pushtest.SigningKeyFile(t))
	if err != nil {
		t.Fatal(err)
	}
	jwksSrv := httptest.NewServer(signer)
	t.Cleanup(jwksSrv.Close)
	set, resp, raw := pushtest.FetchJWKS(t, jwksSrv.URL+push.JWKSPath)
	if ct := resp.Header.Get("Content-Type"); ct != "application/jwk-set+json" {
		t.Errorf("JWKS content type %q", ct)
	}
	keys := set.Key(signer.KeyID())
	if len(keys) != 1 || !keys[0].IsPublic() || keys[0].Algorithm != "EdDSA" {
		t.Fatalf("JWKS %s: keys of kid %s %+v", raw, signer.KeyID(), keys)
	}
	if bytes.Contains(raw, []byte(`"d"`)) {
		t.Fatalf("JWKS holds the private part: %s", raw)
	}

	e := newEnv(t)
	e.startStage(push.WithSigner(signer))
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "t1", URL: r.srv.URL, Token: "tok"})
	e.turn("alice", "t1", "", "", 3)
	testkit.Eventually(t, 30*time.Second, "completed", func() bool { return completedCount(t, push.V1, r.accepted()) == 1 })
	got := r.accepted()
	verify := func(sig string, body []byte) ([]byte, *jose.JSONWebSignature, error) {
		return pushtest.Verify(set, sig, body)
	}
	for _, d := range got {
		p, jws, err := verify(d.signature, d.body)
		if err != nil {
			t.Fatalf("event %s: signature %q does not verify: %v", d.eventID, d.signature, err)
		}
		if !bytes.Equal(p, d.body) || jws.Signatures[0].Protected.KeyID != signer.KeyID() ||
			jws.Signatures[0].Protected.ExtraHeaders["eid"] != d.eventID {
			t.Errorf("event %s: protected header %+v", d.eventID, jws.Signatures[0].Protected)
		}
		if _, _, err := verify(d.signature, append(bytes.Clone(d.body), ' ')); err == nil {
			t.Errorf("event %s: a changed body verifies", d.eventID)
		}
	}
	if len(got) > 1 && got[0].signature == got[1].signature {
		t.Error("two events share a signature")
	}
	if !strings.Contains(got[0].signature, "..") {
		t.Errorf("signature %q is not detached", got[0].signature)
	}
}

// TestSignerRefusesBadKeys: no file, no PEM, and a key that is not
// Ed25519 are ErrInvalidOption, without the key in the message;
// WithSigner(nil) too.
func TestSignerRefusesBadKeys(t *testing.T) {
	if _, err := push.LoadSigner(filepath.Join(t.TempDir(), "none.pem")); !errors.Is(err, push.ErrInvalidOption) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := push.NewSigner([]byte("not a key")); !errors.Is(err, push.ErrInvalidOption) {
		t.Errorf("no PEM: %v", err)
	}
	bad := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("secret-bytes")})
	if _, err := push.NewSigner(bad); !errors.Is(err, push.ErrInvalidOption) || strings.Contains(err.Error(), "secret-bytes") {
		t.Errorf("garbage key: %v", err)
	}
	_, nc := natstest.RunServer(t)
	if err := push.Run(tctx(t), nc, push.WithSigner(nil)); !errors.Is(err, push.ErrInvalidOption) {
		t.Errorf("WithSigner(nil): %v", err)
	}
}
