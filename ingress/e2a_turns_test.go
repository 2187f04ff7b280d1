package ingress_test

import (
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
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// An E2A request with a task_id is a turn of that task, as the README's
// interrupted-task example answers a task ("a new envelope with the same
// task_id") and issue 38 §3 asks of every front door: recorded on the
// task, run after its earlier turn, refused when the task is another
// principal's (design.md guarantee 6).

// e2aError decodes an E2A error body.
func e2aError(t *testing.T, body []byte) egress.APIErrorBody {
	t.Helper()
	var b egress.APIError
	if err := json.Unmarshal(body, &b); err != nil || b.Error.Code == "" {
		t.Fatalf("not an E2A error body (%v): %s", err, body)
	}
	return b.Error
}

// checkNotPublished fails when E2A_REQUESTS holds a request of id.
func checkNotPublished(t *testing.T, nc *nats.Conn, id string) {
	t.Helper()
	subj, err := subjects.RequestAnyPool(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := streams.LastBySubject(context.Background(), nc, streams.RequestsStream, subj); !errors.Is(err, streams.ErrNoMessages) {
		t.Errorf("request %s was published (%v); want nothing published", id, err)
	}
}

// TestE2ATurnsOfOneTaskRunOneAfterAnother: two E2A requests naming one
// task_id, the second sent while the first (slow) one runs: the second's
// first frame is stored after the first's final frame.
func TestE2ATurnsOfOneTaskRunOneAfterAnother(t *testing.T) {
	p := startPipeline(t)
	r := p.post(t, "/v1/requests", "", `{"request_id":"rv-e2a-1","task_id":"rv-e2a-task","params":{"text":"first","frames":5,"delay_ms":150}}`)
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("first turn: %d", r.StatusCode)
	}
	r = p.post(t, "/v1/requests?wait=true", "", `{"request_id":"rv-e2a-2","task_id":"rv-e2a-task","params":{"text":"second","frames":1}}`)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("second turn: %d", r.StatusCode)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	if r := p.get(t, "/v1/requests/rv-e2a-1?wait=true"); r.StatusCode != http.StatusOK {
		t.Fatalf("first turn's answer: %d", r.StatusCode)
	}
	first, final := turnFrames(t, p.nc, []string{"rv-e2a-1", "rv-e2a-2"})
	if first[1] <= final[0] {
		t.Fatalf("turns of one E2A task overlap: the second turn's first frame is at stream sequence %d, before the first turn's final frame at %d; "+
			"want the second turn of task_id rv-e2a-task to start only after the first ended", first[1], final[0])
	}
	if rec := record(t, p.js, ingress.KindTask, "rv-e2a-task"); !slices.Equal(rec.RequestIDs, []string{"rv-e2a-1", "rv-e2a-2"}) {
		t.Errorf("the task's record lists %v; want both turns, in order", rec.RequestIDs)
	}
}

// slowA2ATask starts an A2A v1.0 task on the demo pool whose turn runs a
// while (delay_ms 150 between frames), returned at once (returnImmediately).
func slowA2ATask(t *testing.T, ctx context.Context, c interface {
	SendMessage(context.Context, *a2a.SendMessageRequest) (a2a.SendMessageResult, error)
}) *a2a.Task {
	t.Helper()
	first := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("first"))
	first.Metadata = map[string]any{"delay_ms": 150}
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: first, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage result %T", res)
	}
	return task
}

