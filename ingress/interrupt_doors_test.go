package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	a2av03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// interruptPipeline is a pipeline whose default pool "rv" asks for input on
// "the weather", streams some text then asks on "stream then ask", and
// answers anything else with "Hello, <text>".
func interruptPipeline(t *testing.T) *pipetest.Pipeline {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("rv")))
	p.Pool("rv", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		text, _ := env.Params["text"].(string)
		switch text {
		case "the weather":
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		case "stream then ask":
			if err := w.Chunk(e2a.DeltaText, "Let me check. "); err != nil {
				return err
			}
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		}
		if err := w.Chunk(e2a.DeltaText, "Hello, "+text); err != nil {
			return err
		}
		return w.Complete(nil)
	}))
	return p
}

func v1HistoryText(task *a2a.Task) string {
	var h []string
	for _, m := range task.History {
		h = append(h, string(m.Role)+": "+v1Text(m.Parts))
	}
	return strings.Join(h, " | ")
}

func v1ArtifactsText(task *a2a.Task) string {
	var s string
	for _, a := range task.Artifacts {
		s += v1Text(a.Parts)
	}
	return s
}

// interruptDoor starts interruptPipeline and its A2A v1.0 client, with a
// context the test's calls end by (30 s).
func interruptDoor(t *testing.T) (*pipetest.Pipeline, *a2aclient.Client, context.Context) {
	t.Helper()
	p := interruptPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return p, up.Client(t, p.URL), ctx
}

// answeredV1 answers the interrupted task with text over A2A v1.0
// (blocking SendMessage) and checks the turn completed with "Hello, <text>".
func answeredV1(t *testing.T, ctx context.Context, c *a2aclient.Client, task *a2a.Task, text string) {
	t.Helper()
	res, err := c.SendMessage(ctx, up.Reply(task, text))
	if err != nil {
		t.Fatalf("v1.0 answer %q: %v", text, err)
	}
	if done, ok := res.(*a2a.Task); !ok || done.Status.State != a2a.TaskStateCompleted || v1ArtifactsText(done) != "Hello, "+text {
		t.Fatalf("v1.0 answer %q: %T %+v", text, res, res)
	}
}

// TestV1AskedV03Answered: a task asked by A2A v1.0 is answered by
// A2A v0.3 (message/send with its taskId), and the reverse.
func TestV1AskedV03Answered(t *testing.T) {
	p, c, ctx := interruptDoor(t)
	c03 := v03ClientAt(t, p.URL)

	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	res, err := c03.SendMessage(ctx, answerFor(a2av03.TaskID(task.ID), "", "Paris"))
	if err != nil {
		t.Fatalf("v0.3 answer to the v1.0 task: %v", err)
	}
	if done, ok := res.(*a2av03.Task); !ok || string(done.ID) != string(task.ID) || done.Status.State != a2av03.TaskStateCompleted {
		t.Fatalf("v0.3 answer: %T %+v", res, res)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted || v1ArtifactsText(got) != "Hello, Paris" {
		t.Fatalf("GetTask after the v0.3 answer: %+v %v", got, err)
	}
	if h := v1HistoryText(got); h != "ROLE_USER: the weather | ROLE_AGENT: Which city? | ROLE_USER: Paris" {
		t.Fatalf("history %q", h)
	}

	asked := askedV03(t, ctx, c03, "the weather")
	answeredV1(t, ctx, c, &a2a.Task{ID: a2a.TaskID(asked.ID), ContextID: asked.ContextID}, "Rome")
}

// TestE2AAskedA2AAnswered: a task started over E2A (task_id) that
// asks for input, answered by A2A v1.0 naming the task.
func TestE2AAskedA2AAnswered(t *testing.T) {
	p, c, ctx := interruptDoor(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/requests?wait=true",
		strings.NewReader(`{"request_id":"rv-e2a-ask","task_id":"rv-e2a-task","params":{"text":"the weather"}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"input-required"`) {
		t.Fatalf("E2A ask: %d %s", resp.StatusCode, b)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: "rv-e2a-task"})
	if err != nil || got.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("GetTask of the E2A task: %+v %v", got, err)
	}
	answeredV1(t, ctx, c, got, "Paris")
}

