package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/streams"
)

// cancelLimited is a pipeline whose pool demo runs the turn "first" until
// it is cancelled (runningTaskPipeline), served to alice (testKey) under a
// rate limit of limit requests a minute and a budget of cancels a minute,
// on a clock that stands 30 s into a minute until advanced (next).
type cancelLimited struct {
	pp      *pipetest.Pipeline
	started chan struct{}
	ran     *atomic.Int32
	kv      jetstream.KeyValue
	minutes atomic.Int64 // minutes the clock was advanced
	// stop is the path and body of a cancel of what runs, sent in a
	// new minute when the test failed, so that the pipeline stops at
	// once (the turn runs until cancelled).
	stop [2]string
}

func startCancelLimited(t *testing.T, limit, cancels int) *cancelLimited {
	t.Helper()
	_, nc := natstest.RunServer(t)
	kv, err := natstest.JetStream(t, nc).KeyValue(context.Background(), streams.RateLimitBucket)
	if err != nil {
		t.Fatal(err)
	}
	c := &cancelLimited{kv: kv}
	mid := testkit.MidMinute()
	clock := func() time.Time { return mid().Add(time.Duration(c.minutes.Load()) * time.Minute) }
	lim := ingress.NewLimiter(kv, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: limit}, CancelsPerMinute: cancels},
		ingress.WithLimiterClock(clock), ingress.WithLimiterErrorHook(func(err error) { t.Errorf("limiter fell back: %v", err) }))
	c.pp, c.started, c.ran = runningTaskPipeline(t, pipetest.WithConn(nc), pipetest.WithGRPC(),
		pipetest.WithIngress(withAPIKey(t), ingress.WithLimiter(lim)))
	t.Cleanup(func() { // before the pipeline's
		if t.Failed() && c.stop[0] != "" {
			c.next()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.pp.URL+c.stop[0], strings.NewReader(c.stop[1]))
			if err != nil {
				return
			}
			req.Header.Set("X-Api-Key", testKey)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	})
	return c
}

// next advances the limiter's clock to the next minute: every window
// resets.
func (c *cancelLimited) next() { c.minutes.Add(1) }

// post posts body to path as alice.
func (c *cancelLimited) post(t *testing.T, path, body string) (*http.Response, []byte) {
	t.Helper()
	return do(t, http.MethodPost, c.pp.URL+path, body, "X-Api-Key", testKey, "Content-Type", "application/json")
}

// startTask sends alice's message "first" (A2A v0.3, not blocking) and
// returns its task's id once its turn runs.
func (c *cancelLimited) startTask(t *testing.T) string {
	t.Helper()
	resp, b := c.post(t, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"configuration":{"blocking":false},`+
		`"message":{"kind":"message","role":"user","messageId":"m-first","parts":[{"kind":"text","text":"first"}]}}}`)
	var a struct {
		Result struct {
			ID string `json:"id"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &a) != nil || a.Result.ID == "" {
		t.Fatalf("message/send: %d %s", resp.StatusCode, b)
	}
	c.stop = [2]string{"/a2a", `{"jsonrpc":"2.0","id":0,"method":"tasks/cancel","params":{"id":"` + a.Result.ID + `"}}`}
	testkit.Receive(t, c.started, 30*time.Second, "the first turn did not start")
	return a.Result.ID
}

// taskState is the state of task id by A2A v0.3 tasks/get.
func (c *cancelLimited) taskState(t *testing.T, id string) string {
	t.Helper()
	resp, b := c.post(t, "/a2a", `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"`+id+`"}}`)
	state := resultState(b)
	if state == "" {
		t.Fatalf("tasks/get: %d %s", resp.StatusCode, b)
	}
	return state
}

// resultState is the state of the task a JSON-RPC answer's result is, ""
// when it is none.
func resultState(b []byte) string {
	var a struct {
		Result struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
	}
	_ = json.Unmarshal(b, &a)
	return a.Result.Status.State
}

// rpcLimited checks that a JSON-RPC answer is the rate limit's refusal,
// 429 with Retry-After and error -32029 whose message says limit
// ("1 requests per minute", "1 cancels per minute").
func rpcLimited(t *testing.T, what string, resp *http.Response, b []byte, limit string) {
	t.Helper()
	var a struct {
		Error *jsonrpc.Error `json:"error"`
	}
	if json.Unmarshal(b, &a) != nil || a.Error == nil || a.Error.Code != jsonrpc.CodeRateLimited || !strings.Contains(a.Error.Message, limit) ||
		resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%s: %d (Retry-After %q) %s; want 429, -32029 with %q", what, resp.StatusCode, resp.Header.Get("Retry-After"), b, limit)
	}
}

