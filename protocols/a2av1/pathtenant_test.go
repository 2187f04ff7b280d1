package a2av1_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// poolNamed answers with its pool's name.
func poolNamed(pool string) agent.Handler {
	return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "pool "+pool); err != nil {
			return err
		}
		return w.Complete(map[string]any{"content": "pool " + pool})
	})
}

func answerText(res a2a.SendMessageResult) string {
	var s strings.Builder
	add := func(parts a2a.ContentParts) {
		for _, p := range parts {
			s.WriteString(p.Text())
		}
	}
	switch r := res.(type) {
	case *a2a.Message:
		add(r.Parts)
	case *a2a.Task:
		for _, a := range r.Artifacts {
			add(a.Parts)
		}
	}
	return s.String()
}

// restClient is a2a-go/v2's client of the HTTP+JSON interface at url with
// tenant: it sends every call under url/<tenant>/ (and SendMessage's
// body's tenant too).
func restClient(t *testing.T, url, tenant string) *a2aclient.Client {
	t.Helper()
	return tenantClient(t, url, tenant, a2a.TransportProtocolHTTPJSON)
}

// tenantClient is a2a-go/v2's client of the interface of binding at url
// with tenant, which it sends in every call (opts: the factory's, such as
// the gRPC transport's).
func tenantClient(t *testing.T, url, tenant string, binding a2a.TransportProtocol, opts ...a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	iface := a2a.NewAgentInterface(url, binding)
	iface.Tenant = tenant
	c, err := a2aclient.NewFromEndpoints(context.Background(), []*a2a.AgentInterface{iface}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// twoPools starts a pipeline with the pools demo (the default) and echo,
// each answering "pool <name>", with the pool check on.
func twoPools(t *testing.T) *pipetest.Pipeline {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithPoolCheck(time.Second), ingress.WithDefaultPool("demo")))
	p.Pool("demo", poolNamed("demo"))
	p.Pool("echo", poolNamed("echo"))
	return p
}

func hi() *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))}
}

// TestPathTenant: the HTTP+JSON binding's `/{tenant}` routes (a2a.proto's
// additional bindings) name the pool. a2a-go/v2's client of an HTTP+JSON
// interface with a tenant reaches that pool from the root interface and
// from the pool's own (SendMessage, SendStreamingMessage, GetTask,
// ListTasks, CancelTask); a tenant naming another pool than the pool's
// interface, an invalid pool name and a pool no worker ever served are
// InvalidParams; a raw request under /a2a/v1/<tenant>/ is routed as the
// client's is, and a path without a tenant is served as before.
func TestPathTenant(t *testing.T) {
	t.Parallel()
	p := twoPools(t)
	ctx := context.Background()
	for _, u := range []struct{ name, url, tenant string }{
		{"root", p.URL + a2av1.Path, "echo"},
		{"root", p.URL + a2av1.Path, "demo"},
		{"pool", p.URL + ingress.PoolsPath + "echo" + a2av1.Path, "echo"},
	} {
		c := restClient(t, u.url, u.tenant)
		res, err := c.SendMessage(ctx, hi())
		if err != nil || answerText(res) != "pool "+u.tenant {
			t.Fatalf("%s interface, tenant %s: SendMessage %q, %v", u.name, u.tenant, answerText(res), err)
		}
		text, task, err := streamed(ctx, c, hi())
		if err != nil || text != "pool "+u.tenant || task.TaskID == "" {
			t.Fatalf("%s/%s: stream %q, task %+v, %v", u.name, u.tenant, text, task, err)
		}
		if got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.TaskID}); err != nil || got.ID != task.TaskID {
			t.Errorf("%s/%s: GetTask: %v", u.name, u.tenant, err)
		}
		if l, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: task.ContextID}); err != nil || len(l.Tasks) != 1 {
			t.Errorf("%s/%s: ListTasks: %+v, %v", u.name, u.tenant, l, err)
		}
		if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.TaskID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
			t.Errorf("%s/%s: CancelTask of a completed task: %v, want TaskNotCancelable", u.name, u.tenant, err)
		}
	}
	for _, bad := range []struct{ url, tenant string }{
		{p.URL + ingress.PoolsPath + "echo" + a2av1.Path, "demo"},
		{p.URL + a2av1.Path, "nosuchpool"},
		{p.URL + a2av1.Path, "not a pool!"},
	} {
		if _, err := restClient(t, bad.url, bad.tenant).SendMessage(ctx, hi()); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("tenant %q at %s: %v, want InvalidParams", bad.tenant, bad.url, err)
		}
	}
	rawPathTenant(t, p)
}

