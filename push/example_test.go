package push_test

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	a2a "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// The A2A layers keep a task's push notification configs in a Store,
// always on behalf of the caller's principal. Create checks the webhook
// URL (https, or a host of the allow-list, here the loopback address of
// a development receiver) and assigns an id; Get and List read the
// principal's configs back, and another principal's config is not found,
// exactly like one that does not exist.
func ExampleStore() {
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	store, err := push.NewStore(ctx, mem.Conn, push.WithAllowHosts("127.0.0.1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := store.Create(ctx, "alice", push.Config{
		TaskID: "task-1",
		ID:     "hook-1",
		URL:    "http://127.0.0.1:8080/hooks/a2a?key=k-123",
		Token:  "tok-123",
		Auth:   &push.Auth{Scheme: "bearer", Credentials: "s3cr3t"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// String names a config without its path, query, token or credentials.
	fmt.Println(c)
	fmt.Println("version:", c.Version, "auth scheme:", c.Auth.Scheme)

	got, err := store.Get(ctx, "alice", "task-1", "hook-1")
	fmt.Println("get:", got.URL, got.Token, err)
	list, next, err := store.List(ctx, "alice", "task-1", 0, "")
	fmt.Println("list:", len(list), list[0].ID, next == "", err)

	// Another principal cannot read alice's config.
	_, err = store.Get(ctx, "bob", "task-1", "hook-1")
	fmt.Println("bob:", errors.Is(err, push.ErrNotFound), push.KindOf(err) == push.KindNotFound)

	// Webhooks in private networks are refused (unless allow-listed), and
	// so is plain http to a host that is not.
	for _, u := range []string{"https://10.1.2.3/hook", "http://203.0.113.7/hook"} {
		_, err = store.Create(ctx, "alice", push.Config{TaskID: "task-1", URL: u})
		fmt.Println(errors.Is(err, push.ErrURLRefused), push.KindOf(err) == push.KindInvalidParams, err)
	}

	// Delete removes the config; it is then not found.
	fmt.Println("delete:", store.Delete(ctx, "alice", "task-1", "hook-1"))
	_, err = store.Get(ctx, "alice", "task-1", "hook-1")
	fmt.Println("get:", errors.Is(err, push.ErrNotFound))
	// Output:
	// push config "hook-1" of task "task-1" (http://127.0.0.1:8080/…)
	// version: 1.0 auth scheme: Bearer
	// get: http://127.0.0.1:8080/hooks/a2a?key=k-123 tok-123 <nil>
	// list: 1 hook-1 true <nil>
	// bob: true true
	// true true push: webhook URL refused: host 10.1.2.3 is not an allowed destination (private, loopback, link-local, reserved or unresolvable)
	// true true push: webhook URL refused: http to 203.0.113.7 (https is required unless E2A_PUSH_ALLOW_HOSTS lists the host)
	// delete: <nil>
	// get: true
}

// Run is the delivery stage: every update of a task with push
// notification configs is POSTed to each config's webhook, in the task's
// order. Here a task's config points at a receiver on loopback
// (allow-listed), an agent answers one turn of the task, and the receiver
// gets the turn's updates as A2A v1.0 StreamResponse JSON, with the
// config's token. Delivery is at least once: a receiver drops duplicates
// by their E2A-Event-Id, the same on every attempt.
func ExampleRun() {
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The webhook: record each distinct update, until the task completes.
	var (
		mu        sync.Mutex
		seen      = map[string]bool{}
		updates   []string
		completed = make(chan struct{})
		once      sync.Once
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get(push.HeaderEventID)
		mu.Lock()
		defer mu.Unlock()
		if seen[id] {
			return // a duplicate: already handled
		}
		seen[id] = true
		u := describeUpdate(body)
		updates = append(updates, fmt.Sprintf("%s token=%s %s", id, r.Header.Get(push.HeaderTokenV1), u))
		if strings.HasSuffix(u, string(a2a.TaskStateCompleted)) {
			once.Do(func() { close(completed) })
		}
	}))
	defer hook.Close()

	// The task's config, stored before the turn is published so that the
	// turn's first update is delivered.
	store, err := push.NewStore(ctx, mem.Conn, push.WithAllowHosts("127.0.0.1"))
	if err != nil {
		panic(err)
	}
	if _, err := store.Create(ctx, "alice", push.Config{TaskID: "task-1", URL: hook.URL + "/a2a", Token: "tok-123"}); err != nil {
		panic(err)
	}

	// One replica of the stage, and an agent pool "echo" that streams the
	// words of its "text" param.
	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := push.Run(runCtx, mem.Conn, push.WithAllowHosts("127.0.0.1")); err != nil {
			fmt.Println("Run:", err)
		}
	})
	echo := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for _, word := range strings.Fields(env.ParamString("text")) {
			if err := w.Chunk(e2a.DeltaText, word); err != nil {
				return err
			}
		}
		return w.Complete(nil)
	})
	wg.Go(func() { _ = agent.Run(runCtx, mem.Conn, "echo", echo, agent.WithCoalesce(0, 0)) })

	// A turn of alice's task task-1, published as a front door does.
	env := &e2a.Envelope{
		RequestID: "req-1", Method: "message/stream", IsStream: true,
		UserID: "alice", TaskID: "task-1", ContextID: "ctx-1",
		Params:     map[string]any{"text": "hello world"},
		Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A},
	}
	if _, err := ingress.NewPublisher(mem.JetStream, 10*time.Second).Publish(ctx, "echo", env); err != nil {
		panic(err)
	}

	select {
	case <-completed:
	case <-ctx.Done():
		fmt.Println("no completed update")
	}
	stopRun()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, u := range updates {
		fmt.Println(u)
	}
	// Output:
	// req-1:0:0 token=tok-123 artifact-update task-1 "hello"
	// req-1:1:0 token=tok-123 artifact-update task-1 "world"
	// req-1:2:0 token=tok-123 status-update task-1 TASK_STATE_COMPLETED
}