// TestTextThenInterrupt: text streamed before the question stays in
// the task's history (an agent message), and the final status carries the
// question only (A2A v1.0 and v0.3). (The v1.0 stream shows that text as
// an artifact-update, GetTask as a history message: the pipeline's
// mapping of a turn's text that is not its final reply.)
func TestTextThenInterrupt(t *testing.T) {
	p, c, ctx := interruptDoor(t)
	c03 := v03ClientAt(t, p.URL)
	var last a2a.Event
	for ev, err := range c.SendStreamingMessage(ctx, up.Msg("stream then ask")) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	su, ok := last.(*a2a.TaskStatusUpdateEvent)
	if !ok || su.Status.State != a2a.TaskStateInputRequired || su.Status.Message == nil || v1Text(su.Status.Message.Parts) != "Which city?" {
		t.Fatalf("v1 stream's last %T %+v", last, last)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: su.TaskID})
	if err != nil || got.Status.Message == nil || v1Text(got.Status.Message.Parts) != "Which city?" ||
		v1HistoryText(got) != "ROLE_USER: stream then ask | ROLE_AGENT: Let me check. " {
		t.Fatalf("GetTask: %+v %v; history %q", got, err, v1HistoryText(got))
	}
	su03 := interruptedStream(t, c03.SendStreamingMessage(ctx, &a2av03.MessageSendParams{Message: a2av03.NewMessage(a2av03.MessageRoleUser,
		a2av03.TextPart{Text: "stream then ask"})}), a2av03.TaskStateInputRequired, "Which city?")
	t03, err := c03.GetTask(ctx, &a2av03.TaskQueryParams{ID: su03.TaskID})
	if err != nil || t03.Status.Message == nil || textOf(t03.Status.Message.Parts) != "Which city?" ||
		v03History(t03.History) != "user: stream then ask | agent: Let me check. " {
		t.Fatalf("v0.3 tasks/get: %+v %v; history %q", t03, err, v03History(t03.History))
	}
}

