package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// heldModel scripts srv: a call whose last user message is held waits
// (started is closed when it arrives) until release is closed or the call
// ends. The most calls in flight at once are the server's
// (modelServer.mostAtOnce: as the bridge sees them).
type heldModel struct {
	started, release chan struct{}
	once             sync.Once
}

func holdModel(srv *modelServer, held string) *heldModel {
	h := &heldModel{started: make(chan struct{}), release: make(chan struct{})}
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool {
		if body.lastUser() == held {
			h.once.Do(func() { close(h.started) })
			select {
			case <-h.release:
			case <-r.Context().Done():
				return true
			}
		}
		replay(w, echoStream("chatcmpl-held", body.Model, "echo: "+body.lastUser()))
		return true
	})
	return h
}

// sessionTurns is the number of prompts the ACP session's record holds.
func sessionTurns(t *testing.T, s acpSession, ts *ingress.TaskStore) int {
	t.Helper()
	rec, err := ts.Get(context.Background(), ingress.KindSession, string(s.ID))
	if err != nil {
		return 0
	}
	return len(rec.RequestIDs)
}

// heldSession starts an OpenAI-bridged pool, its task store and an ACP
// stdio session of it.
func heldSession(t *testing.T) (*modelServer, *pipetest.Pipeline, *ingress.TaskStore, acpSession) {
	t.Helper()
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	ts, err := ingress.NewTaskStore(context.Background(), p.JS)
	if err != nil {
		t.Fatal(err)
	}
	return srv, p, ts, openACPSession(t, p)
}

// promptResult is how one ACP prompt ended.
type promptResult struct {
	stop acp.StopReason
	err  error
}

// pipelinedPrompts starts an OpenAI-bridged pool whose model holds "one",
// opens an ACP stdio session, prompts "one", and once its model call runs
// prompts "two", which the session's record then holds behind it; the
// prompts' ends come on results.
func pipelinedPrompts(t *testing.T) (*modelServer, acpSession, *heldModel, <-chan promptResult) {
	t.Helper()
	srv, _, ts, s := heldSession(t)
	h := holdModel(srv, "one")
	results := make(chan promptResult, 2)
	prompt := func(text string) {
		r, err := s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		results <- promptResult{r.StopReason, err}
	}
	go prompt("one")
	select {
	case <-h.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the first prompt never reached the model")
	}
	go prompt("two")
	testkit.Eventually(t, 20*time.Second, "the second prompt in the session's record", func() bool {
		return sessionTurns(t, s, ts) == 2
	})
	return srv, s, h, results
}

// TestACPPipelinedPromptsOpenAIHistory: two prompts pipelined in
// one ACP stdio session of an OpenAI-bridged pool, the second sent while
// the first's model call runs: the second's model call starts after the
// first ended (never two at once) and sends the first turn (its user
// message and the model's reply) before its own.
func TestACPPipelinedPromptsOpenAIHistory(t *testing.T) {
	srv, _, h, results := pipelinedPrompts(t)
	close(h.release)
	for range 2 {
		r := <-results
		if r.err != nil || r.stop != acp.StopReasonEndTurn {
			t.Fatalf("prompt: %v %s, want end_turn", r.err, r.stop)
		}
	}
	if m := srv.mostAtOnce(); m != 1 {
		t.Errorf("%d model calls of one session at once, want 1", m)
	}
	calls := srv.recordedCalls()
	if len(calls) != 2 {
		t.Fatalf("%d model calls, want 2", len(calls))
	}
	wantMessages(t, "the pipelined second prompt", calls[1].Body.roles(),
		"user: one", "assistant: echo: one", "user: two")
}

// TestACPCancelRunningAndQueuedOpenAI: session/cancel while one
// prompt's model call runs and a second prompt waits behind it: both
// prompts end cancelled, and the session's next prompt runs alone with
// neither in its history. (The second may start its model call: a cancel
// read while its turn is recorded but not yet stored reaches it only once
// it is published, after the first ended: known, in the session note.)
func TestACPCancelRunningAndQueuedOpenAI(t *testing.T) {
	srv, s, h, results := pipelinedPrompts(t)
	if err := s.Conn.Cancel(s.Ctx, acp.CancelNotification{SessionId: s.ID}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := <-results
		if r.err != nil || r.stop != acp.StopReasonCancelled {
			t.Errorf("prompt: %v %q, want cancelled", r.err, r.stop)
		}
	}
	close(h.release)
	s.Rec.Take(s.ID)
	if got := s.prompt(t, "three"); got.text != "echo: three" {
		t.Fatalf("three: %+v", got)
	}
	wantMessages(t, "after the cancelled prompts", lastMessages(t, srv), "user: three")
	if m := srv.mostAtOnce(); m != 1 {
		t.Errorf("%d model calls of one session at once, want 1", m)
	}
}

