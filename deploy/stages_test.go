package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// shippedDeployment is the deployment as deploy/compose and
// deploy/k8s run it, on three nats-server processes with deploy/nats (TLS,
// accounts.conf) and k8s/config.yaml's environment: `e2a streams apply` as
// admin, `e2a serve` as serve (an API key; webhooks on 127.0.0.1 allowed),
// `e2a agent --pool demo` as agent-demo, `e2a agent --pool workflow` as
// agent-workflow. A test adds what it needs (`e2a push` as push).
type shippedDeployment struct {
	c      *natsCluster
	d      *deployment
	serve  *e2aProc
	demo   *e2aProc
	wf     *e2aProc
	apiKey string
	hook   *webhookRecorder
}

// webhookRecorder records the POSTs a webhook receives.
type webhookRecorder struct {
	*httptest.Server
	mu    sync.Mutex
	posts []string
}

func (h *webhookRecorder) bodies() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.posts...)
}

func startShippedDeployment(t *testing.T, serveExtra, wfExtra map[string]string) *shippedDeployment {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a 3-node nats-server cluster and e2a processes")
	}
	c := startNATSCluster(t, 3)
	d := newDeployment(t, c)
	d.run("streams-apply", "admin", 60*time.Second, "streams", "apply")
	hook := &webhookRecorder{}
	hook.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hook.mu.Lock()
		hook.posts = append(hook.posts, string(b))
		hook.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hook.Close)
	rd := &shippedDeployment{c: c, d: d, apiKey: randomSecret(t), hook: hook}
	serveEnv := map[string]string{
		"E2A_API_KEYS":         "tester:" + rd.apiKey,
		"E2A_PUSH_ALLOW_HOSTS": "127.0.0.1",
	}
	for k, v := range serveExtra {
		serveEnv[k] = v
	}
	rd.serve = d.start("serve-1", "serve", serveEnv, "serve")
	rd.demo = d.start("agent-demo-1", "agent-demo", nil, "agent", "--pool", "demo", "--concurrency", "16")
	rd.wf = d.start("agent-workflow-1", "agent-workflow", wfExtra, "agent", "--pool", "workflow", "--concurrency", "4")
	for _, p := range []*e2aProc{rd.serve, rd.demo, rd.wf} {
		d.waitReady(p, 40*time.Second)
	}
	return rd
}

// do sends one request to serve with the API key.
func (rd *shippedDeployment) do(t *testing.T, ctx context.Context, method, path, accept, body string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, rd.serve.url()+path, strings.NewReader(body))
	req.Header.Set("X-Api-Key", rd.apiKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// violations returns the permissions violations the NATS servers and e2a
// processes logged.
func (rd *shippedDeployment) violations() []string {
	var files []string
	rd.d.mu.Lock()
	for _, p := range rd.d.procs {
		files = append(files, p.stderrPath(), p.stdoutPath())
	}
	rd.d.mu.Unlock()
	for _, nd := range rd.c.nodes {
		files = append(files, nd.logPath, filepath.Join(nd.dir, "stderr.log"))
	}
	var out []string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if violation.MatchString(sc.Text()) {
				out = append(out, filepath.Base(filepath.Dir(f))+": "+sc.Text())
			}
		}
		fh.Close()
	}
	return out
}

// a2aV1 posts one A2A v1.0 JSON-RPC call to serve's /a2a/v1 (or the SSE
// answer of a streaming one, unread: the caller reads resp.Body).
func (rd *shippedDeployment) a2aV1(t *testing.T, ctx context.Context, method, params string) (*http.Response, error) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rd.serve.url()+"/a2a/v1", strings.NewReader(body))
	req.Header.Set("X-Api-Key", rd.apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	if strings.HasPrefix(method, "Subscribe") || strings.HasPrefix(method, "SendStreaming") {
		req.Header.Set("Accept", "text/event-stream")
	}
	return http.DefaultClient.Do(req)
}

