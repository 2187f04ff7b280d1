package push_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	a2a "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// pushKV is every value the E2A_PUSH bucket holds, as stored.
func pushKV(t *testing.T, e *env) [][]byte {
	t.Helper()
	kv, err := e.js.KeyValue(tctx(t), streams.PushBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, k := range keys {
		if v, err := kv.Get(tctx(t), k); err == nil {
			out = append(out, v.Value())
		}
	}
	return out
}

// TestSealedSecrets: with a seal key (E2A_PUSH_SEAL_KEY) a config's token
// and credentials are stored sealed, not as the client gave them (every
// NATS user that may read E2A_PUSH, its replicas and backups held them);
// the owner reads them back as given, and the stage, with the same key,
// sends them. A store without the key, or with another, answers
// ErrUnavailable for the sealed config, never a sealed value as a token.
func TestSealedSecrets(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	e := newEnv(t, push.WithSealKey(key))
	e.startStage(push.WithSealKey(key))
	r := pushtest.NewReceiver(t)
	const token, cred = "tok-0123456789-secret", "cred-9876543210-secret"
	v1 := &a2a.PushConfig{TaskID: "t1", ID: "c1", URL: r.URL + "/v1", Token: token,
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: cred}}
	if _, err := e.store.Create(tctx(t), "alice", push.FromV1(v1)); err != nil {
		t.Fatal(err)
	}
	for _, v := range pushKV(t, e) {
		if bytes.Contains(v, []byte(token)) || bytes.Contains(v, []byte(cred)) {
			t.Fatalf("E2A_PUSH holds a secret as given: %s", v)
		}
	}
	got, err := e.store.Get(tctx(t), "alice", "t1", "c1")
	if err != nil || got.Token != token || got.Auth == nil || got.Auth.Credentials != cred {
		t.Fatalf("the owner reads back %+v %v", got, err)
	}
	e.turn("alice", "t1", "", "", 2)
	for _, d := range r.Await(t, 20*time.Second, "/v1", "TASK_STATE_COMPLETED") {
		if d.Token != token || d.Auth != "Bearer "+cred {
			t.Fatalf("delivered with token %q, Authorization %q", d.Token, d.Auth)
		}
	}

	for name, opts := range map[string][]push.Option{
		"no key":      nil,
		"another key": {push.WithSealKey(bytes.Repeat([]byte{8}, 32))},
	} {
		other, err := push.NewStore(tctx(t), e.nc, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := other.Get(tctx(t), "alice", "t1", "c1"); !errors.Is(err, push.ErrUnavailable) {
			t.Errorf("%s: %+v %v, want ErrUnavailable", name, c, err)
		}
	}
}

// TestSealedWebhookURL: with a seal key the webhook's URL is stored sealed
// too: its path or query may be the receiver's secret (Slack's and
// Discord's hooks), which the envelope, the console and an audit read
// never show, and E2A_PUSH held it as given (a NATS user that may read
// the bucket, or a backup, learned it, where push.md says they learn
// nothing). The owner reads it back, the stage posts to it, the console
// names its host.
func TestSealedWebhookURL(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	e := newEnv(t, push.WithSealKey(key))
	e.startStage(push.WithSealKey(key))
	r := pushtest.NewReceiver(t)
	url := r.URL + "/hooks/T0-PATHSECRET?sig=QUERYSECRET"
	if _, err := e.store.Create(tctx(t), "alice", push.Config{TaskID: "t1", ID: "c1", URL: url}); err != nil {
		t.Fatal(err)
	}
	for _, v := range pushKV(t, e) {
		if bytes.Contains(v, []byte("PATHSECRET")) || bytes.Contains(v, []byte("QUERYSECRET")) {
			t.Fatalf("E2A_PUSH holds the webhook URL as given: %s", v)
		}
	}
	if got, err := e.store.Get(tctx(t), "alice", "t1", "c1"); err != nil || got.URL != url {
		t.Fatalf("the owner reads back %+v %v, want the URL %s", got, err, url)
	}
	e.turn("alice", "t1", "", "", 2)
	r.Await(t, 20*time.Second, "/hooks/T0-PATHSECRET", "TASK_STATE_COMPLETED")
	ds, err := e.store.Deliveries(tctx(t), "alice", "t1")
	if err != nil || len(ds) != 1 || !strings.HasPrefix(r.URL, "http://"+ds[0].Host) {
		t.Fatalf("the console's deliveries: %+v %v, want the host of %s", ds, err, r.URL)
	}
	if other, err := push.NewStore(tctx(t), e.nc); err != nil {
		t.Fatal(err)
	} else if c, err := other.Get(tctx(t), "alice", "t1", "c1"); !errors.Is(err, push.ErrUnavailable) {
		t.Errorf("no key: %+v %v, want ErrUnavailable", c, err)
	}
}

// A config stored before a key was set is read as it is, and sealed when
// its task's configs are next written.
func TestSealKeyAddedLater(t *testing.T) {
	e := newEnv(t)
	r := pushtest.NewReceiver(t)
	const token = "tok-plain-0123456789"
	if _, err := e.store.Create(tctx(t), "alice", push.Config{TaskID: "t1", ID: "old", URL: r.URL, Token: token}); err != nil {
		t.Fatal(err)
	}
	sealed, err := push.NewStore(tctx(t), e.nc, push.WithAllowHosts("127.0.0.1"), push.WithSealKey(bytes.Repeat([]byte{7}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := sealed.Get(tctx(t), "alice", "t1", "old"); err != nil || c.Token != token {
		t.Fatalf("a config stored unsealed, read with a key: %+v %v", c, err)
	}
	if _, err := sealed.Create(tctx(t), "alice", push.Config{TaskID: "t1", ID: "new", URL: r.URL, Token: "tok-new-0123456789"}); err != nil {
		t.Fatal(err)
	}
	for _, v := range pushKV(t, e) {
		if bytes.Contains(v, []byte(token)) {
			t.Fatalf("the task's configs written again with a key still hold a token as given: %s", v)
		}
	}
	if c, err := sealed.Get(tctx(t), "alice", "t1", "old"); err != nil || c.Token != token {
		t.Fatalf("the old config after its task's configs were sealed: %+v %v", c, err)
	}
}

// Bad keys are refused as options are.
func TestSealKeyOption(t *testing.T) {
	for _, k := range [][]byte{nil, make([]byte, 16), make([]byte, 33)} {
		if _, err := push.NewStore(context.Background(), nil, push.WithSealKey(k)); !errors.Is(err, push.ErrInvalidOption) {
			t.Errorf("key of %d bytes: %v, want ErrInvalidOption", len(k), err)
		}
	}
}

// TestSealedLookingSecretRefused: a token or credentials starting as a
// sealed value does ("e2a-sealed:v1:") was stored as given by a store
// without a seal key, and then could not be opened: every read of the
// task's configs answered ErrUnavailable (its other configs unreadable
// and undelivered, each of its task's messages nak'd by the stage for
// ever, holding the shared consumer's MaxAckPending). It is invalid
// params, as a token HTTP would not send as given.
func TestSealedLookingSecretRefused(t *testing.T) {
	e := newEnvOn(t)
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "t1", ID: "good", URL: r.srv.URL})
	for _, c := range []push.Config{
		{TaskID: "t1", ID: "tok", URL: r.srv.URL, Token: "e2a-sealed:v1:AAAA"},
		{TaskID: "t1", ID: "cred", URL: r.srv.URL, Auth: &push.Auth{Scheme: "Bearer", Credentials: "e2a-sealed:v1:AAAA"}},
	} {
		if _, err := e.store.Create(tctx(t), "alice", c); !errors.Is(err, push.ErrInvalidConfig) {
			t.Errorf("config %s: err %v, want ErrInvalidConfig", c.ID, err)
		}
	}
	// A URL so is no absolute URL (its scheme's rest is opaque): refused
	// by the URL rules, now that a URL is sealed too.
	if _, err := e.store.Create(tctx(t), "alice", push.Config{TaskID: "t1", ID: "url", URL: "e2a-sealed:v1:AAAA"}); !errors.Is(err, push.ErrURLRefused) {
		t.Errorf("config url: err %v, want ErrURLRefused", err)
	}
	if got, _, err := e.store.List(tctx(t), "alice", "t1", 10, ""); err != nil || len(got) != 1 {
		t.Fatalf("the task's configs: %v, %v; want the good one", got, err)
	}
}