// interruptRPC posts a JSON-RPC body to /a2a with key as X-Api-Key and returns
// the answer.
func interruptRPC(t *testing.T, url, key, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/a2a", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestOtherPrincipalAnswersV03AndAgentVault: bob answering alice's
// input-required task by v0.3 message/send and AgentVault tasks/send is
// told the task does not exist, and alice's task is untouched.
func TestOtherPrincipalAnswersV03AndAgentVault(t *testing.T) {
	const aliceKey, bobKey = "ak_rv_alice_0123456789ab", "ak_rv_bob_00123456789abc"
	auth := pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "bob": bobKey}, nil)
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("rv"), ingress.WithAuth(auth)))
	p.Pool("rv", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
	}))
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := up.Asked(t, up.WithAPIKey(ctx, aliceKey), c, up.Msg("the weather"))
	v03 := interruptRPC(t, p.URL, bobKey, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"rv-bob-1","role":"user","taskId":"`+string(task.ID)+`","parts":[{"kind":"text","text":"bob v03"}]}}}`)
	av := interruptRPC(t, p.URL, bobKey, `{"jsonrpc":"2.0","id":2,"method":"tasks/send","params":{"id":"`+string(task.ID)+`","message":{"role":"user","parts":[{"type":"text","content":"bob av"}]}}}`)
	avSub := interruptRPC(t, p.URL, bobKey, `{"jsonrpc":"2.0","id":3,"method":"tasks/resubscribe","params":{"id":"`+string(task.ID)+`"}}`)
	get := interruptRPC(t, p.URL, bobKey, `{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"id":"`+string(task.ID)+`"}}`)
	t.Logf("v03 %s\nav %s\nresub %s\nget %s", v03, av, avSub, get)
	for _, s := range []string{v03, av, avSub, get} {
		if strings.Contains(s, "Which city") || strings.Contains(s, "the weather") || !strings.Contains(s, `"error"`) {
			t.Errorf("bob's call answered %s", s)
		}
	}
	got, err := c.GetTask(up.WithAPIKey(ctx, aliceKey), &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateInputRequired || strings.Contains(v1HistoryText(got), "bob") {
		t.Fatalf("alice's task after bob: %+v %v %q", got, err, v1HistoryText(got))
	}
}

// TestAuthAnswerSecretsNotStored: the answer to an auth-required
// task carrying credentials under secret keys (a data part, the
// message's metadata) is stored without them.
func TestAuthAnswerSecretsNotStored(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("rv")))
	seen := make(chan *e2a.Envelope, 4)
	p.Pool("rv", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		seen <- env
		if text, _ := env.Params["text"].(string); text == "the calendar" {
			return agent.Interrupt(w, e2a.StateAuthRequired, "Sign in, please.")
		}
		return w.Complete(nil)
	}))
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, up.Msg("the calendar"))
	if err != nil {
		t.Fatal(err)
	}
	task, _ := res.(*a2a.Task)
	if task == nil || task.Status.State != a2a.TaskStateAuthRequired {
		t.Fatalf("ask: %T %+v", res, res)
	}
	<-seen
	const secret = "hunter2-rv-s3cr3t"
	m := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("here you go"),
		a2a.NewDataPart(map[string]any{"username": "alice", "password": secret, "access_token": secret}))
	m.Metadata = map[string]any{"api_key": secret, "authorization": "Bearer " + secret}
	if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m, Metadata: map[string]any{"token": secret}}); err != nil {
		t.Fatal(err)
	}
	env := <-seen
	b, _ := json.Marshal(env)
	if strings.Contains(string(b), secret) {
		t.Errorf("the agent's envelope holds the secret: %s", b)
	}
	for _, name := range []string{"E2A_REQUESTS", "E2A_RESPONSES", "E2A_AUDIT"} {
		s, err := p.JS.Stream(ctx, name)
		if err != nil {
			continue
		}
		info, _ := s.Info(ctx)
		for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
			msg, err := s.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			if strings.Contains(string(msg.Data), secret) {
				t.Errorf("%s seq %d holds the secret: %s", name, seq, msg.Data)
			}
		}
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got)
	if strings.Contains(string(gb), secret) {
		t.Errorf("GetTask holds the secret: %s", gb)
	}
	t.Logf("envelope %s", b)
}

// TestSubscribedInterruptedTaskCanceled: SubscribeToTask on an
// input-required task (it follows the turn that comes next), then
// CancelTask: the subscription ends with the task canceled.
func TestSubscribedInterruptedTaskCanceled(t *testing.T) {
	_, c, ctx := interruptDoor(t)
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	var evs []a2a.Event
	for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
		if err != nil {
			t.Fatalf("subscription: %v (after %d events)", err, len(evs))
		}
		evs = append(evs, ev)
		if len(evs) == 1 {
			got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
			if err != nil || got.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("CancelTask: %+v %v", got, err)
			}
		}
	}
	last := evs[len(evs)-1]
	if su, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || su.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("the subscription ends %T %+v", last, last)
	}
}

// TestResubscribeInterruptedEnds: tasks/resubscribe (raw JSON-RPC
// on /a2a) of an input-required task ends at once with its final
// input-required status carrying the question (the turn is over).
func TestResubscribeInterruptedEnds(t *testing.T) {
	p, c, ctx := interruptDoor(t)
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, p.URL+"/a2a", strings.NewReader(`{"jsonrpc":"2.0","id":"av","method":"tasks/resubscribe","params":{"id":"`+string(task.ID)+`"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("tasks/resubscribe did not end: %v; read %s", err, b)
	}
	evs := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	lastEv := evs[len(evs)-1]
	if !strings.Contains(lastEv, `"final":true`) || !strings.Contains(lastEv, `"input-required"`) || !strings.Contains(lastEv, "Which city?") {
		t.Fatalf("tasks/resubscribe of the input-required task ends with %s", lastEv)
	}
}