// v1Answer is an A2A v1.0 JSON-RPC answer: a task, a status update, or an
// error.
type v1Answer struct {
	Result struct {
		Task *struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"task"`
		StatusUpdate *struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"statusUpdate"`
		Tasks []struct {
			ID string `json:"id"`
		} `json:"tasks"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call runs one unary A2A v1.0 call and decodes its answer.
func (rd *shippedDeployment) call(t *testing.T, ctx context.Context, method, params string) (v1Answer, string) {
	t.Helper()
	resp, err := rd.a2aV1(t, ctx, method, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a v1Answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %d %s: %v", method, resp.StatusCode, b, err)
	}
	return a, string(b)
}

// TestDeployListTasksAsServeUser: A2A v1.0 ListTasks (README's endpoint
// table, docs/protocols.md "ListTasks lists the caller's tasks") through
// `e2a serve` connected as the NATS user serve of deploy/nats/accounts.conf,
// as deploy/compose and deploy/k8s run it, on both bindings. ingress's
// TaskStore.list (ingress/tasks.go, ListKeysFiltered on the bucket
// E2A_TASKS) reads the keys with an ordered consumer on KV_E2A_TASKS, which
// the serve and ingress users may create (filtered on the bucket's keys),
// delete and answer the flow control of; nothing is refused.
func TestDeployListTasksAsServeUser(t *testing.T) {
	rd := startShippedDeployment(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, raw := rd.call(t, ctx, "SendMessage", `{"message":{"role":"ROLE_USER","messageId":"list-1","parts":[{"text":"hello"}]}}`)
	if a.Result.Task == nil || a.Result.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("SendMessage: %s", raw)
	}
	id := a.Result.Task.ID

	a, raw = rd.call(t, ctx, "ListTasks", `{"pageSize":10}`)
	found := false
	for _, tk := range a.Result.Tasks {
		found = found || tk.ID == id
	}
	if a.Error != nil || !found {
		t.Errorf("ListTasks through the shipped deployment (serve user) must list the caller's task %s; got %s", id, raw)
	}
	code, body := rd.do(t, ctx, http.MethodGet, "/a2a/v1/tasks?pageSize=10", "", "", "A2A-Version", "1.0")
	if code != http.StatusOK || !strings.Contains(body, id) {
		t.Errorf("GET /a2a/v1/tasks (HTTP+JSON ListTasks) must answer 200 with task %s; got %d %s", id, code, body)
	}
	for _, v := range rd.violations() {
		t.Errorf("the deployment must be refused nothing it needs: %s", v)
	}
}

// TestDeploySubscribeToTaskFollowsNextTurn: SubscribeToTask on an
// input-required task follows the task into its next turn once the
// client's answer starts it, until the task is terminal (A2A v1.0 §3.1.6;
// protocols/a2av1/follow.go), through `e2a serve` as the serve user. The
// follow waits for the next turn with ingress's TaskStore.NextTurn
// (ingress/nextturn.go), a KV watch of the task's record: an ordered
// consumer on KV_E2A_TASKS filtered on the task's key, which the serve
// user may create.
func TestDeploySubscribeToTaskFollowsNextTurn(t *testing.T) {
	rd := startShippedDeployment(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, raw := rd.call(t, ctx, "SendMessage", `{"message":{"role":"ROLE_USER","messageId":"sub-1","parts":[{"text":"ask:input weather"}]}}`)
	if a.Result.Task == nil || a.Result.Task.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("SendMessage asking for input: %s", raw)
	}
	id := a.Result.Task.ID

	resp, err := rd.a2aV1(t, ctx, "SubscribeToTask", `{"id":"`+id+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("SubscribeToTask: %d %s", resp.StatusCode, b)
	}
	events := make(chan string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				events <- strings.TrimSpace(d)
			}
		}
	}()
	next := func() (string, bool) {
		select {
		case ev, ok := <-events:
			return ev, ok
		case <-ctx.Done():
			return "", false
		}
	}
	first, ok := next()
	if !ok || !strings.Contains(first, "TASK_STATE_INPUT_REQUIRED") {
		t.Fatalf("SubscribeToTask's first event: %q", first)
	}
	// The client answers the question in the task.
	if a, raw := rd.call(t, ctx, "SendMessage", `{"message":{"role":"ROLE_USER","messageId":"sub-2","taskId":"`+id+`","parts":[{"text":"sunny"}]}}`); a.Result.Task == nil || a.Result.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("the answer: %s", raw)
	}
	var got []string
	for {
		ev, ok := next()
		if !ok {
			t.Fatalf("SubscribeToTask on an input-required task must follow its next turn to TASK_STATE_COMPLETED; the stream ended after %q", got)
		}
		got = append(got, ev)
		var e v1Answer
		_ = json.Unmarshal([]byte(ev), &e)
		if e.Error != nil {
			t.Fatalf("SubscribeToTask on an input-required task must follow its next turn to TASK_STATE_COMPLETED, not end with an error: %s (violations: %q)", ev, rd.violations())
		}
		if e.Result.StatusUpdate != nil && e.Result.StatusUpdate.Status.State == "TASK_STATE_COMPLETED" ||
			e.Result.Task != nil && e.Result.Task.Status.State == "TASK_STATE_COMPLETED" {
			return
		}
	}
}