// TestE2ATurnOfACPSessionOpenAIHistory: an E2A request naming an
// ACP session (session_id), sent while the session's prompt runs on an
// OpenAI-bridged pool, runs after it and sends the model that prompt and
// its reply before its own message.
func TestE2ATurnOfACPSessionOpenAIHistory(t *testing.T) {
	srv, p, ts, s := heldSession(t)
	h := holdModel(srv, "one")
	prompted := make(chan error, 1)
	go func() {
		_, err := s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{acp.TextBlock("one")}})
		prompted <- err
	}()
	select {
	case <-h.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the prompt never reached the model")
	}
	post(t, p, "", map[string]any{"request_id": "e2a-in-session", "session_id": string(s.ID), "method": "chat.send",
		"is_stream": true, "params": map[string]any{"content": "two"}})
	testkit.Eventually(t, 20*time.Second, "the E2A turn in the session's record", func() bool {
		return sessionTurns(t, s, ts) == 2
	})
	close(h.release)
	if err := <-prompted; err != nil {
		t.Fatal(err)
	}
	if a := read(t, frames(t, p, "", "e2a-in-session")); a.text != "echo: two" {
		t.Fatalf("E2A turn: %+v", a)
	}
	if m := srv.mostAtOnce(); m != 1 {
		t.Errorf("%d model calls of one session at once, want 1", m)
	}
	wantMessages(t, "the E2A turn of the ACP session", lastMessages(t, srv),
		"user: one", "assistant: echo: one", "user: two")
}

