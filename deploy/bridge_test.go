package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// bridgeExample is the Deployment of k8s/agent-bridge.example.yaml and the
// container that runs the pool.
func bridgeExample(t *testing.T) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	d := loadManifests(t).deployment("e2a-agent-bridge")
	if d == nil || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("k8s/agent-bridge.example.yaml: no Deployment e2a-agent-bridge with one container")
	}
	return d, d.Spec.Template.Spec.Containers[0]
}

// upstreamVars are the E2A_UPSTREAM_* variables cmd/e2a reads (the
// envconfig tags of UpstreamConfig in cmd/e2a/config.go), with whether
// each is a secret (API_KEY, HEADERS).
func upstreamVars(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "cmd", "e2a", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "type UpstreamConfig struct {")
	if !ok {
		t.Fatal("cmd/e2a/config.go: no UpstreamConfig")
	}
	body, _, _ = strings.Cut(body, "\n}\n")
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`envconfig:"E2A_UPSTREAM_([A-Z_]+)"`).FindAllStringSubmatch(body, -1) {
		out["E2A_UPSTREAM_"+m[1]] = m[1] == "API_KEY" || m[1] == "HEADERS"
	}
	if len(out) < 5 {
		t.Fatalf("cmd/e2a/config.go: UpstreamConfig variables %v", out)
	}
	return out
}