// TestE2ATurnOfRunningA2ATaskRunsAfterIt: a task started by an A2A v1.0
// client (a2a-go/v2) whose turn runs, then a message naming the same task
// id and context sent by the same principal over E2A (two protocols, one
// task): it is a turn of the task, started only after the running turn's
// final frame, and GetTask, once terminal, holds its reply.
func TestE2ATurnOfRunningA2ATaskRunsAfterIt(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := slowA2ATask(t, ctx, c)
	body := fmt.Sprintf(`{"request_id":"rv-x-2","task_id":%q,"context_id":%q,"params":{"text":"second","frames":1}}`, task.ID, task.ContextID)
	r := p.post(t, "/v1/requests?wait=true", "", body)
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(r.Body)
		t.Fatalf("an E2A turn of the caller's own running A2A task: %d %s; want it accepted as the task's next turn", r.StatusCode, b)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	var final *a2a.Task
	testkit.Eventually(t, 20*time.Second, "the A2A task's final state", func() bool {
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		final = got
		return got.Status.State.Terminal()
	})
	firstTurn := string(task.ID) // the task's first request is named by the task id
	f, fin := turnFrames(t, p.nc, []string{firstTurn, "rv-x-2"})
	if f[1] <= fin[0] {
		t.Errorf("an E2A message naming A2A task %s ran beside its running turn: its first frame at stream sequence %d, the A2A turn's final frame at %d; "+
			"want it queued after the running turn", task.ID, f[1], fin[0])
	}
	var art string
	for _, a := range final.Artifacts {
		art += v1Text(a.Parts)
	}
	if !strings.Contains(art, "You said: second") {
		t.Errorf("GetTask of the completed task %s holds artifacts %q: want every accepted turn's reply, the E2A turn's \"You said: second\" too", task.ID, art)
	}
}

// TestE2ATurnOfFinishedA2ATaskRefused: an A2A task that has completed
// takes no more messages over A2A, nor over E2A: 409 task_terminal, with
// nothing published.
func TestE2ATurnOfFinishedA2ATaskRefused(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("done soon"))})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("SendMessage result %T %+v", res, res)
	}
	resp, b := testkit.Do(t, http.MethodPost, p.url+"/v1/requests", fmt.Sprintf(`{"request_id":"after-done","task_id":%q,"params":{"text":"more"}}`, task.ID))
	if resp.StatusCode != http.StatusConflict || e2aError(t, b).Code != e2aproto.CodeTaskTerminal {
		t.Fatalf("an E2A turn of completed A2A task %s: %d %s; want 409 %s", task.ID, resp.StatusCode, b, e2aproto.CodeTaskTerminal)
	}
	checkNotPublished(t, p.nc, "after-done")
}

// TestE2ATaskIDOfAnotherPrincipalsTaskRefused: alice's A2A task asks for
// input; bob, knowing its id, posts an E2A request naming that task_id.
// A2A refuses bob's message naming alice's task (task not found); E2A
// refuses it as a request_id of another principal's: 409 conflict, saying
// nothing of the task, nothing published, and the agent never gets an
// envelope of bob naming alice's task. A task_id nobody has yet starts a
// task of the caller's, which alice may not continue in her turn.
func TestE2ATaskIDOfAnotherPrincipalsTaskRefused(t *testing.T) {
	const aliceKey, bobKey = "ak_rv_alice_0123456789", "ak_rv_bob_000123456789"
	auth := pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "bob": bobKey}, nil)
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth), ingress.WithDefaultPool("keeper")))
	got := make(chan *e2a.Envelope, 8)
	p.Pool("keeper", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		got <- env
		if text, _ := env.Params["text"].(string); text == "the weather" {
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		}
		return w.Complete(map[string]any{"text": "ok"})
	}))
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(up.WithAPIKey(ctx, aliceKey), up.Msg("the weather"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("alice's question: %T %+v", res, res)
	}
	<-got
	// A2A refuses bob's answer on alice's task.
	if _, err := c.SendMessage(up.WithAPIKey(ctx, bobKey), up.Reply(task, "bob's answer")); err == nil {
		t.Fatalf("A2A took bob's message naming alice's task %s", task.ID)
	}
	resp, body := testkit.Do(t, http.MethodPost, p.URL+"/v1/requests?wait=true",
		fmt.Sprintf(`{"request_id":"bob-on-alice","task_id":%q,"params":{"text":"bob's answer"}}`, task.ID), "X-Api-Key", bobKey)
	if resp.StatusCode != http.StatusConflict || e2aError(t, body).Code != e2aproto.CodeConflict || strings.Contains(string(body), "alice") {
		t.Fatalf("bob's E2A request naming alice's task %s: %d %s; want 409 conflict, saying nothing of the task", task.ID, resp.StatusCode, body)
	}
	checkNotPublished(t, p.NC, "bob-on-alice")
	// A task_id nobody has: bob's new task, which alice may not continue.
	resp, body = testkit.Do(t, http.MethodPost, p.URL+"/v1/requests?wait=true", `{"task_id":"bobs-own-task","params":{"text":"mine"}}`, "X-Api-Key", bobKey)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's new task: %d %s", resp.StatusCode, body)
	}
	resp, body = testkit.Do(t, http.MethodPost, p.URL+"/v1/requests", `{"request_id":"alice-on-bob","task_id":"bobs-own-task","params":{"text":"hers"}}`, "X-Api-Key", aliceKey)
	if resp.StatusCode != http.StatusConflict || e2aError(t, body).Code != e2aproto.CodeConflict {
		t.Fatalf("alice's E2A request naming bob's E2A task: %d %s; want 409 conflict", resp.StatusCode, body)
	}
	checkNotPublished(t, p.NC, "alice-on-bob")
	for {
		select {
		case env := <-got:
			if env.TaskID == string(task.ID) || (env.TaskID == "bobs-own-task" && env.UserID != "bob") {
				t.Fatalf("the agent got %s's envelope naming task %s (another principal's)", env.UserID, env.TaskID)
			}
		default: // (?wait=true answered after the request's final frame: a handler that ran has sent its envelope)
			return
		}
	}
}