// describeUpdate summarizes an A2A v1.0 StreamResponse, decoded with the
// A2A Go SDK as a receiver would: the task's state or the artifact's text.
func describeUpdate(body []byte) string {
	var sr a2a.StreamResponse
	if err := json.Unmarshal(body, &sr); err != nil {
		return "not a StreamResponse: " + err.Error()
	}
	switch e := sr.Event.(type) {
	case *a2a.TaskStatusUpdateEvent:
		return fmt.Sprintf("status-update %s %s", e.TaskID, e.Status.State)
	case *a2a.TaskArtifactUpdateEvent:
		var text strings.Builder
		for _, p := range e.Artifact.Parts {
			text.WriteString(p.Text())
		}
		return fmt.Sprintf("artifact-update %s %q", e.TaskID, text.String())
	}
	return fmt.Sprintf("%T", sr.Event)
}

// With a Signer (WithSigner) every delivery carries E2A-Signature, a
// detached JWS over the body as sent. A receiver fetches the pipeline's
// JWK Set (served at JWKSPath), finds the key of the header's kid, puts
// the base64url body between the two dots and verifies the Ed25519
// signature: here with the standard library alone.
func ExampleSigner() {
	// A fixed key, for a reproducible example; `openssl genpkey -algorithm
	// ed25519` writes such a PKCS #8 PEM file (E2A_PUSH_SIGNING_KEY).
	der, _ := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed([]byte("an example seed of 32 bytes long")))
	signer, err := push.NewSigner(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("kid:", signer.KeyID())

	// The stage signs each body with its event id.
	body := []byte(`{"statusUpdate":{"taskId":"task-1","status":{"state":"TASK_STATE_COMPLETED"}}}`)
	sig := signer.Sign("req-1:2:0", body)

	// The receiver's side: the JWK Set, the header, the signature.
	var set struct {
		Keys []struct{ Kid, X string } `json:"keys"`
	}
	_ = json.Unmarshal(signer.JWKS(), &set)
	protected, signature, _ := strings.Cut(sig, "..")
	hdr, _ := base64.RawURLEncoding.DecodeString(protected)
	fmt.Println("header:", string(hdr))
	var h struct{ Kid, Eid string }
	_ = json.Unmarshal(hdr, &h)

	verify := func(body []byte) bool {
		for _, k := range set.Keys {
			if k.Kid != h.Kid {
				continue
			}
			pub, _ := base64.RawURLEncoding.DecodeString(k.X)
			s, _ := base64.RawURLEncoding.DecodeString(signature)
			signed := protected + "." + base64.RawURLEncoding.EncodeToString(body)
			return ed25519.Verify(pub, []byte(signed), s)
		}
		return false
	}
	fmt.Println("valid:", verify(body))
	fmt.Println("tampered body:", verify([]byte(strings.Replace(string(body), "COMPLETED", "FAILED", 1))))
	// Output:
	// kid: d4SRQ8asVN6-wJusnmoXfkgq99mxMkyPqn8QGY7d50c
	// header: {"alg":"EdDSA","kid":"d4SRQ8asVN6-wJusnmoXfkgq99mxMkyPqn8QGY7d50c","eid":"req-1:2:0"}
	// valid: true
	// tampered body: false
}
