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

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// The turns of one task or session that may wait behind its running turn
// are bounded (ingress.WithMaxWaitingTurns): each holds its delivery in the
// pool's MaxAckPending, so without the bound one principal's long turn and
// MaxAckPending − 1 more turns of its task stopped the pool for everyone.

const (
	aliceTurnsKey = "ak_alice_turns_0123456789abcdef"
	bobTurnsKey   = "ak_bob_turns_0123456789abcdef01"
)

// heldPool starts a pipeline of alice and bob (API keys aliceTurnsKey,
// bobTurnsKey) whose turns of a task or session wait behind at most
// maxWaiting turns, its demo pool served by a handler that holds a
// request whose text is "hold" until release is closed (closed at the
// test's end) and completes every other at once, with pool options opts.
func heldPool(t *testing.T, maxWaiting int, opts ...agent.Option) (p *pipetest.Pipeline, held <-chan string, release func()) {
	t.Helper()
	auth := pipetest.KeyAuth(t, map[string]string{"alice": aliceTurnsKey, "bob": bobTurnsKey}, nil)
	p = pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithAuth(auth), ingress.WithMaxWaitingTurns(maxWaiting)))
	h := make(chan string, 64)
	rel := make(chan struct{})
	p.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if demo.Text(env) == "hold" {
			h <- env.RequestID
			select {
			case <-rel:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return w.Complete(map[string]any{"text": "done " + demo.Text(env)})
	}), opts...)
	closed := false
	release = func() {
		if !closed {
			closed = true
			close(rel)
		}
	}
	t.Cleanup(release)
	return p, h, release
}

// postTurn posts an E2A request with key (query the path's query, body's
// JSON members after params), returning its status, Retry-After and body.
func postTurn(t *testing.T, p *pipetest.Pipeline, key, query, body string) (*http.Response, []byte) {
	t.Helper()
	return testkit.Do(t, "POST", p.URL+"/v1/requests"+query, body, "Content-Type", "application/json", "X-Api-Key", key)
}

