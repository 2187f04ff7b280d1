package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// startPushPipeline is a pipeline (API-key auth for alice and bob, the
// gRPC binding) whose ingress keeps push configs and beside which the
// push stage runs, loopback allow-listed.
func startPushPipeline(t *testing.T) *pipeline {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithPush("127.0.0.1"),
		pipetest.WithIngress(ingress.WithAuth(aliceAndBob(t))))
	p.Pool("demo", demo.New(), agent.WithMetrics(p.Registry))
	return &pipeline{url: p.URL, nc: p.NC, js: p.JS, in: p.Ingress}
}

// keyTransport sends an API key on every request.
type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(ingress.HeaderAPIKey, k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// keyClient is the a2a-go/v2 client of the principal of key over binding,
// of a pipeline whose card says it keeps push configurations.
func keyClient(t *testing.T, p *pipeline, binding a2a.TransportProtocol, key string) *a2aclient.Client {
	t.Helper()
	return keyClientOf(t, p, binding, key, func(card *a2a.AgentCard) {
		if !card.Capabilities.PushNotifications {
			t.Fatalf("card capabilities %+v: no pushNotifications", card.Capabilities)
		}
	})
}

// keyClientOf is the a2a-go/v2 client of the principal of key over
// binding, built from the card check passes.
func keyClientOf(t *testing.T, p *pipeline, binding a2a.TransportProtocol, key string, check func(*a2a.AgentCard)) *a2aclient.Client {
	t.Helper()
	if binding == a2a.TransportProtocolGRPC {
		return grpcClient(t, p, key)
	}
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, p.url)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	check(card)
	hc := &http.Client{Transport: keyTransport{key}}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}))
	if err != nil {
		t.Fatalf("client from card: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

var pushBindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC}

// TestPushInline: the a2a-go/v2 client sends several concurrent messages
// with an inline taskPushNotificationConfig over each binding; the
// receiver gets every update of each task, in order (event ids
// increasing), ending with its completed status, each with the config's
// token and Bearer credentials.
func TestPushInline(t *testing.T) {
	p := startPushPipeline(t)
	r := pushtest.NewReceiver(t)
	for _, binding := range pushBindings {
		t.Run(string(binding), func(t *testing.T) {
			c := keyClient(t, p, binding, testKey)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const n = 4
			tasks := make([]string, n)
			errs := make(chan error, n)
			for i := range n {
				go func() {
					req := userMessage(fmt.Sprintf("push %d", i))
					req.Config = &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{
						URL:   fmt.Sprintf("%s/%s/%d", r.URL, binding, i),
						Token: fmt.Sprintf("tok-%d", i), Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: fmt.Sprintf("cred-%d", i)}}}
					res, err := c.SendMessage(ctx, req)
					if err == nil {
						task, ok := res.(*a2a.Task)
						if !ok {
							err = fmt.Errorf("result %T", res)
						} else {
							tasks[i] = string(task.ID)
						}
					}
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Fatalf("SendMessage: %v", err)
				}
			}
			for i := range n {
				path := fmt.Sprintf("/%s/%d", binding, i)
				r.Await(t, 20*time.Second, path, "TASK_STATE_COMPLETED")
				checkDeliveries(t, r.Of(path), tasks[i], fmt.Sprintf("tok-%d", i), fmt.Sprintf("Bearer cred-%d", i), "TASK_STATE_COMPLETED")
			}
		})
	}
}