// acpPost posts body to url's /acp, reads the answer to its end and
// returns its status, and the result's stopReason or sessionId (the last
// JSON-RPC response of the NDJSON body).
func acpPost(ctx context.Context, url, body string) (status int, result map[string]any, raw string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/acp", strings.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, string(b), err
	}
	for _, line := range strings.Split(string(b), "\n") {
		var m struct {
			ID     any            `json:"id"`
			Result map[string]any `json:"result"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.ID != nil && m.Result != nil {
			result = m.Result
		}
	}
	return resp.StatusCode, result, string(b), nil
}

// TestACPHTTPConcurrentPromptsOpenAI: two session/prompt calls
// over ACP's HTTP transport, at once in one session of an
// OpenAI-bridged pool (the second sent while the first's model call
// runs): one model call at a time, the second sending the first turn
// before its own message; then a session/cancel while a third runs and a
// fourth waits ends both cancelled, the fourth never reaching the model.
func TestACPHTTPConcurrentPromptsOpenAI(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	ts, err := ingress.NewTaskStore(context.Background(), p.JS)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, created, raw, err := acpPost(ctx, p.URL, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	sid, _ := created["sessionId"].(string)
	if err != nil || sid == "" {
		t.Fatalf("session/new: %v %s", err, raw)
	}
	s := acpSession{&acptest.Session{ID: acp.SessionId(sid)}}
	type res struct {
		text, stop, raw string
		err             error
	}
	results := make(chan res, 2)
	prompt := func(id, text string) {
		_, r, raw, err := acpPost(ctx, p.URL, `{"jsonrpc":"2.0","id":"`+id+`","method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"`+text+`"}]}}`)
		stop, _ := r["stopReason"].(string)
		results <- res{text, stop, raw, err}
	}
	run := func(first, second string, during func()) {
		t.Helper()
		h := holdModel(srv, first)
		before := sessionTurns(t, s, ts)
		go prompt("p-"+first, first)
		select {
		case <-h.started:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s never reached the model", first)
		}
		go prompt("p-"+second, second)
		testkit.Eventually(t, 20*time.Second, "the second prompt in the session's record", func() bool {
			return sessionTurns(t, s, ts) == before+2
		})
		during()
		close(h.release)
		if m := srv.mostAtOnce(); m != 1 {
			t.Errorf("%d model calls of one session at once, want 1", m)
		}
	}
	run("one", "two", func() {})
	for range 2 {
		if r := <-results; r.err != nil || r.stop != "end_turn" {
			t.Fatalf("prompt %s: %v %q\n%s", r.text, r.err, r.stop, r.raw)
		}
	}
	wantMessages(t, "the concurrent second prompt", lastMessages(t, srv), "user: one", "assistant: echo: one", "user: two")
	run("three", "four", func() {
		_, _, raw, err := acpPost(ctx, p.URL, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"`+sid+`"}}`)
		if err != nil {
			t.Fatalf("session/cancel: %v %s", err, raw)
		}
		for range 2 {
			if r := <-results; r.err != nil || r.stop != "cancelled" {
				t.Errorf("prompt %s after session/cancel: %v %q\n%s", r.text, r.err, r.stop, r.raw)
			}
		}
	})
	for _, c := range srv.recordedCalls() {
		if c.Body.lastUser() == "four" {
			t.Errorf("the queued prompt reached the model: %v", c.Body.roles())
		}
	}
}

// openAIWorker runs a worker of pool p for srv on a connection of its
// own (the bridge as startBridge makes it), with a short ack wait so a
// dead worker's requests come back within a second; kill closes its
// connection first (no goodbye), then stops it.
func openAIWorker(t *testing.T, p *pipetest.Pipeline, srv *modelServer) (kill func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nc, err := nats.Connect(p.NC.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	convs, err := bridge.OpenConversations(ctx, p.JS, natstest.Config())
	if err != nil {
		t.Fatal(err)
	}
	client, err := bridge.NewClient(srv.base(), bridge.WithTransport(srv.transport()), bridge.WithCredentials(bridge.Credentials{APIKey: upstreamKey}))
	if err != nil {
		t.Fatal(err)
	}
	u, err := openai.New(client, "test-model", openai.WithHistory(pool, convs))
	if err != nil {
		t.Fatal(err)
	}
	h, err := bridge.New(pool, u, bridge.WithRetry(3, time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, nc, pool, h, agent.WithAckWait(time.Second), agent.WithHeartbeat(200*time.Millisecond))
	}()
	var once sync.Once
	kill = func() {
		once.Do(func() {
			nc.Close()
			cancel()
			<-done
		})
	}
	t.Cleanup(kill)
	return kill
}

// TestOpenAIWorkerKilledWithQueuedTurn: the worker holding an E2A
// task's running turn (its model call not answered yet) and the task's
// queued second turn dies; another worker takes both over: the first
// turn ends (answered), then the second runs, once, sending the first
// turn before its own message.
func TestOpenAIWorkerKilledWithQueuedTurn(t *testing.T) {
	srv := newModelServer(t)
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool(pool)))
	ts, err := ingress.NewTaskStore(context.Background(), p.JS)
	if err != nil {
		t.Fatal(err)
	}
	h := holdModel(srv, "one")
	killA := openAIWorker(t, p, srv)
	post(t, p, "", map[string]any{"request_id": "turn-one", "task_id": "task-k", "method": "chat.send",
		"is_stream": true, "params": map[string]any{"content": "one"}})
	select {
	case <-h.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the first turn never reached the model")
	}
	post(t, p, "", map[string]any{"request_id": "turn-two", "task_id": "task-k", "method": "chat.send",
		"is_stream": true, "params": map[string]any{"content": "two"}})
	testkit.Eventually(t, 20*time.Second, "the second turn in the task's record", func() bool {
		rec, err := ts.Get(context.Background(), ingress.KindTask, "task-k")
		return err == nil && len(rec.RequestIDs) == 2
	})
	killA()
	close(h.release)
	openAIWorker(t, p, srv)
	one := read(t, frames(t, p, "", "turn-one"))
	two := read(t, frames(t, p, "", "turn-two"))
	if one.text != "echo: one" || two.text != "echo: two" {
		t.Fatalf("after the takeover: first %q (%+v), second %q (%+v)", one.text, one.errBody, two.text, two.errBody)
	}
	var twos int
	for _, c := range srv.recordedCalls() {
		if c.Body.lastUser() == "two" {
			twos++
		}
	}
	if twos != 1 {
		t.Errorf("the second turn reached the model %d times, want once", twos)
	}
	wantMessages(t, "the second turn after the takeover", lastMessages(t, srv), "user: one", "assistant: echo: one", "user: two")
}

// stdioLines serves ACP over stdio from p and returns the writer of its
// input and the lines of its output (each a JSON-RPC message).
func stdioLines(t *testing.T, p *pipetest.Pipeline) (io.Writer, <-chan map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() { defer close(done); _ = ingress.ServeACPStdio(ctx, inR, outW, p.Ingress); _ = outW.Close() }()
	t.Cleanup(func() { _ = inW.Close(); cancel(); <-done })
	lines := make(chan map[string]any, 256)
	go func() {
		defer close(lines)
		dec := json.NewDecoder(outR)
		for {
			var m map[string]any
			if dec.Decode(&m) != nil {
				return
			}
			lines <- m
		}
	}()
	return inW, lines
}

// TestStdioPipelinedPromptsAndCancelOpenAI: ACP over stdio, lines
// written at once: prompts one and two, a session/cancel, prompt three
// (one's model call held). One and two end cancelled; three, read after
// the cancel, runs and is answered, sending neither cancelled prompt. Then four and five pipelined: five sends the
// model four's turn.
func TestStdioPipelinedPromptsAndCancelOpenAI(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	in, lines := stdioLines(t, p)
	// Calls are answered concurrently: an answer read while waiting for
	// another is kept for its own next.
	early := map[string]map[string]any{}
	next := func(id string) map[string]any {
		t.Helper()
		if m, ok := early[id]; ok {
			delete(early, id)
			return m
		}
		for m := range lines {
			got := fmt.Sprint(m["id"])
			if got == id {
				return m
			}
			if m["id"] != nil {
				early[got] = m
			}
		}
		t.Fatalf("no answer to %s", id)
		return nil
	}
	write := func(msgs ...string) {
		t.Helper()
		if _, err := io.WriteString(in, strings.Join(msgs, "\n")+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":"s","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	next("i")
	sid, _ := next("s")["result"].(map[string]any)["sessionId"].(string)
	if sid == "" {
		t.Fatal("no session")
	}
	prompt := func(id, text string) string {
		return `{"jsonrpc":"2.0","id":"` + id + `","method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"` + text + `"}]}}`
	}
	h := holdModel(srv, "one")
	write(prompt("p1", "one"), prompt("p2", "two"),
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"`+sid+`"}}`, prompt("p3", "three"))
	stops := map[string]string{}
	for len(stops) < 3 {
		m, ok := <-lines
		if !ok {
			t.Fatal("stdio ended")
		}
		if r, _ := m["result"].(map[string]any); r != nil {
			stops[fmt.Sprint(m["id"])], _ = r["stopReason"].(string)
		} else if m["error"] != nil {
			stops[fmt.Sprint(m["id"])] = fmt.Sprint(m["error"])
		}
	}
	close(h.release)
	if stops["p1"] != "cancelled" || stops["p2"] != "cancelled" || stops["p3"] != "end_turn" {
		t.Errorf("stop reasons %v, want p1 and p2 cancelled, p3 end_turn", stops)
	}
	// Two, read before the cancel but queued behind one, is cancelled once
	// it is published (ingress/stdio.go): it may start its model call
	// before the cancel reaches its worker, but it ends cancelled and is no
	// turn of the session's history.
	// Three's call, found by its message: the cancelled one's call may
	// still reach the model after it (CI on cb942ce: the last call held
	// "user: one"; see the s46 note), which is no turn of the history.
	var three []string
	for _, c := range srv.recordedCalls() {
		if c.Body.lastUser() == "three" {
			three = c.Body.roles()
		}
	}
	wantMessages(t, "the prompt after the cancel", three, "user: three")
	srv.setScript(nil)
	write(prompt("p4", "four"), prompt("p5", "five"))
	next("p4")
	next("p5")
	wantMessages(t, "the pipelined fifth prompt", lastMessages(t, srv),
		"user: three", "assistant: echo: three", "user: four", "assistant: echo: four", "user: five")
}