// TestDeployWorkflowStoreDataThroughServe: an A2E workflow whose StoreData
// writes localStorage and sessionStorage (workflow/doc.go; the workflow
// pool, `e2a agent --pool workflow`, keeps them in A2E_LOCAL and
// A2E_SESSION) run through the documented REST API, POST
// /api/v1/workflows/execute of `e2a serve`, with the same E2A_WORKFLOW_*
// on serve and on the pool. serve's validator (cmd/e2a/wiring.go
// newWorkflowValidator) knows the pool's storage types without opening
// the buckets, so the workflow runs on the pool and its value is stored.
func TestDeployWorkflowStoreDataThroughServe(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"items":[1,2,3]}`)
	}))
	defer api.Close()
	wfEnv := map[string]string{
		"E2A_WORKFLOW_ALLOWED_HOSTS": strings.TrimPrefix(api.URL, "http://"),
		"E2A_WORKFLOW_ALLOWED_NETS":  "127.0.0.0/8",
	}
	rd := startShippedDeployment(t, wfEnv, wfEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ops := `{"type":"operationUpdate","operationId":"get","operation":{"ApiCall":{"method":"GET","url":"` + api.URL + `/items","outputPath":"/workflow/items"}}}` + "\n" +
		`{"type":"operationUpdate","operationId":"keep","operation":{"StoreData":{"inputPath":"/workflow/items","storage":"localStorage","key":"latest"}}}` + "\n" +
		`{"type":"operationUpdate","operationId":"tmp","operation":{"StoreData":{"inputPath":"/workflow/items","storage":"sessionStorage","key":"v"}}}` + "\n" +
		`{"type":"beginExecution","executionId":"store-1","operationOrder":["get","keep","tmp"]}`
	body, _ := json.Marshal(map[string]string{"workflow": ops})
	code, resp := rd.do(t, ctx, http.MethodPost, "/api/v1/workflows/execute", "", string(body))
	if code != http.StatusOK || !strings.Contains(resp, `"status":"success"`) {
		t.Fatalf("a workflow storing in localStorage and sessionStorage through e2a serve's REST API must run on the workflow pool (which has both storages); got %d %s", code, resp)
	}
	adminNC, _ := rd.c.connect("admin")
	adminJS, _ := jetstream.New(adminNC)
	kv, err := adminJS.KeyValue(ctx, "A2E_LOCAL")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "tester.latest"); err != nil || string(e.Value()) != `{"items":[1,2,3]}` {
		t.Errorf("A2E_LOCAL tester.latest: %v %v", e, err)
	}
}

// TestDeployPushUserDelivers: push delivery as deploy/k8s runs it:
// `e2a serve` with E2A_PUSH=api (k8s/serve.yaml) keeps the configs, `e2a
// push` as the NATS user push (k8s/push.yaml) delivers. No other deploy
// test runs `e2a push` as the push user. A task with a webhook config gets
// its updates POSTed, the push stage starts and stays up, and nothing is
// refused.
func TestDeployPushUserDelivers(t *testing.T) {
	rd := startShippedDeployment(t, map[string]string{"E2A_PUSH": "api"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Its own loopback address (d.start gives one to serve, agent and
	// archive only): /healthz and /readyz, k8s/push.yaml's probes.
	addr := fmt.Sprintf("127.0.0.1:%d", natstest.FreePorts(t, 1)[0])
	push := rd.d.start("push-1", "push", map[string]string{"E2A_PUSH_ALLOW_HOSTS": "127.0.0.1", "E2A_HTTP_ADDR": addr}, "push")
	push.addr = addr
	rd.d.waitReady(push, 30*time.Second)
	a, raw := rd.call(t, ctx, "SendMessage", `{"message":{"role":"ROLE_USER","messageId":"push-1","parts":[{"text":"ask:input weather"}]}}`)
	if a.Result.Task == nil {
		t.Fatalf("SendMessage: %s", raw)
	}
	id := a.Result.Task.ID
	if a, raw := rd.call(t, ctx, "CreateTaskPushNotificationConfig", `{"taskId":"`+id+`","id":"hook-1","url":"`+rd.hook.URL+`/a2a","token":"tok"}`); a.Error != nil {
		t.Fatalf("CreateTaskPushNotificationConfig: %s", raw)
	}
	if a, raw := rd.call(t, ctx, "SendMessage", `{"message":{"role":"ROLE_USER","messageId":"push-2","taskId":"`+id+`","parts":[{"text":"sunny"}]}}`); a.Result.Task == nil {
		t.Fatalf("the answer: %s", raw)
	}
	ok := testkit.Until(30*time.Second, func() bool {
		for _, b := range rd.hook.bodies() {
			if strings.Contains(b, "TASK_STATE_COMPLETED") {
				return true
			}
		}
		return push.exited()
	})
	if !ok || push.exited() {
		t.Errorf("e2a push as the push user must deliver the task's updates to its webhook (up to TASK_STATE_COMPLETED); got %d POSTs, push exited %v: %v\n%s", len(rd.hook.bodies()), push.exited(), push.err, push.stderrTail())
	}
	for _, v := range rd.violations() {
		t.Errorf("the deployment must be refused nothing it needs: %s", v)
	}
}

// TestDeployWorkflowSettingsOnlyOnThePool: the workflow settings
// (E2A_WORKFLOW_*: the allowed host of an API, a credential) only on the
// workflow pool, as deploy/k8s/agent-workflow.yaml says, none on the
// internet-facing `e2a serve`. serve's REST API checks what it can
// (structure, limits, storage types) and leaves the API knowledge base,
// the operation permissions and the credentials to the pool (/validate
// lists them as deferred): a workflow calling the allowed API with the
// pool's credential runs, and one the pool refuses (a host it does not
// allow, a credential it does not hold) is answered 403 with the A2E
// PermissionError body, not retryable, as serve's own refusal would be.
func TestDeployWorkflowSettingsOnlyOnThePool(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"items":[1,2,3]}`)
	}))
	defer api.Close()
	rd := startShippedDeployment(t, nil, map[string]string{
		"E2A_WORKFLOW_ALLOWED_HOSTS":     strings.TrimPrefix(api.URL, "http://"),
		"E2A_WORKFLOW_ALLOWED_NETS":      "127.0.0.0/8",
		"E2A_WORKFLOW_CREDENTIAL_APIKEY": "s3cret-value-123",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ops := `{"type":"operationUpdate","operationId":"get","operation":{"ApiCall":{"method":"GET","url":"` + api.URL + `/items","headers":{"Authorization":{"credentialRef":{"id":"apikey"},"prefix":"Bearer "}},"outputPath":"/workflow/items"}}}` + "\n" +
		`{"type":"beginExecution","executionId":"pool-1","operationOrder":["get"]}`
	body, _ := json.Marshal(map[string]string{"workflow": ops})
	code, resp := rd.do(t, ctx, http.MethodPost, "/api/v1/workflows/execute", "", string(body))
	if code != http.StatusOK || !strings.Contains(resp, `"status":"success"`) {
		t.Errorf("with E2A_WORKFLOW_* on the workflow pool as deploy/k8s/agent-workflow.yaml says, a workflow calling the allowed API with the pool's credential must run through e2a serve's REST API; got %d %s", code, resp)
	}
	code, resp = rd.do(t, ctx, http.MethodPost, "/api/v1/workflows/validate", "", string(body))
	if code != http.StatusOK || !strings.Contains(resp, `"valid":true`) || !strings.Contains(resp, `"deferred":["operation_permissions","api_knowledge_base","credentials","principal_limits"]`) {
		t.Errorf("serve's /validate must say which checks it leaves to the pool; got %d %s", code, resp)
	}
	// Refused by the pool before it runs anything: the client gets the
	// A2E error as serve would answer it, 403, not retryable.
	for name, op := range map[string]string{
		"a host the pool does not allow":      `{"ApiCall":{"method":"GET","url":"http://127.0.0.2:9/items","outputPath":"/workflow/items"}}`,
		"a credential the pool does not hold": `{"ApiCall":{"method":"GET","url":"` + api.URL + `/items","headers":{"Authorization":{"credentialRef":{"id":"missing"}}},"outputPath":"/workflow/items"}}`,
	} {
		ops := `{"type":"operationUpdate","operationId":"get","operation":` + op + `}` + "\n" +
			`{"type":"beginExecution","executionId":"refused-1","operationOrder":["get"]}`
		body, _ := json.Marshal(map[string]string{"workflow": ops})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rd.serve.url()+"/api/v1/workflows/execute", strings.NewReader(string(body)))
		req.Header.Set("X-Api-Key", rd.apiKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var e struct {
			Error struct {
				Type        string `json:"type"`
				OperationID string `json:"operationId"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || res.StatusCode != http.StatusForbidden || e.Error.Type != "PermissionError" ||
			e.Error.OperationID != "get" || res.Header.Get("Retry-After") != "" {
			t.Errorf("%s: the pool's refusal must reach the client as 403 PermissionError, not retryable; got %d %s (Retry-After %q)",
				name, res.StatusCode, b, res.Header.Get("Retry-After"))
		}
	}
}

// TestDeployBridgeContinuationIsTask: a bridge pool in front of an
// A2A agent (`e2a agent --pool bridge` as agent-bridge, E2A_UPSTREAM_KIND
// a2a, as k8s/agent-bridge.example.yaml configures it; the upstream is
// a2a-go/v2's server), reached at /pools/bridge/a2a/v1 through `e2a
// serve`. The client answers the task's input-required with a message
// naming the task: SendMessage's answer must be the Task (completed), as
// the pipeline's own contract says (protocols/a2a/a2amap/aggregate.go
// Aggregator.Result, params.go Params.Continued: "the answer to a message
// continuing a task is always the Task, never the agent's direct
// Message"; a2a-go/v2's own server refuses a Message once the task is
// stored), and as the demo pool answers it: the Task, with its id,
// completed, never a bare Message without a taskId.
func TestDeployBridgeContinuationIsTask(t *testing.T) {
	up := a2aupstream.Start(t, a2aupstream.Options{})
	rd := startShippedDeployment(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := rd.d.start("agent-bridge-1", "agent-bridge", map[string]string{"E2A_UPSTREAM_KIND": "a2a", "E2A_UPSTREAM_URL": up.CardURL()},
		"agent", "--pool", "bridge", "--concurrency", "4")
	rd.d.waitReady(pool, 30*time.Second)
	send := func(params string) (v1Answer, string) {
		t.Helper()
		code, body := rd.do(t, ctx, http.MethodPost, "/pools/bridge/a2a/v1", "",
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`+params+`}`, "A2A-Version", "1.0")
		var a v1Answer
		if err := json.Unmarshal([]byte(body), &a); err != nil || code != http.StatusOK {
			t.Fatalf("SendMessage: %d %s", code, body)
		}
		return a, body
	}
	a, raw := send(`{"message":{"role":"ROLE_USER","messageId":"bc-1","parts":[{"text":"ask: name?"}]}}`)
	if a.Result.Task == nil || a.Result.Task.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("the first turn: %s", raw)
	}
	id := a.Result.Task.ID
	a, raw = send(`{"message":{"role":"ROLE_USER","messageId":"bc-2","taskId":"` + id + `","parts":[{"text":"Bob"}]}}`)
	if a.Result.Task == nil || a.Result.Task.ID != id || a.Result.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Errorf("SendMessage answering task %s's input-required through the bridge pool must answer the Task, completed; got %s", id, raw)
	}
}
