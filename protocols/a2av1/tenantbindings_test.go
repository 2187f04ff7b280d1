package a2av1_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// TestTenantOnEveryBinding: a request's tenant is its agent pool, with
// the same rules on A2A v1.0's three bindings (docs/protocols.md; §5.1:
// the same error handling on every binding), on every method that takes
// one. Each case runs on JSON-RPC (params.tenant), HTTP+JSON (the
// `/{tenant}` path, where a2a-go/v2's client puts it; and off the path
// where a route without that segment carries it, a GET's query and a
// POST's body: tenantOffPath) and gRPC (the request message's tenant),
// each sent by a2a-go/v2's client of an
// interface with that tenant: the pipeline's own interface, or the echo
// pool's (its path on the HTTP bindings, x-e2a-agent metadata on gRPC).
// A tenant that is no valid pool name, or names another pool than the
// interface's, is InvalidParams; a pool no worker ever served is refused
// on a send only (the pool check), its tasks readable; a tenant does not
// scope the calls that name a task; ListTasks lists the tenant's pool's
// tasks, and GetExtendedAgentCard answers its pool's card.
func TestTenantOnEveryBinding(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithPush("x.example"),
		pipetest.WithIngress(ingress.WithPoolCheck(time.Second), ingress.WithDefaultPool("demo")))
	p.Pool("demo", poolNamed("demo"))
	p.Pool("echo", poolNamed("echo"))
	ctx := context.Background()

	// One finished task in each pool; their names in a listing.
	tasks := map[a2a.TaskID]string{}
	var echoTask a2a.TaskID
	for _, pool := range []string{"demo", "echo"} {
		text, task, err := streamed(ctx, rpcClient(t, p.URL+a2av1.Path, pool), hi())
		if err != nil || text != "pool "+pool {
			t.Fatalf("a task of %s: %q, %v", pool, text, err)
		}
		tasks[task.TaskID] = pool
		if pool == "echo" {
			echoTask = task.TaskID
		}
	}
	cardName := func(path string) string {
		card, err := agentcard.DefaultResolver.Resolve(ctx, p.URL+path)
		if err != nil {
			t.Fatal(err)
		}
		return card.Name
	}
	rootCard, echoCard := cardName(""), cardName(ingress.PoolsPath+"echo")

	const (
		root = ""     // the pipeline's own interface
		echo = "echo" // the echo pool's
	)
	invalid, unserved := "not a pool!", "nosuchpool"
	for _, tc := range []struct {
		method        string
		iface, tenant string
		call          func(ctx context.Context, e endpoint) (string, error)
		want          string // what call returns
		wantErr       error
	}{
		{"ListTasks", root, "", listPools(tasks), "demo echo", nil},
		{"ListTasks", root, "echo", listPools(tasks), "echo", nil},
		{"ListTasks", root, "demo", listPools(tasks), "demo", nil},
		{"ListTasks", echo, "", listPools(tasks), "echo", nil},
		{"ListTasks", echo, "echo", listPools(tasks), "echo", nil},
		{"ListTasks", root, unserved, listPools(tasks), "", nil},
		{"ListTasks", echo, "demo", listPools(tasks), "", a2a.ErrInvalidParams},
		{"ListTasks", root, invalid, listPools(tasks), "", a2a.ErrInvalidParams},

		{"SendMessage", root, "echo", send, "pool echo", nil},
		{"SendMessage", echo, "echo", send, "pool echo", nil},
		{"SendMessage", echo, "demo", send, "", a2a.ErrInvalidParams},
		{"SendMessage", root, invalid, send, "", a2a.ErrInvalidParams},
		{"SendMessage", root, unserved, send, "", a2a.ErrInvalidParams},
		{"SendStreamingMessage", root, "echo", sendStreaming, "pool echo", nil},
		{"SendStreamingMessage", echo, "demo", sendStreaming, "", a2a.ErrInvalidParams},
		{"SendStreamingMessage", root, invalid, sendStreaming, "", a2a.ErrInvalidParams},
		{"SendStreamingMessage", root, unserved, sendStreaming, "", a2a.ErrInvalidParams},

		{"GetTask", root, "echo", getTask(echoTask), string(echoTask), nil},
		{"GetTask", root, "demo", getTask(echoTask), string(echoTask), nil}, // a task is read on every pool's interface
		{"GetTask", root, unserved, getTask(echoTask), string(echoTask), nil},
		{"GetTask", echo, "demo", getTask(echoTask), "", a2a.ErrInvalidParams},
		{"GetTask", root, invalid, getTask(echoTask), "", a2a.ErrInvalidParams},
		{"CancelTask", root, "echo", cancelTask(echoTask), "", a2a.ErrTaskNotCancelable},
		{"CancelTask", echo, "demo", cancelTask(echoTask), "", a2a.ErrInvalidParams},
		{"CancelTask", root, invalid, cancelTask(echoTask), "", a2a.ErrInvalidParams},
		{"SubscribeToTask", root, "echo", subscribe(echoTask), "", a2a.ErrUnsupportedOperation}, // finished
		{"SubscribeToTask", echo, "demo", subscribe(echoTask), "", a2a.ErrInvalidParams},
		{"SubscribeToTask", root, invalid, subscribe(echoTask), "", a2a.ErrInvalidParams},
		// The tenant is checked before the task is looked up.
		{"GetTask", root, invalid, getTask("nosuch"), "", a2a.ErrInvalidParams},
		{"CancelTask", echo, "demo", cancelTask("nosuch"), "", a2a.ErrInvalidParams},
		{"SubscribeToTask", root, invalid, subscribe("nosuch"), "", a2a.ErrInvalidParams},
		{"SubscribeToTask", echo, "demo", subscribe("nosuch"), "", a2a.ErrInvalidParams},
		{"SubscribeToTask", root, "echo", subscribe("nosuch"), "", a2a.ErrTaskNotFound},

		{"CreateTaskPushConfig", echo, "echo", createConfig(echoTask), "", nil},
		{"CreateTaskPushConfig", echo, "demo", createConfig(echoTask), "", a2a.ErrInvalidParams},
		{"CreateTaskPushConfig", root, invalid, createConfig(echoTask), "", a2a.ErrInvalidParams},
		{"GetTaskPushConfig", root, "echo", getConfig(echoTask), "https://x.example/hook", nil},
		{"GetTaskPushConfig", echo, "demo", getConfig(echoTask), "", a2a.ErrInvalidParams},
		{"GetTaskPushConfig", root, invalid, getConfig(echoTask), "", a2a.ErrInvalidParams},
		{"ListTaskPushConfigs", root, "echo", listConfigs(echoTask), "listed", nil},
		{"ListTaskPushConfigs", echo, "demo", listConfigs(echoTask), "", a2a.ErrInvalidParams},
		{"ListTaskPushConfigs", root, invalid, listConfigs(echoTask), "", a2a.ErrInvalidParams},
		{"DeleteTaskPushConfig", echo, "demo", deleteConfig(echoTask), "", a2a.ErrInvalidParams},
		{"DeleteTaskPushConfig", root, invalid, deleteConfig(echoTask), "", a2a.ErrInvalidParams},
		{"DeleteTaskPushConfig", echo, "echo", deleteConfig(echoTask), "", nil},

		{"GetExtendedAgentCard", root, "", extendedCard, rootCard, nil},
		{"GetExtendedAgentCard", root, "echo", extendedCard, echoCard, nil},
		{"GetExtendedAgentCard", echo, "echo", extendedCard, echoCard, nil},
		{"GetExtendedAgentCard", echo, "demo", extendedCard, "", a2a.ErrInvalidParams},
		{"GetExtendedAgentCard", root, invalid, extendedCard, "", a2a.ErrInvalidParams},
	} {
		for _, binding := range []string{"JSON-RPC", "HTTP+JSON", "HTTP+JSON, tenant off the path", "gRPC"} {
			got, err := tc.call(ctx, poolEndpoint(t, p, binding, tc.iface, tc.tenant))
			where := tc.method + " on " + cmp.Or(tc.iface, "the pipeline") + "'s interface, tenant " + cmp.Or(tc.tenant, "none")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("%s, %s: %q, %v; want %v", binding, where, got, err, tc.wantErr)
				}
				continue
			}
			if err != nil || got != tc.want {
				t.Errorf("%s, %s: %q, %v; want %q", binding, where, got, err, tc.want)
			}
		}
	}
}