// rawPathTenant: the same routes as a curl user writes them.
func rawPathTenant(t *testing.T, p *pipetest.Pipeline) {
	t.Helper()
	post := func(path string) (int, map[string]any) {
		body := `{"message":{"messageId":"m-` + strings.ReplaceAll(path, "/", "-") + `","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
		req, _ := http.NewRequest(http.MethodPost, p.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return do(t, req)
	}
	status, v := post("/a2a/v1/echo/message:send")
	if status != http.StatusOK || !strings.Contains(jsonString(v), "pool echo") {
		t.Fatalf("POST /a2a/v1/echo/message:send: %d %v, want the echo pool's answer", status, v)
	}
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/a2a/v1/echo/tasks?pageSize=5", nil)
	if status, v := do(t, req); status != http.StatusOK || v["tasks"] == nil {
		t.Errorf("GET /a2a/v1/echo/tasks: %d %v", status, v)
	}
	if status, v := post("/pools/echo/a2a/v1/demo/message:send"); status != http.StatusBadRequest || !strings.Contains(jsonString(v), "INVALID_ARGUMENT") {
		t.Errorf("tenant demo under /pools/echo: %d %v, want 400 INVALID_ARGUMENT", status, v)
	}
	if status, v := post("/a2a/v1/message:send"); status != http.StatusOK || !strings.Contains(jsonString(v), "pool demo") {
		t.Errorf("POST /a2a/v1/message:send (no tenant): %d %v", status, v)
	}
	if status, _ := post("/a2a/v1/echo/nothing:here"); status != http.StatusNotFound {
		t.Errorf("POST /a2a/v1/echo/nothing:here: %d, want 404", status)
	}
}

func do(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestListTasksOfPool: ListTasks on a pool's interface (its path, a tenant,
// a GET's ?tenant=, ?agent=) lists that agent's tasks only: a client given a pool's card
// lists what it did with that agent, not the pipeline's other agents'
// tasks. The pipeline's own interface, naming no pool, lists every pool's.
func TestListTasksOfPool(t *testing.T) {
	t.Parallel()
	p := twoPools(t)
	ctx := context.Background()
	ids := map[string]string{}
	for _, pool := range []string{"demo", "echo"} {
		_, task, err := streamed(ctx, restClient(t, p.URL+a2av1.Path, pool), hi())
		if err != nil || task.TaskID == "" {
			t.Fatalf("stream to %s: task %+v, %v", pool, task, err)
		}
		ids[pool] = string(task.TaskID)
	}
	for _, c := range []struct {
		name string
		c    *a2aclient.Client
		want []string
	}{
		{"the pipeline's interface", restClient(t, p.URL+a2av1.Path, ""), []string{ids["demo"], ids["echo"]}},
		{"tenant echo", restClient(t, p.URL+a2av1.Path, "echo"), []string{ids["echo"]}},
		{"tenant demo", restClient(t, p.URL+a2av1.Path, "demo"), []string{ids["demo"]}},
		{"echo's interface", restClient(t, p.URL+ingress.PoolsPath+"echo"+a2av1.Path, ""), []string{ids["echo"]}},
		{"?agent=echo, JSON-RPC", tenantClient(t, p.URL+a2av1.Path+"?agent=echo", "", a2a.TransportProtocolJSONRPC), []string{ids["echo"]}},
	} {
		l, err := c.c.ListTasks(ctx, &a2a.ListTasksRequest{})
		if err != nil {
			t.Fatalf("%s: ListTasks: %v", c.name, err)
		}
		var got []string
		for _, task := range l.Tasks {
			got = append(got, string(task.ID))
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) || l.TotalSize != len(want) {
			t.Errorf("%s: ListTasks listed %v (total %d), want %v", c.name, got, l.TotalSize, want)
		}
	}
	// A GET's ?tenant= is the request's tenant (the gRPC-gateway reads
	// it into the request), with the path tenant's rules.
	req, _ := http.NewRequest(http.MethodGet, p.URL+a2av1.Path+"/tasks?tenant=echo", nil)
	if status, v := do(t, req); status != http.StatusOK || !strings.Contains(jsonString(v), ids["echo"]) || strings.Contains(jsonString(v), ids["demo"]) {
		t.Errorf("GET /a2a/v1/tasks?tenant=echo: %d %v; want echo's task alone", status, v)
	}
	req, _ = http.NewRequest(http.MethodGet, p.URL+ingress.PoolsPath+"echo"+a2av1.Path+"/tasks?tenant=demo", nil)
	if status, v := do(t, req); status != http.StatusBadRequest || !strings.Contains(jsonString(v), "names another agent pool") {
		t.Errorf("GET /pools/echo/a2a/v1/tasks?tenant=demo: %d %v; want 400 naming the other pool", status, v)
	}
}