// TestListTasksAuthRequired: ListTasks filtered by
// TASK_STATE_AUTH_REQUIRED lists the task asking for auth, not the one
// asking for input.
func TestListTasksAuthRequired(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := up.Asked(t, ctx, c, userMessage("ask:input the weather"))
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ask:auth the calendar"))})
	if err != nil {
		t.Fatal(err)
	}
	au, _ := res.(*a2a.Task)
	if au == nil || au.Status.State != a2a.TaskStateAuthRequired {
		t.Fatalf("ask auth: %T %+v", res, res)
	}
	for state, want := range map[a2a.TaskState]a2a.TaskID{a2a.TaskStateAuthRequired: au.ID, a2a.TaskStateInputRequired: in.ID} {
		list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{Status: state})
		if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != want || list.Tasks[0].Status.State != state {
			t.Fatalf("ListTasks %s: %+v %v", state, list, err)
		}
	}
}

// TestE2AAnswersA2ATask: the answer to an A2A v1.0 input-required
// task sent over E2A naming its task_id, streamed (SSE): a turn of the
// task, which completes it; GetTask holds both turns.
func TestE2AAnswersA2ATask(t *testing.T) {
	p, c, ctx := interruptDoor(t)
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/requests",
		strings.NewReader(`{"request_id":"rv-e2a-answer","task_id":"`+string(task.ID)+`","params":{"text":"Paris"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	frames := framesOf(t, readSSE(t, resp.Body))
	resp.Body.Close()
	if len(frames) == 0 || !frames[len(frames)-1].IsFinal || frames[len(frames)-1].TaskID != string(task.ID) {
		t.Fatalf("E2A answer frames %+v", frames)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted || v1ArtifactsText(got) != "Hello, Paris" || got.ContextID != task.ContextID {
		t.Fatalf("GetTask: %+v %v %q", got, err, v1HistoryText(got))
	}
	if h := v1HistoryText(got); h != "ROLE_USER: the weather | ROLE_AGENT: Which city? | ROLE_USER: Paris" {
		t.Fatalf("history %q", h)
	}
}

// TestCancelInterruptedV03AndAgentVault: v0.3 tasks/cancel and
// AgentVault tasks/cancel of an input-required task cancel it; a message
// to it is then refused.
func TestCancelInterruptedV03AndAgentVault(t *testing.T) {
	p, c, ctx := interruptDoor(t)
	for i, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"%s"}}`,
		`{"jsonrpc":"2.0","id":"av","method":"tasks/cancel","params":{"id":"%s"}}`,
	} {
		task := up.Asked(t, ctx, c, up.Msg("the weather"))
		got := interruptRPC(t, p.URL, "", fmt.Sprintf(body, task.ID))
		t.Logf("cancel %d: %s", i, got)
		now, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil || now.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("GetTask after cancel %d: %+v %v", i, now, err)
		}
		if _, err := c.SendMessage(ctx, up.Reply(task, "Paris")); err == nil {
			t.Fatalf("an answer to the canceled task was taken")
		}
	}
}

// TestAnswerWithOtherContextRefused: the answer to an
// input-required task naming the task but another contextId than the
// task's must be refused (A2A v1.0 §3.4.3: "Agents MUST reject messages
// containing mismatching contextId and taskId"; a2a-go/v2's own server
// answers InvalidParams, a2asrv/agentexec.go). Today it is taken as a turn
// of the task with the foreign context in its envelope (a bridge then
// looks the turn's upstream task up in that other conversation), and the
// answer's Task names the foreign context while GetTask names the task's.
// Over A2A v1.0 (a2a-go/v2) and v0.3 (a2a-go v0.3).
func TestAnswerWithOtherContextRefused(t *testing.T) {
	p, c, ctx := interruptDoor(t)
	c03 := v03ClientAt(t, p.URL)
	type answerFunc func(task *a2a.Task) (string, error)
	invalid := map[string]error{"v1": a2a.ErrInvalidParams, "v03": a2av03.ErrInvalidParams}
	answers := map[string]answerFunc{
		"v1": func(task *a2a.Task) (string, error) {
			m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Paris"))
			m.TaskID, m.ContextID = task.ID, "some-other-context"
			res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m})
			return fmt.Sprintf("%T %+v", res, res), err
		},
		"v03": func(task *a2a.Task) (string, error) {
			res, err := c03.SendMessage(ctx, answerFor(a2av03.TaskID(task.ID), "some-other-context", "Paris"))
			return fmt.Sprintf("%T %+v", res, res), err
		},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			task := up.Asked(t, ctx, c, up.Msg("the weather"))
			res, err := answer(task)
			if err == nil {
				now, _ := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
				t.Fatalf("the answer naming context %q (the task's is %q) was taken: %s; GetTask now %s in context %s",
					"some-other-context", task.ContextID, res, now.Status.State, now.ContextID)
			}
			if !errors.Is(err, invalid[name]) || !strings.Contains(err.Error(), "some-other-context") {
				t.Errorf("refused with %v, want InvalidParams naming the context", err)
			}
			if now, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || now.Status.State != a2a.TaskStateInputRequired {
				t.Errorf("the task after the refused answer: %v %v, want still input-required", now, err)
			}
		})
	}
}