// endpoint is an interface of one binding with a tenant, and a2a-go/v2's
// client of it.
type endpoint struct {
	c                 *a2aclient.Client
	binding           a2a.TransportProtocol
	name, url, tenant string
}

// poolEndpoint is p's interface of binding (JSON-RPC, HTTP+JSON, gRPC;
// "HTTP+JSON, tenant off the path" is HTTP+JSON with the tenant in a
// GET's query and a POST's body: tenantOffPath), the pipeline's (iface
// "") or pool iface's, with tenant:
// on gRPC the pool is the x-e2a-agent metadata (a2av1.GRPCAgentMetadata)
// of every call.
func poolEndpoint(t *testing.T, p *pipetest.Pipeline, binding, iface, tenant string) endpoint {
	t.Helper()
	url := p.URL + a2av1.Path
	if iface != "" {
		url = p.URL + ingress.PoolsPath + iface + a2av1.Path
	}
	e := endpoint{binding: a2a.TransportProtocolHTTPJSON, name: binding, url: url, tenant: tenant}
	switch binding {
	case "JSON-RPC":
		e.binding = a2a.TransportProtocolJSONRPC
		e.c = tenantClient(t, url, tenant, e.binding)
	case "HTTP+JSON":
		e.c = tenantClient(t, url, tenant, e.binding)
	case "HTTP+JSON, tenant off the path":
		e.c = tenantClient(t, url, tenant, e.binding, a2aclient.WithRESTTransport(&http.Client{Transport: tenantOffPath(url, tenant)}))
	case "gRPC":
		md := func(ctx context.Context) context.Context {
			if iface == "" {
				return ctx
			}
			return metadata.AppendToOutgoingContext(ctx, a2av1.GRPCAgentMetadata, iface)
		}
		e.binding, e.url = a2a.TransportProtocolGRPC, p.GRPCAddr
		e.c = tenantClient(t, e.url, tenant, e.binding, grpcv1.WithGRPCTransport(
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				return invoker(md(ctx), method, req, reply, cc, opts...)
			}),
			grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(md(ctx), desc, cc, method, opts...)
			})))
	default:
		t.Fatalf("no binding %q", binding)
	}
	return e
}