// TestE2ASessionIDOfACPSession: an E2A request whose session_id names an
// ACP session is a turn of that session when it is the caller's (recorded
// on the session, run after the session's running prompt) and refused 409
// conflict, nothing published, when it is another principal's.
func TestE2ASessionIDOfACPSession(t *testing.T) {
	const alice, bob = "ak_alice_0123456789abcdef", "ak_bob_0123456789abcdefgh"
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(pipetest.KeyAuth(t, map[string]string{"alice": alice, "bob": bob}, nil))))
	p.Pool("demo", demo.New())
	_, b := testkit.Do(t, http.MethodPost, p.URL+"/acp", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`, "X-Api-Key", alice)
	var created struct {
		Result struct{ SessionID string } `json:"result"`
	}
	if json.Unmarshal(b, &created) != nil || created.Result.SessionID == "" {
		t.Fatalf("session/new: %s", b)
	}
	sid := created.Result.SessionID
	prompted := make(chan struct{})
	go func() {
		defer close(prompted)
		req, _ := http.NewRequest(http.MethodPost, p.URL+"/acp",
			strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"first"}],"delay_ms":150}}`))
		req.Header.Set("X-Api-Key", alice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	testkit.Eventually(t, 10*time.Second, "the prompt in the session's record", func() bool {
		return len(record(t, p.JS, ingress.KindSession, sid).RequestIDs) == 1
	})
	resp, b := testkit.Do(t, http.MethodPost, p.URL+"/v1/requests", `{"request_id":"bob-in-session","session_id":"`+sid+`","params":{"text":"steal"}}`, "X-Api-Key", bob)
	if resp.StatusCode != http.StatusConflict || e2aError(t, b).Code != e2aproto.CodeConflict {
		t.Fatalf("bob's E2A request naming alice's ACP session: %d %s; want 409 conflict", resp.StatusCode, b)
	}
	checkNotPublished(t, p.NC, "bob-in-session")
	resp, b = testkit.Do(t, http.MethodPost, p.URL+"/v1/requests?wait=true", `{"request_id":"alice-in-session","session_id":"`+sid+`","params":{"text":"second","frames":1}}`, "X-Api-Key", alice)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's E2A request in her ACP session: %d %s", resp.StatusCode, b)
	}
	<-prompted
	ids := record(t, p.JS, ingress.KindSession, sid).RequestIDs
	if len(ids) != 2 || ids[1] != "alice-in-session" {
		t.Fatalf("the session's record lists %v; want the prompt, then the E2A turn", ids)
	}
	checkTurnsInOrder(t, p.NC, ids)
}