// checkDeliveries checks one config's deliveries: all of task, token and
// auth as configured, event ids distinct and increasing, one terminal
// status, last.
func checkDeliveries(t *testing.T, ds []pushtest.Delivery, task, token, auth, completed string) {
	t.Helper()
	var last [2]int
	for i, d := range ds {
		if d.TaskID != task || d.Token != token || d.Auth != auth {
			t.Fatalf("delivery %d %+v: want task %s token %s auth %s", i, d, task, token, auth)
		}
		parts := strings.Split(d.EventID, ":")
		if len(parts) != 3 {
			t.Fatalf("delivery %d event id %q", i, d.EventID)
		}
		seq, _ := strconv.Atoi(parts[1])
		k, _ := strconv.Atoi(parts[2])
		if i > 0 && (seq < last[0] || seq == last[0] && k <= last[1]) {
			t.Fatalf("delivery %d event id %q after %v: out of order", i, d.EventID, last)
		}
		last = [2]int{seq, k}
		if d.State == completed && i != len(ds)-1 {
			t.Fatalf("delivery %d: completed before the end (%d deliveries)", i, len(ds))
		}
	}
	if len(ds) < 2 {
		t.Fatalf("%d deliveries: want the updates and the final status", len(ds))
	}
}

// TestPushConfigMethods: Create, Get, List (paginated) and Delete over
// each binding with the a2a-go/v2 client (a second Delete is no error),
// and the tenant matrix: bob
// neither reads, lists, replaces nor deletes alice's config, each answered
// TaskNotFound as a task that does not exist; a URL the rules refuse is
// InvalidParams at creation.
func TestPushConfigMethods(t *testing.T) {
	p := startPushPipeline(t)
	r := pushtest.NewReceiver(t)
	for _, binding := range pushBindings {
		t.Run(string(binding), func(t *testing.T) {
			alice := keyClient(t, p, binding, testKey)
			bob := keyClient(t, p, binding, bobKey)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := alice.SendMessage(ctx, userMessage("configs"))
			if err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			task := res.(*a2a.Task).ID
			var ids []string
			for i := range 3 {
				c, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task, ID: fmt.Sprintf("c%d", i), URL: r.URL + "/x", Token: "secret"})
				if err != nil || c.ID != fmt.Sprintf("c%d", i) || c.TaskID != task || c.URL != r.URL+"/x" {
					t.Fatalf("Create %d: %+v %v", i, c, err)
				}
				ids = append(ids, c.ID)
			}
			got, err := alice.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task, ID: "c1"})
			if err != nil || got.ID != "c1" || got.Token != "secret" {
				t.Fatalf("Get: %+v %v", got, err)
			}
			// The client answers the configs of one page (it drops
			// nextPageToken): the first page of 2, then all.
			if binding == a2a.TransportProtocolHTTPJSON {
				// Its client sends no pageSize: the binding's wire.
				checkRESTPages(t, p, string(task), ids)
			}
			for size, want := range map[int][]string{2: ids[:2], 0: ids} {
				if binding == a2a.TransportProtocolHTTPJSON && size != 0 {
					continue
				}
				page, err := alice.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task, PageSize: size})
				if err != nil {
					t.Fatalf("List: %v", err)
				}
				var listed []string
				for _, c := range page {
					listed = append(listed, c.ID)
				}
				if strings.Join(listed, ",") != strings.Join(want, ",") {
					t.Fatalf("listed %v with pageSize %d, want %v", listed, size, want)
				}
			}
			if _, err := alice.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task, PageToken: "not-ours"}); binding != a2a.TransportProtocolHTTPJSON && !errors.Is(err, a2a.ErrInvalidParams) {
				t.Fatalf("List with a bad token: %v", err)
			}
			if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task, URL: "http://10.0.0.1/hook"}); !errors.Is(err, a2a.ErrInvalidParams) {
				t.Fatalf("Create to a private address: %v", err)
			}

			// The tenant matrix: bob on alice's task.
			if _, err := bob.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task, ID: "c1"}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("bob Get: %v", err)
			}
			if _, err := bob.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("bob List: %v", err)
			}
			if _, err := bob.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task, ID: "c1", URL: r.URL + "/bob"}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("bob Create (replace): %v", err)
			}
			if err := bob.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task, ID: "c1"}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("bob Delete: %v", err)
			}
			// Answered as for a task that does not exist.
			if _, err := bob.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: "no-such-task", ID: "c1"}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("bob Get of no task: %v", err)
			}
			got, err = alice.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task, ID: "c1"})
			if err != nil || got.URL != r.URL+"/x" {
				t.Fatalf("alice's config after bob: %+v %v", got, err)
			}

			if err := alice.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task, ID: "c1"}); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if _, err := alice.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task, ID: "c1"}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("Get after Delete: %v", err)
			}
			// Idempotent (PUSH-DEL-002).
			if err := alice.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task, ID: "c1"}); err != nil {
				t.Fatalf("Delete again: %v", err)
			}
		})
	}
}