// TestV1SubscriptionFollowsV03Answer: SubscribeToTask (A2A v1.0) on
// an input-required task follows the turn its answer starts when that
// answer comes over A2A v0.3, to the completed status.
func TestV1SubscriptionFollowsV03Answer(t *testing.T) {
	p, c, ctx := interruptDoor(t)
	c03 := v03ClientAt(t, p.URL)
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	var evs []a2a.Event
	for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
		if err != nil {
			t.Fatalf("subscription: %v", err)
		}
		evs = append(evs, ev)
		if len(evs) == 1 {
			if _, err := c03.SendMessage(ctx, answerFor(a2av03.TaskID(task.ID), task.ContextID, "Paris")); err != nil {
				t.Fatalf("v0.3 answer: %v", err)
			}
		}
	}
	if su, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent); !ok || su.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the subscription ends %T %+v", evs[len(evs)-1], evs[len(evs)-1])
	}
}

// TestAgentVaultAskedV1Answered: a task asked over AgentVault
// (tasks/send) answered over A2A v1.0 naming it: a turn of the task.
func TestAgentVaultAskedV1Answered(t *testing.T) {
	p, c, ctx := interruptDoor(t)
	got := interruptRPC(t, p.URL, "", `{"jsonrpc":"2.0","id":"av-1","method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"the weather"}]}}}`)
	var sent struct{ Result struct{ ID string } }
	if err := json.Unmarshal([]byte(got), &sent); err != nil || sent.Result.ID == "" {
		t.Fatalf("tasks/send: %s", got)
	}
	var task *a2a.Task
	testkit.Eventually(t, 10*time.Second, "the AgentVault task input-required", func() bool {
		tk, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(sent.Result.ID)})
		task = tk
		return err == nil && tk.Status.State == a2a.TaskStateInputRequired
	})
	answeredV1(t, ctx, c, task, "Paris")
}

// TestACPSessionThenA2A: an ACP session whose prompt asked for
// input; an A2A v1.0 message naming the session id as its task id is
// told the task does not exist (a session is no A2A task), and one naming
// it as its context id is a new A2A task of that context, never a turn of
// the session (its record untouched); the session's next prompt is
// answered.
func TestACPSessionThenA2A(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := p.acpSession(t)
	resp := p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"ask:input the weather"}]}}`)
	ndjsonMsgs(t, resp.Body)
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Paris"))
	m.TaskID = a2a.TaskID(sid)
	_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m})
	if err == nil {
		t.Errorf("an A2A message naming the ACP session as its task was taken")
	}
	m = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Paris"))
	m.ContextID = sid
	_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m})
	if err != nil {
		t.Fatalf("A2A message in the session's context: %v", err)
	}
	if rec := record(t, p.js, ingress.KindSession, sid); len(rec.RequestIDs) != 1 {
		t.Fatalf("the session's record lists %v after the A2A message; want its one prompt", rec.RequestIDs)
	}
	resp = p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"Paris"}]}}`)
	checkTurn(t, ndjsonMsgs(t, resp.Body), sid, "2", "Paris", "end_turn")
}