// TestE2ATurnRetriedAfterA2ATaskEndedIsDuplicate: an E2A turn of the caller's
// running A2A task is accepted, runs and completes the task. The client's
// connection dropped before it read the 202, so it retries the very same
// request (same request_id, the README's idempotent retry). The retry must
// be answered as the duplicate it is (the stored request), not refused 409
// task_terminal: a client reading 409 believes its message was never
// taken, while the agent has already acted on it.
func TestE2ATurnRetriedAfterA2ATaskEndedIsDuplicate(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := slowA2ATask(t, ctx, c)
	body := fmt.Sprintf(`{"request_id":"retry-turn-after-end","task_id":%q,"params":{"text":"second","frames":1}}`, task.ID)
	r := p.post(t, "/v1/requests?wait=true", "", body)
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(r.Body)
		t.Fatalf("the E2A turn: %d %s", r.StatusCode, b)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	testkit.Eventually(t, 20*time.Second, "the A2A task's final state", func() bool {
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		return got.Status.State.Terminal()
	})
	// The idempotent retry of the accepted turn.
	resp, b := testkit.Do(t, http.MethodPost, p.url+"/v1/requests", body)
	var acc struct {
		RequestID string `json:"request_id"`
		Duplicate bool   `json:"duplicate"`
	}
	_ = json.Unmarshal(b, &acc)
	if resp.StatusCode >= 300 || acc.RequestID != "retry-turn-after-end" || !acc.Duplicate {
		t.Fatalf("the retry (same request_id) of E2A turn retry-turn-after-end, accepted and run, after its task %s ended: %d %s; "+
			"want the duplicate's answer naming the stored request (2xx, \"duplicate\": true; docs/protocols.md: the same request_id posted twice is one request), as any retry of an accepted request gets, not a refusal saying it was never taken",
			task.ID, resp.StatusCode, b)
	}
}

// TestE2AConcurrentTurnsOfOneTaskAllAccepted: a client sends a
// burst of requests naming one task_id at once (a fan-out of one job's
// steps, labelled with the job as task_id, as E2A allowed before task_id
// made a turn). Since 846e3fd each is a turn of that task, appended to its
// record by compare-and-set: with the bound on waiting turns off
// (WithMaxWaitingTurns(0)) every one must still be accepted (queued after
// the one before, design.md's "a second message to a running task is
// queued rather than refused"), none refused 503 because the record
// changed under it too often. With the default bound (6 turns waiting),
// a turn past it is refused 429 too_many_turns, retryable, and still none
// 503: the burst took every delivery of the pool before the bound.
func TestE2AConcurrentTurnsOfOneTaskAllAccepted(t *testing.T) {
	for _, bound := range []int{0, ingress.DefaultMaxWaitingTurns} {
		t.Run(fmt.Sprintf("bound %d", bound), func(t *testing.T) {
			p := startPipelineWith(t, ingress.WithMaxWaitingTurns(bound))
			const n = 100
			codes := make(chan string, n)
			start := make(chan struct{})
			for i := range n {
				go func() {
					<-start
					req, _ := http.NewRequest(http.MethodPost, p.url+"/v1/requests",
						strings.NewReader(fmt.Sprintf(`{"request_id":"burst-%d","task_id":"burst-job","params":{"text":"step %d","frames":1}}`, i, i)))
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						codes <- err.Error()
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					codes <- fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
				}()
			}
			close(start)
			var refused []string
			accepted := 0
			for range n {
				c := <-codes
				switch {
				case strings.HasPrefix(c, "202 "):
					accepted++
				case bound > 0 && strings.HasPrefix(c, "429 ") && strings.Contains(c, `"too_many_turns"`) && strings.Contains(c, `"retryable":true`):
				default:
					refused = append(refused, c)
				}
			}
			if len(refused) > 0 {
				t.Fatalf("%d of %d concurrent requests naming task_id burst-job refused, the first: %s; want every one accepted (202) as the task's next turn, queued, "+
					"or past the bound on waiting turns 429 too_many_turns; never 503", len(refused), n, refused[0])
			}
			if bound > 0 && accepted < bound+1 {
				t.Errorf("%d of %d turns accepted; want at least the running turn and the %d allowed to wait", accepted, n, bound)
			}
		})
	}
}