// checkRESTPages lists alice's configs of task over HTTP+JSON in pages of
// 2 (GET /tasks/{id}/pushNotificationConfigs?pageSize=&pageToken=).
func checkRESTPages(t *testing.T, p *pipeline, task string, want []string) {
	t.Helper()
	var listed []string
	token := ""
	for range 5 {
		req, _ := http.NewRequest("GET", p.url+ingress.A2AV1Path+"/tasks/"+task+"/pushNotificationConfigs?pageSize=2&pageToken="+token, nil)
		req.Header.Set(ingress.HeaderAPIKey, testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page a2a.ListTaskPushConfigResponse
		err = json.NewDecoder(resp.Body).Decode(&page)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(page.Configs) > 2 {
			t.Fatalf("page: %d %+v %v", resp.StatusCode, page, err)
		}
		for _, c := range page.Configs {
			listed = append(listed, c.ID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if strings.Join(listed, ",") != strings.Join(want, ",") {
		t.Fatalf("listed %v in pages of 2, want %v", listed, want)
	}
}

// TestPushWireGolden: the JSON-RPC wire of CreateTaskPushNotificationConfig
// and ListTaskPushNotificationConfigs (A2A v1.0, the spec's §9 shapes), the
// task id replaced by TASK, against testdata/golden/push_*.json.
func TestPushWireGolden(t *testing.T) {
	p := startPushPipeline(t)
	alice := keyClient(t, p, a2a.TransportProtocolJSONRPC, testKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := alice.SendMessage(ctx, userMessage("golden"))
	if err != nil {
		t.Fatal(err)
	}
	task := string(res.(*a2a.Task).ID)
	for _, c := range []struct{ name, body string }{
		{"push_create", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"TASK","id":"cfg-1","url":"https://127.0.0.1/hook","token":"tok","authentication":{"scheme":"Bearer","credentials":"cred"}}}`},
		{"push_list", `{"jsonrpc":"2.0","id":2,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"TASK"}}`},
	} {
		req, _ := http.NewRequest("POST", p.url+ingress.A2AV1Path, strings.NewReader(strings.ReplaceAll(c.body, "TASK", task)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set(ingress.HeaderAPIKey, testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %s", c.name, body)
		}
		got, _ := json.MarshalIndent(v, "", "  ")
		testkit.Golden(t, "testdata/golden/"+c.name+".json", []byte(strings.ReplaceAll(string(got), task, "TASK")+"\n"), *update)
	}
}

// TestPushV1InlineEveryTurnIsOneConfig: an A2A v1.0 client that sends the same
// inline taskPushNotificationConfig (no id) with every message of a long
// conversation (each turn input-required, answered in the task): every
// message is accepted (a2a-go/v2's own server takes them all), the
// per-task config limit is not hit by one webhook registered again.
func TestPushV1InlineEveryTurnIsOneConfig(t *testing.T) {
	p := startPushPipeline(t)
	r := pushtest.NewReceiver(t)
	c := keyClient(t, p, a2a.TransportProtocolJSONRPC, testKey)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var task a2a.TaskID
	for i := range 12 {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(fmt.Sprintf("ask:input turn %d", i)))
		if task != "" {
			msg.TaskID = task
		}
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg,
			Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: r.URL + "/every", Token: "tok"}}})
		if err != nil {
			t.Fatalf("SendMessage of turn %d with the client's usual inline push config: %v; want it accepted", i+1, err)
		}
		tk, ok := res.(*a2a.Task)
		if !ok || tk.Status.State != a2a.TaskStateInputRequired {
			t.Fatalf("turn %d: %T %+v, want an input-required task", i+1, res, res)
		}
		task = tk.ID
	}
}