// TestWaitingTurnsBounded: alice's task has a held turn and k turns
// waiting behind it; her next turn of the task is refused 429 with
// Retry-After in E2A's error body (too_many_turns, retryable), nothing
// published, counted; meanwhile bob's request, on a pool whose
// MaxAckPending is k + 2, is delivered and answered while alice's turn is
// still held (the pool is not stopped); once alice's turns ended, the
// same turn is accepted. Without the bound (WithMaxWaitingTurns(0), as
// before it existed) the turn was accepted (202), and its delivery took
// the pool's last one: bob's request was stored and never delivered while
// alice's turn ran.
func TestWaitingTurnsBounded(t *testing.T) {
	const k = 2
	p, held, release := heldPool(t, k, agent.WithMaxAckPending(k+2))
	task := `"task_id":"t-bounded"`
	if r, b := postTurn(t, p, aliceTurnsKey, "", `{"request_id":"wt-0",`+task+`,"params":{"text":"hold"}}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("the held turn: %d %s", r.StatusCode, b)
	}
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the held turn never ran")
	}
	for i := 1; i <= k; i++ {
		if r, b := postTurn(t, p, aliceTurnsKey, "", fmt.Sprintf(`{"request_id":"wt-%d",%s,"params":{"text":"w%d"}}`, i, task, i)); r.StatusCode != http.StatusAccepted {
			t.Fatalf("waiting turn %d of %d: %d %s; want it accepted", i, k, r.StatusCode, b)
		}
	}
	before := requestsStored(t, &pipeline{js: p.JS})
	refused := fmt.Sprintf(`{"request_id":"wt-%d",%s,"params":{"text":"one too many"}}`, k+1, task)
	r, b := postTurn(t, p, aliceTurnsKey, "", refused)
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); r.StatusCode != http.StatusTooManyRequests || ra < 1 {
		t.Fatalf("a turn with %d turns waiting behind the task's running one: %d, Retry-After %q, %s; want 429 with Retry-After", k, r.StatusCode, r.Header.Get("Retry-After"), b)
	}
	if e := e2aError(t, b); e.Code != "too_many_turns" || !e.Retryable {
		t.Errorf("the refusal's body: %+v; want code too_many_turns, retryable", e)
	}
	if after := requestsStored(t, &pipeline{js: p.JS}); after != before {
		t.Errorf("E2A_REQUESTS holds %d messages after the refusal, %d before: want nothing published", after, before)
	}
	checkNotPublished(t, p.NC, fmt.Sprintf("wt-%d", k+1))
	if rec := record(t, p.JS, ingress.KindTask, "t-bounded"); len(rec.RequestIDs) != k+1 {
		t.Errorf("the task's record lists %v; want the %d turns accepted only", rec.RequestIDs, k+1)
	}
	if s := testkit.Series(t, p.Registry, "e2a_ingress_turns_refused_total"); len(s) != 1 || s[0].Value != 1 || s[0].Labels["protocol"] != "e2a" {
		t.Errorf("e2a_ingress_turns_refused_total: %+v; want one refusal of protocol e2a", s)
	}

	// Bob's request is delivered and answered while alice's turn is held
	// (without the bound it was stored and never delivered: its wait is
	// cut).
	req, err := http.NewRequest("POST", p.URL+"/v1/requests?wait=true", strings.NewReader(`{"request_id":"wt-bob","params":{"text":"bob"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ingress.HeaderAPIKey, bobTurnsKey)
	rb, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("bob's request while alice's turn is held: %v; want it delivered and answered", err)
	}
	bb, err := io.ReadAll(rb.Body)
	_ = rb.Body.Close()
	if err != nil || rb.StatusCode != http.StatusOK || !strings.Contains(string(bb), "done bob") {
		t.Fatalf("bob's request while alice's turn is held: %d %s (%v); want it answered", rb.StatusCode, bb, err)
	}
	select {
	case id := <-held:
		t.Fatalf("%s ran beside the held turn", id)
	default:
	}

	release()
	if r, b := testkit.Do(t, "GET", p.URL+fmt.Sprintf("/v1/requests/wt-%d?wait=true", k), "", "X-Api-Key", aliceTurnsKey); r.StatusCode != http.StatusOK {
		t.Fatalf("alice's last waiting turn: %d %s", r.StatusCode, b)
	}
	if r, b := postTurn(t, p, aliceTurnsKey, "", refused); r.StatusCode != http.StatusAccepted {
		t.Errorf("the refused turn sent again once the task's turns ended: %d %s; want it accepted", r.StatusCode, b)
	}
}

// TestWaitingTurnsRefusedOnEveryDoor: with one turn allowed to wait, a
// task (or ACP session) with a held turn and one waiting takes no more:
// the next message is refused as each door refuses for want of a stream
// slot, retryable: A2A v1.0 through the a2a-go/v2 client on JSON-RPC
// (-32029), HTTP+JSON (429 RESOURCE_EXHAUSTED) and gRPC
// (RESOURCE_EXHAUSTED with a RetryInfo), A2A v0.3 JSON-RPC, AgentVault's
// tasks/send and ACP's session/prompt (-32029, 429 with Retry-After on
// their raw HTTP answers).
func TestWaitingTurnsRefusedOnEveryDoor(t *testing.T) {
	p, held, release := heldPool(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	awaitHeld := func(what string) {
		t.Helper()
		select {
		case <-held:
		case <-ctx.Done():
			t.Fatalf("%s: the held turn never ran", what)
		}
	}
	tp := &pipeline{url: p.URL, nc: p.NC, js: p.JS}
	for _, b := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC} {
		c := keyClientOf(t, tp, b, aliceTurnsKey, func(*a2a.AgentCard) {})
		send := func(msg *a2a.Message) (a2a.SendMessageResult, error) {
			return c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
		}
		res, err := send(a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hold")))
		task, ok := res.(*a2a.Task)
		if err != nil || !ok {
			t.Fatalf("%s: the held turn: %T %v", b, res, err)
		}
		awaitHeld(string(b))
		next := func() error {
			m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("next"))
			m.TaskID, m.ContextID = task.ID, task.ContextID
			_, err := send(m)
			return err
		}
		if err := next(); err != nil {
			t.Fatalf("%s: the one turn allowed to wait: %v", b, err)
		}
		err = next()
		if err == nil {
			t.Errorf("%s: a second turn waiting accepted; want it refused", b)
			continue
		}
		// The JSON-RPC transport reads the HTTP status of the refusal
		// (429), as it reads the stream slots'; the others its message.
		want := "too many turns"
		if b == a2a.TransportProtocolJSONRPC {
			want = "429"
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: the refusal the client read: %v; want the pipeline's too-many-turns refusal (%q)", b, err, want)
		}
	}

	// A2A v0.3 JSON-RPC, raw.
	v03 := func(id, taskID, contextID, text string) (*http.Response, []byte) {
		ids := ""
		if taskID != "" {
			ids = fmt.Sprintf(`,"taskId":%q,"contextId":%q`, taskID, contextID)
		}
		return testkit.Do(t, "POST", p.URL+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"configuration":{"blocking":false},`+
			`"message":{"kind":"message","role":"user","messageId":"`+id+`","parts":[{"kind":"text","text":"`+text+`"}]`+ids+`}}}`,
			"Content-Type", "application/json", "X-Api-Key", aliceTurnsKey)
	}
	r, body := v03("m03-0", "", "", "hold")
	var started struct {
		Result struct {
			ID        string `json:"id"`
			ContextID string `json:"contextId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &started); err != nil || started.Result.ID == "" {
		t.Fatalf("v0.3 held turn: %d %s", r.StatusCode, body)
	}
	awaitHeld("v0.3")
	if r, body := v03("m03-1", started.Result.ID, started.Result.ContextID, "next"); rpcCode(body) != "0" {
		t.Fatalf("v0.3: the one turn allowed to wait: %d %s", r.StatusCode, body)
	}
	checkRefused := func(door string, r *http.Response, body []byte) {
		t.Helper()
		ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
		if r.StatusCode != http.StatusTooManyRequests || ra < 1 || rpcCode(body) != strconv.Itoa(jsonrpc.CodeRateLimited) {
			t.Errorf("%s: a second turn waiting: %d, Retry-After %q, %s; want 429, Retry-After, JSON-RPC %d", door, r.StatusCode,
				r.Header.Get("Retry-After"), body, jsonrpc.CodeRateLimited)
		}
	}
	r, body = v03("m03-2", started.Result.ID, started.Result.ContextID, "next")
	checkRefused("v0.3", r, body)

	// AgentVault tasks/send, raw: answered with the task's id at once.
	av := func(id, taskID, text string) (*http.Response, []byte) {
		named := ""
		if taskID != "" {
			named = fmt.Sprintf(`"id":%q,`, taskID)
		}
		return testkit.Do(t, "POST", p.URL+"/a2a", `{"jsonrpc":"2.0","id":"`+id+`","method":"tasks/send","params":{`+named+
			`"message":{"role":"user","parts":[{"type":"text","content":"`+text+`"}]}}}`,
			"Content-Type", "application/json", "X-Api-Key", aliceTurnsKey)
	}
	r, body = av("av-0", "", "hold")
	var avTask struct {
		Result struct {
			ID string `json:"id"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &avTask); err != nil || avTask.Result.ID == "" {
		t.Fatalf("AgentVault held turn: %d %s", r.StatusCode, body)
	}
	awaitHeld("agentvault")
	if r, body := av("av-1", avTask.Result.ID, "next"); rpcCode(body) != "0" {
		t.Fatalf("AgentVault: the one turn allowed to wait: %d %s", r.StatusCode, body)
	}
	r, body = av("av-2", avTask.Result.ID, "next")
	checkRefused("agentvault", r, body)

	// ACP session/prompt: a prompt's answer waits for its turn's end.
	sid := acpNewSession(t, p.URL, aliceTurnsKey)
	answered := make(chan struct{}, 2)
	for i, text := range []string{"hold", "next"} {
		go func() {
			defer func() { answered <- struct{}{} }()
			resp := acpPost(t, p.URL, aliceTurnsKey, promptBody(strconv.Itoa(i+1), sid, text, false))
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}()
		if i == 0 {
			awaitHeld("acp")
		}
	}
	testkit.Eventually(t, 20*time.Second, "the ACP session's waiting prompt recorded", func() bool {
		return len(record(t, p.JS, ingress.KindSession, sid).RequestIDs) == 2
	})
	r, body = testkit.Do(t, "POST", p.URL+"/acp", promptBody("3", sid, "next", false), "X-Api-Key", aliceTurnsKey)
	checkRefused("acp", r, body)

	got := map[string]float64{}
	for _, s := range testkit.Series(t, p.Registry, "e2a_ingress_turns_refused_total") {
		got[s.Labels["protocol"]] = s.Value
	}
	if len(got) != 3 || got["a2a"] != 4 || got["agentvault"] != 1 || got["acp"] != 1 {
		t.Errorf("e2a_ingress_turns_refused_total by protocol: %v; want a2a 4 (v1.0's three bindings, v0.3), agentvault 1, acp 1", got)
	}
	// The ACP prompts answered once their turns ran, before the pool stops.
	release()
	for range 2 {
		select {
		case <-answered:
		case <-ctx.Done():
			t.Fatal("the ACP prompts were not answered once the held turn ended")
		}
	}
}

// TestMaxWaitingTurnsOptionRefusesNegative: a negative bound is
// ErrInvalidOption, naming the option (0 turns it off).
func TestMaxWaitingTurnsOptionRefusesNegative(t *testing.T) {
	_, err := ingress.New(nil, nil, ingress.WithMaxWaitingTurns(-1))
	if !errors.Is(err, ingress.ErrInvalidOption) || !strings.Contains(err.Error(), "waiting turns") {
		t.Errorf("WithMaxWaitingTurns(-1): %v; want ErrInvalidOption naming the bound", err)
	}
}