// tenantOffPath is the HTTP transport of a2a-go/v2's HTTP+JSON client
// of the interface at base with tenant that sends the tenant where a
// route without a `/{tenant}` segment carries it, as the gRPC-gateway
// reads it, not in the path (/{tenant}/…, where that client puts it): a
// GET's or a DELETE's in its query (?tenant=), a POST's (whose body is
// "*") in its body's tenant. SubscribeToTask, which that client POSTs,
// is sent as a2a.proto binds it, a GET.
func tenantOffPath(base, tenant string) http.RoundTripper {
	prefix := strings.TrimPrefix(base, "http://")
	_, prefix, _ = strings.Cut(prefix, "/")
	prefix = "/" + prefix + "/" + tenant + "/"
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if tenant == "" || !ok {
			return http.DefaultTransport.RoundTrip(r)
		}
		r = r.Clone(r.Context())
		r.URL.Path, r.URL.RawPath = strings.TrimSuffix(prefix, tenant+"/")+rest, ""
		if strings.HasSuffix(rest, ":subscribe") {
			r.Method, r.Body, r.ContentLength = http.MethodGet, nil, 0 // a2a.proto's (this client POSTs it)
		}
		if r.Method != http.MethodPost {
			q := r.URL.Query()
			q.Set("tenant", tenant)
			r.URL.RawQuery = q.Encode()
			return http.DefaultTransport.RoundTrip(r)
		}
		m := map[string]any{}
		if r.Body != nil {
			if err := json.NewDecoder(r.Body).Decode(&m); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
		}
		m["tenant"] = tenant
		body, _ := json.Marshal(m)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		r.Header.Set("Content-Type", "application/json")
		return http.DefaultTransport.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// streamed is the text of the artifacts of a SendStreamingMessage of req
// by c and its task, or its first error.
func streamed(ctx context.Context, c *a2aclient.Client, req *a2a.SendMessageRequest) (string, a2a.TaskInfo, error) {
	var text string
	var task a2a.TaskInfo
	for ev, err := range c.SendStreamingMessage(ctx, req) {
		if err != nil {
			return text, task, err
		}
		if ti, ok := ev.(a2a.TaskInfoProvider); ok && ti.TaskInfo().TaskID != "" {
			task = ti.TaskInfo()
		}
		if ae, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && ae.Artifact != nil {
			text += answerText(&a2a.Task{Artifacts: []*a2a.Artifact{ae.Artifact}})
		}
	}
	return text, task, nil
}

func send(ctx context.Context, e endpoint) (string, error) {
	res, err := e.c.SendMessage(ctx, hi())
	if err != nil {
		return "", err
	}
	return answerText(res), nil
}

func sendStreaming(ctx context.Context, e endpoint) (string, error) {
	text, _, err := streamed(ctx, e.c, hi())
	return text, err
}

// listPools lists the caller's tasks: the pools of those of tasks
// (task → pool) listed, sorted, space-separated.
func listPools(tasks map[a2a.TaskID]string) func(context.Context, endpoint) (string, error) {
	return func(ctx context.Context, e endpoint) (string, error) {
		l, err := e.c.ListTasks(ctx, &a2a.ListTasksRequest{})
		if err != nil {
			return "", err
		}
		var pools []string
		for _, task := range l.Tasks {
			if pool, ok := tasks[task.ID]; ok {
				pools = append(pools, pool)
			}
		}
		slices.Sort(pools)
		return strings.Join(pools, " "), nil
	}
}

func getTask(id a2a.TaskID) func(context.Context, endpoint) (string, error) {
	return func(ctx context.Context, e endpoint) (string, error) {
		task, err := e.c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if err != nil {
			return "", err
		}
		return string(task.ID), nil
	}
}

func cancelTask(id a2a.TaskID) func(context.Context, endpoint) (string, error) {
	return func(ctx context.Context, e endpoint) (string, error) {
		_, err := e.c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
		return "", err
	}
}

// subscribe is SubscribeToTask of task id. On JSON-RPC it is sent as
// a2a-go/v2's client sends it (params.tenant), without that client: its
// JSON-RPC transport reads a streaming call's answer as SSE only, and a
// refusal before the stream (a plain JSON-RPC error, docs/protocols.md)
// as an empty stream.
func subscribe(id a2a.TaskID) func(context.Context, endpoint) (string, error) {
	return func(ctx context.Context, e endpoint) (string, error) {
		if e.binding == a2a.TransportProtocolJSONRPC {
			return "", rpcRefusal(ctx, e.url, "SubscribeToTask", map[string]any{"id": id, "tenant": e.tenant})
		}
		for _, err := range e.c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
			if err != nil {
				return "", err
			}
		}
		return "", nil
	}
}