// TestBridgeExample checks the example bridge pool of deploy/k8s and
// compose against what `e2a agent` reads: every E2A_UPSTREAM_* variable
// is one of cmd/e2a's, the upstream's key and headers come from the
// Secret of upstream-bridge.secret.example.yaml (never a value in a
// manifest), and the pool runs as the NATS user agent-bridge.
func TestBridgeExample(t *testing.T) {
	vars := upstreamVars(t)
	d, c := bridgeExample(t)
	m := loadManifests(t)
	var secret *corev1.Secret
	for _, s := range m.secrets {
		if s.Name == "e2a-upstream-bridge" {
			secret = s
		}
	}
	if secret == nil {
		t.Fatal("no example Secret e2a-upstream-bridge")
	}
	seen := map[string]bool{}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "E2A_UPSTREAM_") {
			continue
		}
		secretVar, known := vars[e.Name]
		if !known {
			t.Errorf("%s: %s is not read by e2a (cmd/e2a/config.go UpstreamConfig)", d.Name, e.Name)
		}
		seen[e.Name] = true
		ref := e.ValueFrom
		switch {
		case secretVar && (e.Value != "" || ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != secret.Name):
			t.Errorf("%s: secret %s not from the secret %s: %+v", d.Name, e.Name, secret.Name, e)
		case secretVar && (ref.SecretKeyRef.Optional == nil || !*ref.SecretKeyRef.Optional) && secret.StringData[ref.SecretKeyRef.Key] == "":
			t.Errorf("%s: %s reads key %q, not in the example secret", d.Name, e.Name, ref.SecretKeyRef.Key)
		case !secretVar && e.Value == "":
			t.Errorf("%s: %s has no value", d.Name, e.Name)
		}
	}
	for _, want := range []string{"E2A_UPSTREAM_KIND", "E2A_UPSTREAM_URL", "E2A_UPSTREAM_MODEL", "E2A_UPSTREAM_API_KEY"} {
		if !seen[want] {
			t.Errorf("%s: no %s", d.Name, want)
		}
	}
	if u := envVar(c, "E2A_NATS_USER").Value; u != "agent-bridge" || !slices.Equal(c.Args[:3], []string{"agent", "--pool", "bridge"}) {
		t.Errorf("%s: user %q args %q", d.Name, u, c.Args)
	}

	// Compose: the same variables; the key from the shell, never dev.env.
	data, err := os.ReadFile(filepath.Join("compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), "\n  agent-bridge:\n")
	if i < 0 {
		t.Fatal("compose.yaml: no service agent-bridge")
	}
	for _, l := range regexp.MustCompile(`E2A_UPSTREAM_[A-Z_]+`).FindAllString(string(data[i:]), -1) {
		if _, ok := vars[l]; !ok {
			t.Errorf("compose.yaml: %s is not read by e2a", l)
		}
	}
	env, err := os.ReadFile(filepath.Join("compose", "dev.env"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^E2A_UPSTREAM_API_KEY=$`).Match(env) {
		t.Error("dev.env: E2A_UPSTREAM_API_KEY must stay empty (exported in the shell)")
	}
}

// modelUpstream is an OpenAI-compatible chat completions server on
// httptest that answers every call with the recorded wire-format stream
// bridge/openai/testdata/text.sse (read by openai-go's accumulator in
// bridge/openai's tests) and records each call's messages and headers.
type modelUpstream struct {
	*httptest.Server
	sse   []byte
	mu    sync.Mutex
	calls []modelCall
}

type modelCall struct {
	header   http.Header
	messages []string // "role: content"
}

func newModelUpstream(t *testing.T) *modelUpstream {
	t.Helper()
	sse, err := os.ReadFile(filepath.Join("..", "bridge", "openai", "testdata", "text.sse"))
	if err != nil {
		t.Fatal(err)
	}
	u := &modelUpstream{sse: sse}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *modelUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	c := modelCall{header: r.Header.Clone()}
	for _, m := range body.Messages {
		c.messages = append(c.messages, m.Role+": "+m.Content)
	}
	u.mu.Lock()
	u.calls = append(u.calls, c)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for ev := range bytes.SplitAfterSeq(u.sse, []byte("\n\n")) {
		_, _ = w.Write(ev)
		w.(http.Flusher).Flush()
	}
}

func (u *modelUpstream) recorded() []modelCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.calls)
}

// TestBridgePoolDeployment runs a bridge pool as the example manifest
// configures it, on the shipped NATS configuration: three nats-server
// processes, `e2a streams apply` as admin, `e2a agent --pool bridge` as
// agent-bridge with the manifest's E2A_UPSTREAM_* (the URL pointing at an
// OpenAI-compatible server replaying a recorded stream, the key and a
// header as the Secret would give them), `e2a serve` as serve. serve
// answers the pool's card from what the pool published in E2A_BRIDGE and
// lists the pool on the pipeline's card; the second turn of an E2A session
// sends the model the first turn as the pipeline stored it (the pool's
// direct gets on E2A_REQUESTS and E2A_RESPONSES, its conversation record in
// E2A_BRIDGE). No log holds a permissions violation, the key or the
// header; no stored message holds them. The ingress user reads the card
// and lists the pool's consumer; then each user is refused what it must
// not do with E2A_BRIDGE.
func TestBridgePoolDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node nats-server cluster and 3 e2a processes")
	}
	c := startNATSCluster(t, 3)
	d := newDeployment(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d.run("streams-apply", "admin", 60*time.Second, "streams", "apply")

	up := newModelUpstream(t)
	upstreamKey, headerSecret := "sk-"+randomSecret(t), randomSecret(t)
	_, ct := bridgeExample(t)
	env := map[string]string{}
	for _, e := range ct.Env {
		if strings.HasPrefix(e.Name, "E2A_UPSTREAM_") && e.Value != "" {
			env[e.Name] = e.Value
		}
	}
	env["E2A_UPSTREAM_URL"] = up.URL + "/v1"
	env["E2A_UPSTREAM_API_KEY"] = upstreamKey
	env["E2A_UPSTREAM_HEADERS"] = "X-Upstream-Secret: " + headerSecret
	pool := d.start("agent-bridge-1", "agent-bridge", env, ct.Args...)
	apiKey := randomSecret(t)
	serve := d.start("serve-1", "serve", map[string]string{"E2A_API_KEYS": "tester:" + apiKey}, "serve")
	for _, p := range []*e2aProc{pool, serve} {
		d.waitReady(p, 30*time.Second)
	}
	get := func(path string) (int, string) {
		t.Helper()
		return bridgeDo(t, ctx, http.MethodGet, serve.url()+path, apiKey, "")
	}
	code, card := get("/pools/bridge/.well-known/agent-card.json")
	if code != http.StatusOK || !strings.Contains(card, `"name":"`+env["E2A_UPSTREAM_NAME"]+`"`) || !strings.Contains(card, "/pools/bridge") {
		t.Errorf("the pool's card: %d %s", code, card)
	}
	// The pipeline's card lists the pools it read at most 5 s before
	// (ingress's poolListTTL): a card served before the pool announced
	// itself may be that old.
	var rootCode int
	var rootCard string
	if !testkit.Until(15*time.Second, func() bool {
		rootCode, rootCard = get("/.well-known/agent-card.json")
		return rootCode == http.StatusOK && strings.Contains(rootCard, "/pools/bridge/.well-known/agent-card.json")
	}) {
		t.Errorf("the pipeline's card does not list the pool: %d %s", rootCode, rootCard)
	}

	const answer = "Hello! How can I help you today?"
	turn := func(id, text string) {
		t.Helper()
		body := `{"request_id":"` + id + `","method":"chat.send","session_id":"s-1","params":{"content":"` + text + `"}}`
		code, resp := bridgeDo(t, ctx, http.MethodPost, serve.url()+"/pools/bridge/v1/requests?wait=true", apiKey, body)
		if code != http.StatusOK || !strings.Contains(resp, `"is_final":true`) || !strings.Contains(resp, "e2a.complete") {
			t.Fatalf("%s: %d %s", id, code, resp)
		}
	}
	turn("bridge-1", "my name is Alice")
	turn("bridge-2", "what is my name?")
	calls := up.recorded()
	if len(calls) != 2 {
		t.Fatalf("the model got %d calls, want 2", len(calls))
	}
	if want := []string{"user: my name is Alice", "assistant: " + answer, "user: what is my name?"}; !slices.Equal(calls[1].messages, want) {
		t.Errorf("second turn sent the model %q, want %q", calls[1].messages, want)
	}
	for i, call := range calls {
		if call.header.Get("Authorization") != "Bearer "+upstreamKey || call.header.Get("X-Upstream-Secret") != headerSecret {
			t.Errorf("call %d: the upstream's key or header missing", i)
		}
	}
	d.checkLogs()
	for _, p := range []*e2aProc{pool, serve} {
		for _, f := range []string{p.stderrPath(), p.stdoutPath()} {
			if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(upstreamKey)) || bytes.Contains(b, []byte(headerSecret)) {
				t.Errorf("%s: the upstream's key or header is in %s", p.name, f)
			}
		}
	}
	adminNC, _ := c.connect("admin")
	adminJS, _ := jetstream.New(adminNC)
	for _, s := range []string{upstreamKey, headerSecret} {
		if n := natstest.StoredWith(t, adminJS, s); n > 0 {
			t.Errorf("a secret of the upstream is in %d stored messages", n)
		}
	}
	checkBridgeIngress(t, ctx, c, env["E2A_UPSTREAM_NAME"])
	checkBridgeRefusals(t, c)
}

// bridgeDo sends one HTTP request with the API key and returns the status
// and body.
func bridgeDo(t *testing.T, ctx context.Context, method, url, apiKey, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("X-Api-Key", apiKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkBridgeIngress: the ingress user (ingress alone, without egress)
// reads the pool's card as ingress does (bridge.LookupPool) and lists the
// consumers of E2A_REQUESTS (the pools of the pipeline's card).
func checkBridgeIngress(t *testing.T, ctx context.Context, c *natsCluster, name string) {
	t.Helper()
	nc, _ := c.connect("ingress")
	js, _ := jetstream.New(nc)
	info, found, err := bridge.LookupPool(ctx, js, "bridge")
	if err != nil || !found || info.Name != name || info.Kind != "openai" {
		t.Errorf("ingress reads the pool's card: %+v found %v: %v", info, found, err)
	}
	st, err := js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	var consumers []string
	lister := st.ListConsumers(ctx)
	for ci := range lister.Info() {
		consumers = append(consumers, ci.Name)
	}
	if err := lister.Err(); err != nil || !slices.Contains(consumers, "agent-bridge") {
		t.Errorf("ingress lists the consumers of %s: %v: %v", streams.RequestsStream, consumers, err)
	}
}

// checkBridgeRefusals: what each user may not do with E2A_BRIDGE (after
// checkLogs: the servers log these refusals).
func checkBridgeRefusals(t *testing.T, c *natsCluster) {
	t.Helper()
	for _, o := range []struct{ user, subject string }{
		{"ingress", "$KV.E2A_BRIDGE.pool.bridge"},
		{"ingress", "$JS.API.DIRECT.GET.KV_E2A_BRIDGE.$KV.E2A_BRIDGE.c.x"},
		{"ingress", "$JS.API.STREAM.CREATE.KV_E2A_BRIDGE"},
		{"serve", "$KV.E2A_BRIDGE.c.x"},
		{"serve", "$JS.API.DIRECT.GET.KV_E2A_BRIDGE.$KV.E2A_BRIDGE.c.x"},
		{"agent-bridge", "$KV.E2A_BRIDGE.pool.demo"},
		{"agent-bridge", "$JS.API.DIRECT.GET.KV_E2A_BRIDGE.$KV.E2A_BRIDGE.pool.demo"},
		{"agent-bridge", "$JS.API.STREAM.DELETE.KV_E2A_BRIDGE"},
		{"agent-bridge", "$JS.API.STREAM.PURGE.KV_E2A_BRIDGE"},
		{"agent-bridge", "$JS.API.CONSUMER.CREATE.KV_E2A_BRIDGE"},
		{"agent-bridge", "e2a.req.bridge.x"},
		{"agent-bridge", "$JS.API.CONSUMER.MSG.NEXT.E2A_REQUESTS.agent-demo"},
		{"agent-demo", "$KV.E2A_BRIDGE.c.x"},
		{"agent-demo", "$JS.API.STREAM.CREATE.KV_E2A_BRIDGE"},
	} {
		nc, sink := c.connect(o.user)
		if err := nc.Publish(o.subject, []byte(`{}`)); err != nil {
			t.Fatalf("%s publish %s: %v", o.user, o.subject, err)
		}
		if err := sink.waitFor(3*time.Second, "permissions violation", "publish", o.subject); err != nil {
			t.Errorf("%s may publish to %s: %v", o.user, o.subject, err)
		}
		nc.Close()
	}
}
