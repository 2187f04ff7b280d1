package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestPushCommand: `e2a push` runs the stage as a process of its own
// against a NATS server: a webhook down longer than E2A_PUSH_RETRY_WINDOW
// gets nothing, `e2a push dead` lists the dead-lettered updates (NDJSON,
// no token), and once the webhook is up `e2a push redeliver` posts them in
// order with the config's token, each signed with E2A_PUSH_SIGNING_KEY: go-jose
// verifies every signature over the body received with the JWK Set `e2a
// serve` serves at /.well-known/jwks.json. Its help and a wrong action are
// the command's own.
func TestPushCommand(t *testing.T) {
	if code, out, _ := runBin(t, []string{"E2A_NATS_URL="}, "push", "-h"); code != 0 ||
		!strings.Contains(out, "Usage: e2a push") || !strings.Contains(out, "E2A_PUSH_ALLOW_HOSTS") {
		t.Errorf("e2a push -h: exit %d\n%s", code, out)
	}
	if code, _, errOut := runBin(t, []string{"E2A_NATS_URL="}, "push", "nuke"); code != 2 || !strings.Contains(errOut, `unknown action "nuke"`) {
		t.Errorf("e2a push nuke: exit %d, %s", code, errOut)
	}
	srv, nc := natstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var up atomic.Bool
	var mu sync.Mutex
	var got []string
	type signed struct {
		sig  string
		body []byte
	}
	var sigs []signed
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Get(push.HeaderEventID)+" "+r.Header.Get(push.HeaderTokenV1))
		sigs = append(sigs, signed{r.Header.Get(push.HeaderSignature), body})
		mu.Unlock()
	}))
	defer hook.Close()
	// The config's token is sealed with a key the stage reads from
	// E2A_PUSH_SEAL_KEY's file: it delivers the token as given.
	sealKey := bytes.Repeat([]byte{5}, 32)
	sealFile := filepath.Join(t.TempDir(), "seal.key")
	if err := os.WriteFile(sealFile, []byte(base64.StdEncoding.EncodeToString(sealKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := push.NewStore(ctx, nc, push.WithAllowHosts("127.0.0.1"), push.WithSealKey(sealKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, "alice", push.Config{TaskID: "t1", URL: hook.URL, Token: "tok-cli"}); err != nil {
		t.Fatal(err)
	}
	env := joinEnv(srv.ClientURL(), "E2A_PUSH_ALLOW_HOSTS=127.0.0.1",
		"E2A_PUSH_RETRY_WINDOW=200ms", push.SigningKeyEnv+"="+pushtest.SigningKeyFile(t), push.SealKeyEnv+"="+sealFile)
	stageLog := &testkit.Buffer{}
	stage := exec.CommandContext(ctx, e2aBin, "push")
	stage.Env = append(os.Environ(), env...)
	stage.Stderr = stageLog
	if err := stage.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stage.Process.Signal(os.Interrupt)
		_ = stage.Wait()
		if t.Failed() {
			t.Logf("e2a push's log:\n%s", stageLog)
		}
	}()
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- agent.Run(agentCtx, nc, "cli", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			for i := range 3 {
				if err := w.Chunk("text", fmt.Sprintf("c%d;", i)); err != nil {
					return err
				}
			}
			return w.Complete(nil)
		}))
	}()
	defer func() { stopAgent(); <-agentDone }()
	js := natstest.JetStream(t, nc)
	testkit.Eventually(t, 20*time.Second, "the push consumer", func() bool {
		_, err := js.Consumer(ctx, "E2A_RESPONSES", push.DefaultConsumer)
		return err == nil
	})
	en := &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: uuid.NewString(), Method: "message/stream",
		IsStream: true, UserID: "alice", TaskID: "t1", Channel: "test", Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}
	if _, err := ingress.NewPublisher(js, 10*time.Second).Publish(ctx, "cli", en); err != nil {
		t.Fatal(err)
	}
	var lines []string
	testkit.Eventually(t, 30*time.Second, "the final update dead-lettered", func() bool {
		_, out, _ := runBin(t, env, "push", "dead", "--principal", "alice")
		lines = strings.Split(strings.TrimSpace(out), "\n")
		return strings.Contains(lines[len(lines)-1], "TASK_STATE_COMPLETED")
	})
	var ids []string
	for _, l := range lines {
		var d push.DeadLetter
		if err := json.Unmarshal([]byte(l), &d); err != nil || strings.Contains(l, "tok-cli") {
			t.Fatalf("dead letter line %q: %v (or the token)", l, err)
		}
		ids = append(ids, d.EventID)
	}
	up.Store(true)
	code, out, errOut := runBin(t, env, "push", "redeliver", "--principal", "alice")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("delivered %d,", len(ids))) {
		t.Fatalf("e2a push redeliver: exit %d\n%s%s", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, id := range ids {
		if i >= len(got) || got[i] != id+" tok-cli" {
			t.Fatalf("the webhook got %q, want the dead letters %q in order with the token", got, ids)
		}
	}
	if _, out, errOut := runBin(t, env, "push", "dead"); strings.TrimSpace(out) != "" || !strings.Contains(errOut, "no dead-lettered updates") {
		t.Errorf("dead letters left: %s (stderr %q)", out, errOut)
	}
	serve := startE2A(t, serveAddr, append(slices.Clone(env), "E2A_API_KEYS=tester:push-key-7c1e0a9b3d5f", "E2A_LOG_LEVEL=info"), "serve")
	verifySignatures(t, serve.url+push.JWKSPath, len(sigs), func(i int) (string, []byte) { return sigs[i].sig, sigs[i].body })
}

// verifySignatures verifies the n detached signatures over their bodies
// with go-jose, with the JWK Set served at jwksURL.
func verifySignatures(t *testing.T, jwksURL string, n int, get func(i int) (string, []byte)) {
	t.Helper()
	set, _, _ := pushtest.FetchJWKS(t, jwksURL)
	if n == 0 {
		t.Fatal("no signed delivery")
	}
	for i := range n {
		sig, body := get(i)
		if _, _, err := pushtest.Verify(set, sig, body); err != nil {
			t.Errorf("delivery %d: signature %q: %v", i, sig, err)
		}
	}
}

// TestPushDeadBadArguments: filters and limits push dead and redeliver
// cannot take are bad arguments (exit 2), said before connecting. A --task
// without --principal selected the anonymous principal's task, exit 0
// (under auth, redeliver posted nothing: "delivered 0"), where the help
// nests --task in --principal and says that without --principal every
// principal's updates are acted on; a --config without --task and a
// --limit out of 1..10000 were refused by the push package after
// connecting, exit 1; --limit with redeliver and the filters with the
// stage (no action) were dropped without a word. --principal "" still
// names the anonymous principal.
func TestPushDeadBadArguments(t *testing.T) {
	cfg, _ := auditEnv(t)
	cfg.HTTPAddr = "127.0.0.1:0" // the stage's, were it started
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"dead", "--task", "t1"},
		{"redeliver", "--task", "t1"},
		{"redeliver", "--config", "c1"},
		{"dead", "--principal", "alice", "--config", "c1"},
		{"dead", "--limit", "0"},
		{"dead", "--limit", "10001"},
		{"--limit", "-1", "dead"},
		{"redeliver", "--limit", "5"},
		{"--principal", "alice"},
	} {
		if code := exitCode(runPush(ctx, cfg, args, io.Discard), io.Discard); code != exitUsage {
			t.Errorf("e2a push %q: exit %d, want %d (bad arguments)", args, code, exitUsage)
		}
	}
	for _, args := range [][]string{
		{"dead", "--principal", "", "--task", "t1"},
		{"redeliver", "--principal", "alice", "--task", "t1", "--config", "c1"},
		{"dead", "--limit", "10000"},
	} {
		if err := runPush(ctx, cfg, args, io.Discard); err != nil {
			t.Errorf("e2a push %q: %v, want exit 0", args, err)
		}
	}
}