// rpcRefusal is the error of the JSON-RPC answer to method with params at
// url: the A2A error its ErrorInfo's reason names (the reason itself for
// another), nil for an answer that is no error.
func rpcRefusal(ctx context.Context, url, method string, params any) error {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var answer struct {
		Error *struct {
			Message string
			Data    []struct{ Reason string }
		}
	}
	if resp.Header.Get("Content-Type") != "application/json" || json.NewDecoder(resp.Body).Decode(&answer) != nil || answer.Error == nil {
		return nil
	}
	for _, d := range answer.Error.Data {
		for _, known := range []error{a2a.ErrInvalidParams, a2a.ErrUnsupportedOperation, a2a.ErrTaskNotFound} {
			if d.Reason != "" && a2a.ErrorReason(known) == d.Reason {
				return fmt.Errorf("%w (%s)", known, answer.Error.Message)
			}
		}
	}
	return errors.New(answer.Error.Message)
}

// The push config of each binding is "c-<binding>".

func createConfig(id a2a.TaskID) func(context.Context, endpoint) (string, error) {
	return func(ctx context.Context, e endpoint) (string, error) {
		_, err := e.c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: id, ID: "c-" + e.name, URL: "https://x.example/hook"})
		return "", err
	}
}

func getConfig(id a2a.TaskID) func(context.Context, endpoint) (string, error) {
	return func(ctx context.Context, e endpoint) (string, error) {
		cfg, err := e.c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: id, ID: "c-" + e.name})
		if err != nil {
			return "", err
		}
		return cfg.URL, nil
	}
}

func listConfigs(id a2a.TaskID) func(context.Context, endpoint) (string, error) {
	return func(ctx context.Context, e endpoint) (string, error) {
		l, err := e.c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: id})
		if err != nil {
			return "", err
		}
		if slices.ContainsFunc(l, func(cfg *a2a.PushConfig) bool { return cfg.ID == "c-"+e.name }) {
			return "listed", nil
		}
		return "not listed", nil
	}
}

func deleteConfig(id a2a.TaskID) func(context.Context, endpoint) (string, error) {
	return func(ctx context.Context, e endpoint) (string, error) {
		return "", e.c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: id, ID: "c-" + e.name})
	}
}

func extendedCard(ctx context.Context, e endpoint) (string, error) {
	card, err := e.c.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{})
	if err != nil {
		return "", err
	}
	return card.Name, nil
}