// canceledState reports whether state is A2A's canceled, in v0.3's or
// v1.0's spelling.
func canceledState(state string) bool {
	return state == "canceled" || state == "TASK_STATE_CANCELED"
}

// TestRateLimitCancelOverLimit: alice, over her rate limit (1 request a
// minute, spent on the message that started her task), cancels her running
// task at each door: the cancel is admitted on her budget of cancels (1 a
// minute) and the task ends canceled; her next cancel, past that budget, is
// refused with the door's rate limit error (JSON-RPC -32029, HTTP+JSON
// 429 with Retry-After, gRPC RESOURCE_EXHAUSTED) saying the budget. Before
// the budget her cancel was refused as any call, and the task ran on.
func TestRateLimitCancelOverLimit(t *testing.T) {
	jsonRPC := func(path, method string) func(t *testing.T, c *cancelLimited, id string) (bool, func(*testing.T)) {
		return func(t *testing.T, c *cancelLimited, id string) (bool, func(*testing.T)) {
			body := `{"jsonrpc":"2.0","id":9,"method":"` + method + `","params":{"id":"` + id + `"}}`
			resp, b := c.post(t, path, body)
			ok := canceledState(resultState(b))
			if !ok {
				t.Errorf("%s over the limit: %d %s; want the task canceled", method, resp.StatusCode, b)
			}
			return ok, func(t *testing.T) {
				resp, b := c.post(t, path, body)
				rpcLimited(t, method+" past the budget of cancels", resp, b, "1 cancels per minute")
			}
		}
	}
	doors := []struct {
		name   string
		cancel func(t *testing.T, c *cancelLimited, id string) (ok bool, again func(*testing.T))
	}{
		{"a2a v0.3 tasks/cancel", jsonRPC("/a2a", "tasks/cancel")},
		{"a2a v1.0 JSON-RPC CancelTask", jsonRPC("/a2a/v1", "CancelTask")},
		{"a2a v1.0 CancelTask at /a2a", jsonRPC("/a2a", "CancelTask")},
		{"a2a v1.0 HTTP+JSON :cancel", func(t *testing.T, c *cancelLimited, id string) (bool, func(*testing.T)) {
			path := "/a2a/v1/tasks/" + id + ":cancel"
			resp, b := c.post(t, path, `{}`)
			var a struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			}
			_ = json.Unmarshal(b, &a)
			if resp.StatusCode != http.StatusOK || !canceledState(a.Status.State) {
				t.Errorf("POST %s over the limit: %d %s; want the task canceled", path, resp.StatusCode, b)
			}
			return canceledState(a.Status.State), func(t *testing.T) {
				resp, b := c.post(t, path, `{}`)
				if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
					!strings.Contains(string(b), "1 cancels per minute") || !strings.Contains(string(b), "RESOURCE_EXHAUSTED") {
					t.Fatalf("POST %s past the budget of cancels: %d (Retry-After %q) %s", path, resp.StatusCode, resp.Header.Get("Retry-After"), b)
				}
			}
		}},
		{"a2a v1.0 gRPC CancelTask", func(t *testing.T, c *cancelLimited, id string) (bool, func(*testing.T)) {
			g, ctx := grpcProtoClient(t, c.pp.GRPCAddr)
			task, err := g.CancelTask(ctx, &a2apb.CancelTaskRequest{Id: id})
			if err != nil || task.GetStatus().GetState() != a2apb.TaskState_TASK_STATE_CANCELED {
				t.Errorf("gRPC CancelTask over the limit: %v %v; want the task canceled", task.GetStatus(), err)
			}
			return err == nil, func(t *testing.T) {
				_, err := g.CancelTask(ctx, &a2apb.CancelTaskRequest{Id: id})
				st, _ := status.FromError(err)
				if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "1 cancels per minute") || retryDelay(st) <= 0 {
					t.Fatalf("gRPC CancelTask past the budget of cancels: %v (retry %v); want RESOURCE_EXHAUSTED with a RetryInfo", err, retryDelay(st))
				}
			}
		}},
	}
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			c := startCancelLimited(t, 1, 1)
			id := c.startTask(t)
			resp, b := c.post(t, "/a2a", `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"`+id+`"}}`)
			rpcLimited(t, "tasks/get over the limit", resp, b, "1 requests per minute")

			ok, again := d.cancel(t, c, id)
			if !ok {
				return
			}
			again(t)
			c.next()
			if state := c.taskState(t, id); state != "canceled" {
				t.Errorf("the task is %s, want canceled", state)
			}
			if n := c.ran.Load(); n != 0 {
				t.Errorf("%d other turns ran", n)
			}
		})
	}

	t.Run("acp session/cancel", func(t *testing.T) {
		c := startCancelLimited(t, 2, 1)
		sid := acpNewSession(t, c.pp.URL, testKey)
		lines := acpLines(t, c.pp.URL, testKey, promptBody("1", sid, "first", false))
		c.stop = [2]string{"/acp", cancelBody(sid)}
		testkit.Receive(t, c.started, 30*time.Second, "the prompt did not start")
		resp, b := c.post(t, "/acp", `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
		rpcLimited(t, "session/new over the limit", resp, b, "2 requests per minute")

		cancelNotified(t, c.pp.URL, testKey, sid)
		var stop string
		end := time.After(30 * time.Second)
		for line, open := []byte(nil), true; open; {
			select {
			case line, open = <-lines:
			case <-end:
				t.Fatal("the prompt's answer did not end")
			}
			var m struct {
				Result struct {
					StopReason string `json:"stopReason"`
				} `json:"result"`
			}
			if json.Unmarshal(line, &m) == nil && m.Result.StopReason != "" {
				stop = m.Result.StopReason
			}
		}
		if stop != "cancelled" {
			t.Fatalf("the prompt ended %q, want cancelled", stop)
		}
		resp, b = c.post(t, "/acp", cancelBody(sid))
		rpcLimited(t, "session/cancel past the budget of cancels", resp, b, "1 cancels per minute")
	})
}

// TestRateLimitCancelNotSmuggled: over her limit, alice's calls that name
// a cancel and are not one alone are charged to her rate limit and
// refused with its error, her budget of cancels untouched: a batch of a
// cancel and a message/send (A2A v0.3, and ACP's session/cancel with a
// session/prompt), a batch of a cancel alone, a body cut short, a cancel
// whose params are no object, a v1.0 batch, a message whose text names the
// method; nothing of them runs. Her real cancel is then admitted.
func TestRateLimitCancelNotSmuggled(t *testing.T) {
	c := startCancelLimited(t, 1, 1)
	id := c.startTask(t)
	cancel := `{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{"id":"` + id + `"}}`
	send := `{"jsonrpc":"2.0","id":4,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m-x",` +
		`"parts":[{"kind":"text","text":"tasks/cancel"}]}}}`
	for _, s := range []struct{ name, path, body string }{
		{"cancel and message/send", "/a2a", "[" + cancel + "," + send + "]"},
		{"message/send and cancel", "/a2a", "[" + send + "," + cancel + "]"},
		{"a batch of a cancel", "/a2a", "[" + cancel + "]"},
		{"cut short", "/a2a", strings.TrimSuffix(cancel, "}")},
		{"params not an object", "/a2a", `{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":["` + id + `"]}`},
		{"no jsonrpc member", "/a2a", `{"id":3,"method":"tasks/cancel","params":{"id":"` + id + `"}}`},
		{"a message naming the method", "/a2a", send},
		{"v1.0 CancelTask and SendMessage", "/a2a/v1", `[{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"` + id + `"}},` +
			`{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m-y","role":"ROLE_USER","parts":[{"text":"x"}]}}}]`},
		{"acp session/cancel and session/prompt", "/acp", "[" + cancelBody("s-1") + "," + promptBody("5", "s-1", "x", false) + "]"},
	} {
		resp, b := c.post(t, s.path, s.body)
		rpcLimited(t, s.name, resp, b, "1 requests per minute")
	}
	if _, err := c.kv.Get(context.Background(), "c.p.alice"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("alice's budget of cancels was charged (%v)", err)
	}
	if resp, b := c.post(t, "/a2a", cancel); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"canceled"`) {
		t.Fatalf("alice's cancel: %d %s", resp.StatusCode, b)
	}
	if n := c.ran.Load(); n != 0 {
		t.Errorf("%d smuggled turns ran", n)
	}
	e, err := c.kv.Get(context.Background(), "c.p.alice")
	var counts [3][3]int64 // per window: index, count, bytes
	if err != nil || json.Unmarshal(e.Value(), &counts) != nil || counts[0][1] != 1 {
		t.Errorf("alice's budget of cancels after her cancel: %v %v, want 1 this minute", counts, err)
	}
}
