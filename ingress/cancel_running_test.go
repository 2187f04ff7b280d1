package ingress_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// gateResolver resolves webhook hosts to a public address, each lookup
// first reporting on entered and waiting for release: a hook that holds
// an A2A message between its terminal-task check (CheckTaskOpen) and its
// append to the task's record (the inline push config is stored in
// between, submission's Before).
type gateResolver struct {
	entered chan struct{}
	release chan struct{}
}

func (g *gateResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
}

// runningTaskPipeline is a pipeline whose pool demo runs the turn "first"
// until it is cancelled (reported on started) and answers any other turn
// at once (counted in ran), its ingress given opts.
func runningTaskPipeline(t *testing.T, opts ...pipetest.Option) (pp *pipetest.Pipeline, started chan struct{}, ran *atomic.Int32) {
	t.Helper()
	pp = pipetest.Start(t, opts...)
	started, ran = make(chan struct{}, 1), &atomic.Int32{}
	pp.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if demo.Text(env) == "first" {
			started <- struct{}{}
			<-ctx.Done() // runs until cancelled
			return ctx.Err()
		}
		ran.Add(1)
		if err := w.Chunk(e2a.DeltaText, "a later turn ran"); err != nil {
			return err
		}
		return w.Complete(nil)
	}))
	return pp, started, ran
}

// postRPC posts a JSON-RPC body to url and returns the answer's status and
// body.
func postRPC(ctx context.Context, url, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// rpcError is the error of a JSON-RPC answer (nil when it has none).
func rpcError(t *testing.T, body string) *struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
} {
	t.Helper()
	var a struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return a.Error
}

// TestCancelRunningTaskRefusesQueuedMessage: a task's turn runs; the
// client's next message to it (A2A v0.3, with an inline push config)
// passes the terminal-task check (the turn runs: the task is open) and is
// held before it is appended to the task's record. tasks/cancel (A2A v1.0
// CancelTask, and v0.3 tasks/cancel) then cancels the running turn and
// answers the task canceled. The message must be refused as to a task in
// a terminal state: the cancel marked the task's record before it cancelled
// the turn (TaskRecord.CancelTurn), and the append refuses an A2A message
// after the marked turn. Without the mark it was appended after the
// cancelled turn and ran, and the task the client was told is canceled
// ended completed.
func TestCancelRunningTaskRefusesQueuedMessage(t *testing.T) {
	for _, cancelWith := range []string{"v1.0 CancelTask", "v0.3 tasks/cancel"} {
		t.Run(cancelWith, func(t *testing.T) {
			_, nc := natstest.RunServer(t)
			gate := &gateResolver{entered: make(chan struct{}, 1), release: make(chan struct{})}
			store, err := push.NewStore(context.Background(), nc, push.WithResolver(gate))
			if err != nil {
				t.Fatal(err)
			}
			pp, started, ran := runningTaskPipeline(t, pipetest.WithConn(nc), pipetest.WithIngress(ingress.WithPushStore(store)))
			p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
			_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("first")),
				Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
			if err != nil {
				t.Fatal(err)
			}
			task := res.(*a2a.Task)
			testkit.Receive(t, started, 30*time.Second, "the first turn did not start")

			// The second message: checked open, then held in the push
			// config's URL check.
			type answer struct {
				status int
				body   string
				err    error
			}
			answered := make(chan answer, 1)
			go func() {
				body := `{"jsonrpc":"2.0","id":3,"method":"message/send","params":{"configuration":{"blocking":false,` +
					`"pushNotificationConfig":{"url":"https://hook.example/cb"}},"message":{"kind":"message","role":"user","messageId":"m-second",` +
					`"taskId":"` + string(task.ID) + `","contextId":"` + task.ContextID + `","parts":[{"kind":"text","text":"second"}]}}}`
				status, b, err := postRPC(ctx, pp.URL+"/a2a", body)
				answered <- answer{status, b, err}
			}()
			testkit.Receive(t, gate.entered, 30*time.Second, "the second message did not reach its push config check")

			if cancelWith == "v1.0 CancelTask" {
				got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
				if err != nil {
					t.Fatalf("CancelTask: %v", err)
				}
				if got.Status.State != a2a.TaskStateCanceled {
					t.Fatalf("CancelTask answered %s", got.Status.State)
				}
			} else {
				_, body, err := postRPC(ctx, pp.URL+"/a2a", `{"jsonrpc":"2.0","id":4,"method":"tasks/cancel","params":{"id":"`+string(task.ID)+`"}}`)
				if err != nil {
					t.Fatal(err)
				}
				var got struct {
					Result *struct {
						Status struct {
							State string `json:"state"`
						} `json:"status"`
					} `json:"result"`
				}
				if err := json.Unmarshal([]byte(body), &got); err != nil || got.Result == nil || got.Result.Status.State != "canceled" {
					t.Fatalf("tasks/cancel answered %s (%v)", body, err)
				}
			}
			close(gate.release)
			a := testkit.Receive(t, answered, 30*time.Second, "the second message was not answered")
			if a.err != nil {
				t.Fatal(a.err)
			}
			if e := rpcError(t, a.body); e == nil || !strings.Contains(e.Message, "terminal") {
				t.Errorf("the message checked before the cancel was answered %d %s, want refused as to a terminal task", a.status, a.body)
			}

			g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			var said []string
			for _, m := range g.History {
				said = append(said, string(m.Role)+": "+v1Text(m.Parts))
			}
			if g.Status.State != a2a.TaskStateCanceled || len(g.History) != 1 {
				t.Errorf("the task ends %s (history %v), want canceled with the first message alone", g.Status.State, said)
			}
			if n := ran.Load(); n != 0 {
				t.Errorf("%d later turns ran", n)
			}
		})
	}
}

// TestCancelRunningTaskCancelsTurnAppendedBeforeTheMark: a cancel of a
// running task that read the task before the client's next message was
// appended (its mark's compare-and-set lost: cancelRunning) reads the
// task again and cancels that message's turn too, with the running one.
// The turn never runs, the task ends canceled, and the task's next
// message is refused as to a task in a terminal state.
func TestCancelRunningTaskCancelsTurnAppendedBeforeTheMark(t *testing.T) {
	pp, started, ran := runningTaskPipeline(t)
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	send := func(text string, task *a2a.Task) (a2a.SendMessageResult, error) {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		if task != nil {
			m.TaskID, m.ContextID = task.ID, task.ContextID
		}
		return c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	}
	res, err := send("first", nil)
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	testkit.Receive(t, started, 30*time.Second, "the first turn did not start")
	if _, err := send("second", task); err != nil {
		t.Fatalf("the second message, while the first turn runs: %v", err)
	}

	ids, err := ingress.CancelRunningAsRead(ctx, pp.Ingress, string(task.ID), []string{string(task.ID)})
	if err != nil {
		t.Fatalf("the cancel: %v", err)
	}
	if len(ids) != 2 || ids[0] != string(task.ID) {
		t.Fatalf("the cancel read the requests %v, want the first turn and the second", ids)
	}
	var final *a2a.Task
	testkit.Eventually(t, 20*time.Second, "the task settles", func() bool {
		g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatal(err)
		}
		final = g
		return g.Status.State.Terminal()
	})
	if final.Status.State != a2a.TaskStateCanceled {
		t.Errorf("the task ends %s, want canceled", final.Status.State)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("%d later turns ran", n)
	}
	if _, err := send("third", task); err == nil || !strings.Contains(err.Error(), "terminal") {
		t.Errorf("a message to the canceled task: %v, want refused as to a terminal task", err)
	}
}
