package ingress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// startStdio runs ServeACPStdio over pipes against an embedded pipeline
// with the demo agent. Closing in ends it; done reports its return.
func startStdio(t *testing.T, opts ...ingress.Option) (in io.WriteCloser, out io.Reader, done <-chan error) {
	t.Helper()
	in, out, done, _ = startStdioConn(t, opts...)
	return in, out, done
}

// startStdioConn is startStdio, also returning a connection to its server.
func startStdioConn(t *testing.T, opts ...ingress.Option) (in io.WriteCloser, out io.Reader, done <-chan error, nc *nats.Conn) {
	t.Helper()
	return startStdioHooked(t, nil, nil, opts...)
}

// startStdioHooked is startStdioConn with a hook of ServeACPStdio
// (ingress.WithStdioHook) and an agent instead of the demo, if not nil.
func startStdioHooked(t *testing.T, hook func(event, method string), h agent.Handler, opts ...ingress.Option) (in io.WriteCloser, out io.Reader, done <-chan error, nc *nats.Conn) {
	t.Helper()
	srv, nc := stdioPipeline(t, h, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	sctx := ctx
	if hook != nil {
		sctx = ingress.WithStdioHook(ctx, hook)
	}
	go func() {
		err := ingress.ServeACPStdio(sctx, inR, outW, srv)
		_ = outW.Close()
		errc <- err
	}()
	t.Cleanup(func() { _ = inW.Close() })
	return inW, outR, errc, nc
}

// stdioPipeline is an embedded pipeline whose pool "demo" is served by h
// (the demo agent when nil) until the test ends: the server stdio is
// served from.
func stdioPipeline(t testing.TB, h agent.Handler, opts ...ingress.Option) (*ingress.Server, *nats.Conn) {
	t.Helper()
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	eg, err := egress.New(nc, egress.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ingress.New(nc, eg, append([]ingress.Option{ingress.WithRegisterer(reg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		if h == nil {
			h = demo.New()
		}
		_ = agent.Run(ctx, nc, "demo", h, agent.WithMetrics(reg))
	}()
	t.Cleanup(func() { cancel(); <-agentDone })
	return srv, nc
}

// stdioReader reads a stdio server's output: every line must be a JSON
// object.
type stdioReader struct {
	t     *testing.T
	lines chan map[string]any
}

func readStdio(t *testing.T, out io.Reader) *stdioReader {
	r := &stdioReader{t: t, lines: make(chan map[string]any, 256)}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("stdout line is not JSON: %q", sc.Text())
				continue
			}
			r.lines <- m
		}
	}()
	return r
}

// next returns the next response (skipping notifications).
func (r *stdioReader) next() map[string]any {
	r.t.Helper()
	for {
		select {
		case m, ok := <-r.lines:
			if !ok {
				r.t.Fatal("stdout closed")
			}
			if _, isResp := m["id"]; isResp {
				return m
			}
		case <-time.After(15 * time.Second):
			r.t.Fatal("no answer")
		}
	}
}

// send writes s to in.
// initSession initializes the stdio connection (in, read by r) and
// opens a session on it, one call after the other, and returns its id.
func initSession(t *testing.T, in io.Writer, r *stdioReader) string {
	t.Helper()
	send(t, in, `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":1}}`+"\n")
	r.next()
	send(t, in, `{"jsonrpc":"2.0","id":"s","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`+"\n")
	sid, _ := r.next()["result"].(map[string]any)["sessionId"].(string)
	if sid == "" {
		t.Fatal("no session")
	}
	return sid
}

func send(t *testing.T, in io.Writer, s string) {
	t.Helper()
	if _, err := io.WriteString(in, s); err != nil {
		t.Fatal(err)
	}
}

// recClient is the shared recording ACP client (internal/acptest).
type recClient = acptest.Recorder

func newRecClient() *recClient { return acptest.NewRecorder() }

// openStdioSession connects acp-go-sdk's client, recording its updates, to
// the stdio pipes of a served connection, initializes it and opens a
// session. The context ends after d or with the test.
func openStdioSession(t *testing.T, in io.Writer, out io.Reader, d time.Duration) (context.Context, *acp.ClientSideConnection, *recClient, acp.SessionId) {
	t.Helper()
	client := newRecClient()
	conn := acp.NewClientSideConnection(client, in, out)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	s, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/work", McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, conn, client, s.SessionId
}

// updateKinds returns the kinds of updates, consecutive repeats folded, and
// the joined agent message text.
func updateKinds(ups []acp.SessionUpdate) (string, string) {
	var kinds []string
	var text strings.Builder
	for _, u := range ups {
		k := "?"
		switch {
		case u.UserMessageChunk != nil:
			k = "user_message_chunk"
		case u.AgentMessageChunk != nil:
			k = "agent_message_chunk"
			if u.AgentMessageChunk.Content.Text != nil {
				text.WriteString(u.AgentMessageChunk.Content.Text.Text)
			}
		case u.AgentThoughtChunk != nil:
			k = "agent_thought_chunk"
		case u.ToolCall != nil:
			k = "tool_call"
		case u.ToolCallUpdate != nil:
			k = "tool_call_update"
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != k {
			kinds = append(kinds, k)
		}
	}
	return strings.Join(kinds, " "), text.String()
}

const demoTurn = "agent_thought_chunk tool_call tool_call_update agent_message_chunk"

func TestStdioSDKClient(t *testing.T) {
	in, out, done := startStdio(t)
	client := newRecClient()
	conn := acp.NewClientSideConnection(client, in, out)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	ini, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil || ini.ProtocolVersion != acp.ProtocolVersionNumber || !ini.AgentCapabilities.LoadSession {
		t.Fatalf("initialize: %+v %v", ini, err)
	}
	newSession := func() acp.SessionId {
		s, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/work", McpServers: []acp.McpServer{}})
		if err != nil || s.SessionId == "" {
			t.Fatalf("session/new: %+v %v", s, err)
		}
		return s.SessionId
	}
	prompt := func(ctx context.Context, sid acp.SessionId, text string, params map[string]any) (acp.PromptResponse, error) {
		req := acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}}
		if params != nil {
			req.Meta = map[string]any{"e2a_params": params}
		}
		return conn.Prompt(ctx, req)
	}

	// One turn.
	sid := newSession()
	res, err := prompt(ctx, sid, "hello", nil)
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	if kinds, text := updateKinds(client.Take(sid)); kinds != demoTurn || text != "You said: hello" {
		t.Fatalf("updates %q %q", kinds, text)
	}

	// Several prompts in flight at once, on several sessions.
	sessions := []acp.SessionId{newSession(), newSession(), newSession()}
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := prompt(ctx, s, "parallel "+string(rune('a'+i)), map[string]any{"delay_ms": 20})
			if err != nil || res.StopReason != acp.StopReasonEndTurn {
				t.Errorf("parallel prompt %d: %+v %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	for i, s := range sessions {
		if kinds, text := updateKinds(client.Take(s)); kinds != demoTurn || text != "You said: parallel "+string(rune('a'+i)) {
			t.Fatalf("session %d: %q %q", i, kinds, text)
		}
	}

	// session/cancel while the prompt streams.
	client.CancelMidTurn(t, ctx, conn, sid, func() (acp.PromptResponse, error) {
		return prompt(ctx, sid, "slow", map[string]any{"delay_ms": 200})
	})
	if n := len(client.Take(sid)); n > 3 {
		t.Fatalf("%d updates after a cancel at the first", n)
	}

	// The client gives up on a prompt ($/cancel_request, then
	// session/cancel): the pipeline request is cancelled too, and the
	// session keeps working.
	pctx, pcancel := context.WithCancel(ctx)
	client.Forget()
	abandoned := make(chan error, 1)
	go func() {
		_, err := prompt(pctx, sid, "abandoned", map[string]any{"delay_ms": 200})
		abandoned <- err
	}()
	client.WaitUpdate(t, sid)
	pcancel()
	if err := <-abandoned; err == nil {
		t.Fatal("abandoned prompt returned no error")
	}
	res, err = prompt(ctx, sid, "again", nil)
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after cancels: %+v %v", res, err)
	}
	client.Take(sid)

	// session/load replays the history: 4 prompts, each with its user
	// message first.
	if _, err := conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sid, Cwd: "/work", McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, u := range client.Take(sid) {
		if u.UserMessageChunk != nil {
			users++
		}
	}
	if users != 4 {
		t.Fatalf("replayed %d user messages, want 4", users)
	}
	// No modes are advertised: the SDK's SetSessionMode gets -32601.
	if _, err := conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: sid, ModeId: "code"}); err == nil {
		t.Fatal("set_mode accepted")
	} else if re, ok := err.(*acp.RequestError); !ok || re.Code != -32601 {
		t.Fatalf("set_mode: %v", err)
	}
	if _, err := conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: "unknown", Cwd: "/work", McpServers: []acp.McpServer{}}); err == nil {
		t.Fatal("loaded an unknown session")
	} else if re, ok := err.(*acp.RequestError); !ok || re.Code != jsonrpc.CodeACPResourceNotFound {
		t.Fatalf("unknown session: %v", err)
	}

	_ = in.Close()
	err = testkit.Receive(t, done, 10*time.Second, "ServeACPStdio did not return after the end of its input")
	if err != nil {
		t.Fatalf("ServeACPStdio: %v", err)
	}
}

// TestStdioLines drives the stdio server with raw lines: malformed input,
// limits, notifications, a cancel that overtakes its prompt, and
// $/cancel_request of a call waiting for an agent.
func TestStdioLines(t *testing.T) {
	in, out, done := startStdio(t, ingress.WithMaxBodyBytes(4096))
	r := readStdio(t, out)
	next := r.next
	send := func(s string) {
		t.Helper()
		send(t, in, s)
	}
	code := func(m map[string]any) int {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return int(c)
	}

	send("\n   \n" + `not json` + "\n")
	if m := next(); code(m) != -32700 || m["id"] != nil {
		t.Fatalf("garbage: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"` + strings.Repeat("a", 8000) + `"}}` + "\n")
	if m := next(); code(m) != -32600 || m["id"] != float64(1) {
		t.Fatalf("too long: want -32600 to its id 1: %v", m)
	}
	// Not UTF-8: refused -32700 to its id, which could be read (an error
	// to id null answers no call); an id that is not UTF-8 itself cannot be.
	send(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1,"x":"` + "\xff" + `"}}` + "\n")
	if m := next(); code(m) != -32700 || m["id"] != float64(7) {
		t.Fatalf("not UTF-8: want -32700 to its id 7: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":"` + "\xff" + `","method":"initialize","params":{"protocolVersion":1}}` + "\n")
	if m := next(); code(m) != -32700 || m["id"] != nil {
		t.Fatalf("an id not UTF-8: want -32700 to id null: %v", m)
	}
	// A byte order mark that starts a line is dropped (RFC 8259 §8.1 lets a
	// parser ignore it; .NET's UTF-8 writer puts one first).
	send("\xEF\xBB\xBF" + `{"jsonrpc":"2.0","id":"bom","method":"initialize","params":{"protocolVersion":1}}` + "\n")
	if m := next(); m["id"] != "bom" || m["result"] == nil {
		t.Fatalf("a line after a byte order mark: want initialize's result to id bom: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"no/such"}` + "\n" + `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":1}}` + "\r\n")
	if m := next(); m["id"] != "i" || m["result"] == nil {
		t.Fatalf("initialize after a notification: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}` + "\n")
	sid, _ := next()["result"].(map[string]any)["sessionId"].(string)
	if sid == "" {
		t.Fatal("no session")
	}

	// A cancel right behind its prompt, before the prompt was published.
	// The agent waits 2 s between frames, so that a cancel that comes after
	// the publish on a loaded machine still finds the prompt running (with
	// 100 ms, a CI run under load saw the prompt end first).
	send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"x"}],"delay_ms":2000}}` + "\n" +
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}` + "\n")
	if m := next(); m["id"] != float64(3) || m["result"].(map[string]any)["stopReason"] != "cancelled" {
		t.Fatalf("overtaken prompt: %v", m)
	}

	// $/cancel_request of a pass-through call waiting for its agent.
	send(`{"jsonrpc":"2.0","id":"slow","method":"_vendor/slow","params":{"sessionId":"` + sid + `","text":"m","delay_ms":5000}}` + "\n")
	send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"slow"}}` + "\n")
	if m := next(); m["id"] != "slow" || code(m) != jsonrpc.CodeACPRequestCancelled {
		t.Fatalf("cancelled request: %v", m)
	}

	_ = in.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for m := range r.lines {
		t.Fatalf("unexpected output after the end: %v", m)
	}
}

// TestStdioCancelFollowsItsRequest: a session/cancel read right behind its
// prompt, before the prompt's request is published, is published after the
// request. A worker proves a request it picks up has no cancel from the
// cancels it received live since it started, so a cancel stored before its
// request, by a worker starting in between, is missed (CI once saw the
// overtaken prompt of TestStdioLines end with end_turn). Every prompt still
// ends cancelled.
func TestStdioCancelFollowsItsRequest(t *testing.T) {
	in, out, done, nc := startStdioConn(t)
	// The requests and the cancels reach one channel in the order the
	// server received them (one connection's messages are delivered in
	// order, and its reader pushes both subscriptions' into the channel).
	seen := make(chan *nats.Msg, 64)
	for _, subj := range []string{subjects.AllRequests, subjects.AllControl} {
		sub, err := nc.ChanSubscribe(subj, seen)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	r := readStdio(t, out)
	send(t, in, `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":1}}`+"\n")
	r.next()
	const prompts = 4
	for i := range prompts {
		send(t, in, `{"jsonrpc":"2.0","id":"s","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`+"\n")
		sid, _ := r.next()["result"].(map[string]any)["sessionId"].(string)
		if sid == "" {
			t.Fatal("no session")
		}
		send(t, in, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"x"}],"delay_ms":2000}}`+"\n"+
			`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"`+sid+`"}}`+"\n")
		if m := r.next(); m["id"] != float64(i) || m["result"].(map[string]any)["stopReason"] != "cancelled" {
			t.Fatalf("prompt %d: %v", i, m)
		}
	}
	_ = in.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	requested := map[string]bool{}
	cancels := 0
	for cancels < prompts {
		var m *nats.Msg
		m = testkit.Receive(t, seen, 10*time.Second, "%d cancels seen of %d", cancels, prompts)
		if _, id, err := subjects.ParseRequest(m.Subject); err == nil {
			requested[id] = true
			continue
		}
		id, err := subjects.ParseControl(m.Subject)
		if err != nil {
			continue
		}
		cancels++
		if !requested[id] {
			t.Errorf("the cancel of %s was published before its request", id)
		}
	}
}

// TestStdioBatchAndAuth: a batch read on stdio is answered as one line
// holding the array of responses (a streaming method inside it refused
// alone), and a server whose auth has no none scheme refuses every stdio
// message with ACP's -32000: no credential can be presented there.
func TestStdioBatchAndAuth(t *testing.T) {
	exchange := func(t *testing.T, in io.WriteCloser, out io.Reader, msg string) json.RawMessage {
		t.Helper()
		if _, err := io.WriteString(in, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	t.Run("batch", func(t *testing.T) {
		in, out, _ := startStdio(t)
		line := exchange(t, in, out, `[{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":1}},`+
			`{"jsonrpc":"2.0","id":"b","method":"session/prompt","params":{"sessionId":"s","prompt":[]}},`+
			`{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":1}}]`)
		var resps []struct {
			ID     string          `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *ingress.Error  `json:"error"`
		}
		if err := json.Unmarshal(line, &resps); err != nil || len(resps) != 2 {
			t.Fatalf("batch answer %s", line)
		}
		if resps[0].ID != "a" || resps[0].Error != nil || !strings.Contains(string(resps[0].Result), `"protocolVersion":1`) {
			t.Fatalf("initialize in a batch: %s", line)
		}
		if resps[1].ID != "b" || resps[1].Error == nil || resps[1].Error.Code != jsonrpc.CodeInvalidRequest {
			t.Fatalf("session/prompt in a batch: %s", line)
		}
	})
	// A refusal answers the call's own id (a client waits for that id: it
	// was answered to id null, and an SDK's call never returned), each
	// call's in a batch, and no notification.
	t.Run("auth without none", func(t *testing.T) {
		in, out, _ := startStdio(t, withAPIKey(t))
		r := bufio.NewReader(out)
		send := func(msg string) json.RawMessage {
			t.Helper()
			if _, err := io.WriteString(in, msg+"\n"); err != nil {
				t.Fatal(err)
			}
			line, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatal(err)
			}
			return line
		}
		line := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
		var resp struct {
			ID    json.RawMessage `json:"id"`
			Error *ingress.Error  `json:"error"`
		}
		if err := json.Unmarshal(line, &resp); err != nil || resp.Error == nil || resp.Error.Code != jsonrpc.CodeACPAuthRequired || string(resp.ID) != "1" {
			t.Fatalf("stdio under auth: %s", line)
		}
		// A notification gets nothing: the next answer is the batch's.
		if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`+"\n"); err != nil {
			t.Fatal(err)
		}
		line = send(`[{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":1}},` +
			`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}},` +
			`{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}]`)
		var resps []struct {
			ID    json.RawMessage `json:"id"`
			Error *ingress.Error  `json:"error"`
		}
		if err := json.Unmarshal(line, &resps); err != nil || len(resps) != 2 || string(resps[0].ID) != `"a"` || string(resps[1].ID) != "7" ||
			resps[0].Error == nil || resps[1].Error == nil || resps[1].Error.Code != jsonrpc.CodeACPAuthRequired {
			t.Fatalf("a batch under auth: %s", line)
		}
	})
}

// cancelBeforePrompt holds the handler of the first session/cancel of a
// stdio server until the prompt read after it either published its request
// (the cancel then finds it recorded in the session) or waits for the
// cancel: the order in which a cancel handled late cancelled the next
// prompt. It watches the pipeline's requests and cancels on the wire, and
// its agent (the demo) holds a request with params.hold until that was
// checked, so the cancel cannot find it ended.
type cancelBeforePrompt struct {
	held    chan struct{} // closed when the cancel's handler is held
	handled chan struct{} // closed when it returned
	gated   chan struct{} // closed when a prompt waits for a cancel
	release chan struct{}
	checked chan struct{} // closed by notCancelled: held requests run
	hold    sync.Once
	done    sync.Once
	gate    sync.Once
	stop    <-chan struct{}

	nc       *nats.Conn
	requests chan *nats.Msg
	cancels  chan *nats.Msg
}

func newCancelBeforePrompt(t *testing.T) *cancelBeforePrompt {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &cancelBeforePrompt{held: make(chan struct{}), handled: make(chan struct{}), gated: make(chan struct{}),
		release: make(chan struct{}), checked: make(chan struct{}), stop: ctx.Done(),
		requests: make(chan *nats.Msg, 64), cancels: make(chan *nats.Msg, 64)}
}

func (h *cancelBeforePrompt) hook(event, method string) {
	switch {
	case event == "run" && method == "session/cancel":
		first := false
		h.hold.Do(func() { first = true; close(h.held) })
		if first {
			select {
			case <-h.release:
			case <-h.stop:
			}
		}
	case event == "done" && method == "session/cancel":
		h.done.Do(func() { close(h.handled) })
	case event == "wait" && method == "session/prompt":
		h.gate.Do(func() { close(h.gated) })
	}
}

// agent is the demo agent, holding a request with params.hold = true until
// notCancelled checked it (or it is cancelled).
func (h *cancelBeforePrompt) agent() agent.Handler {
	return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.Params["hold"] == true {
			select {
			case <-h.checked:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return demo.New().Serve(ctx, env, w)
	})
}

// start starts a stdio connection hooked by h, served by h's agent, h
// watching its pipeline, and opens a session: its input, its output's
// reader, the session and the connection's end.
func (h *cancelBeforePrompt) start(t *testing.T) (io.WriteCloser, *stdioReader, string, <-chan error) {
	t.Helper()
	in, out, done, nc := startStdioHooked(t, h.hook, h.agent())
	h.watch(t, nc)
	r := readStdio(t, out)
	return in, r, initSession(t, in, r), done
}

// watch subscribes to the requests and cancels of the pipeline of nc.
func (h *cancelBeforePrompt) watch(t *testing.T, nc *nats.Conn) {
	t.Helper()
	h.nc = nc
	for subj, c := range map[string]chan *nats.Msg{subjects.AllRequests: h.requests, subjects.AllControl: h.cancels} {
		sub, err := nc.ChanSubscribe(subj, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// request returns the id of the next request published.
func (h *cancelBeforePrompt) request(t *testing.T) string {
	t.Helper()
	select {
	case m := <-h.requests:
		_, id, err := subjects.ParseRequest(m.Subject)
		if err != nil {
			t.Fatal(err)
		}
		return id
	case <-time.After(15 * time.Second):
		t.Fatal("no request published")
		return ""
	}
}

// releaseAfter releases the held cancel once the next request is published
// or a prompt waits for the cancel; it returns that request's id (after
// the release, once published).
func (h *cancelBeforePrompt) releaseAfter(t *testing.T) string {
	t.Helper()
	testkit.Receive(t, h.held, 15*time.Second, "no session/cancel was handled")
	var m *nats.Msg
	select {
	case m = <-h.requests:
	case <-h.gated:
	case <-time.After(15 * time.Second):
		t.Fatal("the prompt after the cancel neither published nor waited")
	}
	close(h.release)
	if m == nil {
		return h.request(t)
	}
	_, id, err := subjects.ParseRequest(m.Subject)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// notCancelled fails t if the held cancel's handler, once returned,
// cancelled request id: its cancels were acknowledged before it returned,
// and a flush brings what the server sent before.
func (h *cancelBeforePrompt) notCancelled(t *testing.T, id string) {
	t.Helper()
	testkit.Receive(t, h.handled, 15*time.Second, "the session/cancel's handler did not return")
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	defer close(h.checked)
	for {
		select {
		case m := <-h.cancels:
			if cid, err := subjects.ParseControl(m.Subject); err == nil && cid == id {
				t.Errorf("request %s, read after the session/cancel, was cancelled", id)
			}
		default:
			return
		}
	}
}

// TestStdioPromptAfterAbandoned: acp-go-sdk's client gives up on a prompt
// (its context ends: it queues $/cancel_request, sends session/cancel) and
// prompts again at once. The session/cancel's handler is held until the
// new prompt published its request or waits for the cancel, the order in
// which the handler, reading the session after the new prompt was recorded
// there, cancelled it (TestStdioSDKClient's flake "prompt after cancels:
// StopReason cancelled"). The new prompt is answered end_turn, with its
// text.
func TestStdioPromptAfterAbandoned(t *testing.T) {
	h := newCancelBeforePrompt(t)
	in, out, _, nc := startStdioHooked(t, h.hook, h.agent())
	h.watch(t, nc)
	ctx, conn, client, sid := openStdioSession(t, in, out, 60*time.Second)
	prompt := func(ctx context.Context, text string, params map[string]any) (acp.PromptResponse, error) {
		return conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)},
			Meta: map[string]any{"e2a_params": params}})
	}

	pctx, pcancel := context.WithCancel(ctx)
	abandoned := make(chan error, 1)
	go func() {
		_, err := prompt(pctx, "abandoned", map[string]any{"delay_ms": 2000})
		abandoned <- err
	}()
	client.WaitUpdate(t, sid)
	h.request(t) // the abandoned prompt's
	pcancel()
	if err := <-abandoned; err == nil {
		t.Fatal("abandoned prompt returned no error")
	}
	client.Take(sid)
	type result struct {
		res acp.PromptResponse
		err error
	}
	again := make(chan result, 1)
	go func() {
		res, err := prompt(ctx, "again", map[string]any{"hold": true})
		again <- result{res, err}
	}()
	h.notCancelled(t, h.releaseAfter(t))
	r := <-again
	if r.err != nil || r.res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after the abandoned one: %+v %v", r.res, r.err)
	}
	if _, text := updateKinds(client.Take(sid)); text != "You said: again" {
		t.Fatalf("prompt after the abandoned one: text %q", text)
	}
}

// TestStdioCancelsNameTheirTurn drives the order on the wire: a prompt
// streams; then, in one write, session/cancel, a new prompt, and the
// $/cancel_request of the first prompt (acp-go-sdk sends that one from a
// goroutine of its own, so it can trail the new prompt). The cancel's
// handler is held as in TestStdioPromptAfterAbandoned. Each cancel ends
// only the turn it names: the first prompt ends cancelled, the second
// end_turn, and no cancel names the second's request; a late
// $/cancel_request of the answered second prompt leaves a third alone.
func TestStdioCancelsNameTheirTurn(t *testing.T) {
	h := newCancelBeforePrompt(t)
	in, r, sid, done := h.start(t)
	promptLine := func(id int, text, params string) string {
		return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"session/prompt","params":{"sessionId":"` + sid +
			`","prompt":[{"type":"text","text":"` + text + `"}]` + params + "}}\n"
	}
	send(t, in, promptLine(1, "first", `,"delay_ms":2000`))
	for m := range r.lines {
		if m["method"] == "session/update" {
			break
		}
	}
	h.request(t) // the first prompt's
	send(t, in, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"`+sid+`"}}`+"\n"+
		promptLine(2, "second", `,"hold":true`)+
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`+"\n")
	h.notCancelled(t, h.releaseAfter(t))
	stop := map[float64]any{}
	for len(stop) < 2 {
		m := r.next()
		res, _ := m["result"].(map[string]any)
		id, _ := m["id"].(float64)
		stop[id] = res["stopReason"]
	}
	if stop[1] != "cancelled" || stop[2] != "end_turn" {
		t.Fatalf("stop reasons %v, want 1 cancelled, 2 end_turn", stop)
	}
	send(t, in, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`+"\n"+promptLine(3, "third", ""))
	if m := r.next(); m["id"] != float64(3) || m["result"].(map[string]any)["stopReason"] != "end_turn" {
		t.Fatalf("prompt after a stale $/cancel_request: %v", m)
	}
	_ = in.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStdioLoadReplaysPromptBlocks: session/load must replay every
// content block the client prompted with (ACP: "the Agent MUST replay the
// entire conversation"), equal to what was sent.
func TestStdioLoadReplaysPromptBlocks(t *testing.T) {
	in, out, _, nc := startStdioConn(t)
	// The demo pool takes the image and audio blocks (its input modes).
	publishPoolInfo(t, nc, bridge.PoolInfo{Pool: "demo", Streaming: true, InputModes: []string{"text/plain", "image/*", "audio/*"}})
	ctx, conn, client, sid := openStdioSession(t, in, out, 60*time.Second)
	desc := "a doc"
	mt := "text/plain"
	blocks := []acp.ContentBlock{
		acp.TextBlock("hello"),
		acp.ImageBlock("aGVsbG8=", "image/png"),
		acp.AudioBlock("aGVsbG8=", "audio/wav"),
		acp.ResourceLinkBlock("notes", "file:///work/notes.md"),
		{ResourceLink: &acp.ContentBlockResourceLink{Type: "resource_link", Name: "spec", Uri: "https://example.com/spec", Description: &desc, MimeType: &mt}},
		acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: "file:///work/a.go", Text: "package a", MimeType: &mt}}),
		acp.ResourceBlock(acp.EmbeddedResourceResource{BlobResourceContents: &acp.BlobResourceContents{Uri: "file:///work/a.bin", Blob: "AAEC"}}),
	}
	res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: blocks})
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	client.Take(sid)
	if _, err := conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sid, Cwd: "/work", McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range client.Take(sid) {
		if u.UserMessageChunk != nil {
			b, _ := json.Marshal(u.UserMessageChunk.Content)
			got = append(got, string(b))
		}
	}
	var want []string
	for _, b := range blocks {
		j, _ := json.Marshal(b)
		want = append(want, string(j))
	}
	if len(got) != len(want) {
		t.Fatalf("session/load replayed %d user blocks, want the %d prompted:\n got %q\nwant %q", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("session/load must replay prompt block %d as sent: got %s want %s", i, got[i], want[i])
		}
	}
}

// TestStdioPromptsKeepReadOrder: two session/prompt lines of one
// session written back to back are turns in the order read: the first
// prompt's updates and result come before any update of the second, and
// the turns never overlap.
func TestStdioPromptsKeepReadOrder(t *testing.T) {
	in, out, _ := startStdio(t)
	r := readStdio(t, out)
	send(t, in, `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":1}}`+"\n")
	r.next()
	for round := 0; round < 40; round++ {
		send(t, in, `{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`+"\n")
		m := r.next()
		sid := m["result"].(map[string]any)["sessionId"].(string)
		p := func(id, text string) string {
			return `{"jsonrpc":"2.0","id":"` + id + `","method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"` + text + `"}]}}` + "\n"
		}
		send(t, in, p("A", "first")+p("B", "second"))
		var seq []string
		results := 0
		for results < 2 {
			select {
			case m, ok := <-r.lines:
				if !ok {
					t.Fatal("stdout closed")
				}
				if id, ok := m["id"]; ok {
					seq = append(seq, "result:"+id.(string))
					results++
					continue
				}
				u := m["params"].(map[string]any)["update"].(map[string]any)
				if u["sessionUpdate"] == "agent_message_chunk" {
					seq = append(seq, "text:"+u["content"].(map[string]any)["text"].(string))
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("round %d: no answer; so far %q", round, seq)
			}
		}
		// The first prompt's result must come before any text of the second.
		joined := strings.ReplaceAll(strings.Join(seq, "|"), "|text:", "")
		ra := strings.Index(joined, "result:A")
		sb := strings.Index(joined, "second")
		fa := strings.Index(joined, "first")
		if ra < 0 || sb < 0 || fa < 0 || !(fa < ra && ra < sb) {
			t.Fatalf("round %d: prompts A then B read in that order must be turns in that order (A's text, A's result, then B's): got %s", round, joined)
		}
	}
}

// TestStdioOverlongPromptAnsweredToItsID: a session/prompt line over the
// body limit (E2A_MAX_BODY_BYTES, 4 MiB by default: a pasted screenshot
// as an image block) must be answered with an error to its id, so the
// client's Prompt returns: an error with id null answers no request, and
// acp-go-sdk's Prompt waits forever.
func TestStdioOverlongPromptAnsweredToItsID(t *testing.T) {
	// 2 MiB: within the body limit, over NATS' max_payload (1 MiB); 5 MiB:
	// over the body limit.
	for _, size := range []int{2 << 20, 5 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			in, out, _, nc := startStdioConn(t)
			// The pool takes images, so that the size, not the type, refuses.
			publishPoolInfo(t, nc, bridge.PoolInfo{Pool: "demo", Streaming: true, InputModes: []string{"text/plain", "image/png"}})
			ctx, conn, _, sid := openStdioSession(t, in, out, 60*time.Second)
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			img := strings.Repeat("A", size)
			_, err := conn.Prompt(pctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("what is this?"), acp.ImageBlock(img, "image/png")}})
			if err == nil {
				t.Fatal("a prompt over the size limits was accepted")
			}
			if pctx.Err() != nil {
				t.Fatalf("a session/prompt of %d bytes must be answered with a JSON-RPC error to its id; acp-go-sdk's Prompt got no answer in 20 s: %v", size, err)
			}
			var re *acp.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("want a JSON-RPC error, got %v", err)
			}
			if re.Code == -32602 {
				t.Fatalf("refused for its media type, not its size: %d %q", re.Code, re.Message)
			}
			if size > 4<<20 && (re.Code != -32600 || !strings.Contains(re.Message, "4194304") || !strings.Contains(re.Message, "E2A_MAX_BODY_BYTES")) {
				t.Fatalf("a line over the body limit: want -32600 naming the limit and its setting, got %d %q", re.Code, re.Message)
			}
			// The connection still works.
			if res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("small")}}); err != nil || res.StopReason != acp.StopReasonEndTurn {
				t.Fatalf("prompt after the huge one: %+v %v", res, err)
			}
		})
	}
}

// TestStdioNothingAfterCancelledTurn: after a prompt answered
// stopReason cancelled, no update of that turn arrives: the next prompt's
// updates are exactly its own.
func TestStdioNothingAfterCancelledTurn(t *testing.T) {
	in, out, _ := startStdio(t)
	ctx, conn, client, sid := openStdioSession(t, in, out, 90*time.Second)
	for i := 0; i < 4; i++ {
		client.CancelMidTurn(t, ctx, conn, sid, func() (acp.PromptResponse, error) {
			return conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("slow one")},
				Meta: map[string]any{"e2a_params": map[string]any{"delay_ms": 150}}})
		})
		client.Take(sid)
		res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("next")}})
		if err != nil || res.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("round %d: prompt after cancel: %+v %v", i, res, err)
		}
		if kinds, text := updateKinds(client.Take(sid)); kinds != demoTurn || text != "You said: next" {
			t.Fatalf("round %d: after a cancelled turn, the next prompt's updates must be its own only: %q %q", i, kinds, text)
		}
	}
}

// TestStdioEOFAnswersInFlight: a client that writes its prompt
// and closes stdin (`printf … | e2a acp`) still gets the prompt's answer
// before the server returns.
func TestStdioEOFAnswersInFlight(t *testing.T) {
	in, out, done := startStdio(t)
	r := readStdio(t, out)
	send(t, in, `{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`+"\n")
	sid := r.next()["result"].(map[string]any)["sessionId"].(string)
	send(t, in, `{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"bye"}]}}`+"\n")
	_ = in.Close()
	m := r.next()
	if m["id"] != "p" || m["result"].(map[string]any)["stopReason"] != "end_turn" {
		t.Fatalf("the prompt read before EOF must be answered end_turn: %v", m)
	}
	if err := testkit.Receive(t, done, 10*time.Second, "ServeACPStdio did not return"); err != nil {
		t.Fatal(err)
	}
}

// TestStdioCancelEndsQueuedTurn: session/cancel ends the running
// turn and the one queued behind it (docs/protocols.md: "the session's
// turns read before it (queued ones too)"); the next prompt runs.
func TestStdioCancelEndsQueuedTurn(t *testing.T) {
	in, out, _ := startStdio(t)
	second := &markWriter{w: in, mark: `"second"`, seen: make(chan struct{})}
	ctx, conn, client, sid := openStdioSession(t, second, out, 60*time.Second)
	type result struct {
		res acp.PromptResponse
		err error
	}
	slow := func(text string) chan result {
		c := make(chan result, 1)
		go func() {
			res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)},
				Meta: map[string]any{"e2a_params": map[string]any{"delay_ms": 300}}})
			c <- result{res, err}
		}()
		return c
	}
	client.Forget()
	a := slow("first")
	client.WaitUpdate(t, sid)
	b := slow("second")
	// b's goroutine may write its line after anything written here: wait
	// until the pipe's reader took it. A call written after it: once it is
	// answered, the server has read b, so the cancel below comes after it.
	testkit.Receive(t, second.seen, 30*time.Second, "the queued prompt was not written")
	if _, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/w", McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if err := conn.Cancel(ctx, acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]chan result{"running": a, "queued": b} {
		r := testkit.Receive(t, c, 30*time.Second, "no answer to the "+name+" prompt")
		if r.err != nil || r.res.StopReason != acp.StopReasonCancelled {
			t.Errorf("the %s prompt of a cancelled session must end stopReason cancelled: %+v %v", name, r.res, r.err)
		}
	}
	if res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("after")}}); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after the cancel: %+v %v", res, err)
	}
}

// markWriter passes writes to w and closes seen once a write holding mark
// returned: over an io.Pipe, once its reader took that line.
type markWriter struct {
	w    io.Writer
	mark string
	seen chan struct{}
	once sync.Once
}

func (m *markWriter) Write(p []byte) (int, error) {
	n, err := m.w.Write(p)
	if err == nil && strings.Contains(string(p), m.mark) {
		m.once.Do(func() { close(m.seen) })
	}
	return n, err
}

// TestStdioDeepLineAnsweredToItsID: a line nested past the limit is
// refused -32600 to its id, which can be read at its start (acp-go-sdk
// waits for ever for a call answered to id null), however deep it is:
// past encoding/json's 10,000 levels it was answered to id null. So is a
// line broken after its id. A response line is not answered at all.
func TestStdioDeepLineAnsweredToItsID(t *testing.T) {
	in, out, _ := startStdio(t)
	r := readStdio(t, out)
	for _, depth := range []int{100, 20_000} {
		send(t, in, `{"jsonrpc":"2.0","id":"deep","method":"initialize","params":{"x":`+strings.Repeat("[", depth)+strings.Repeat("]", depth)+`}}`+"\n")
		m := r.next()
		e, _ := m["error"].(map[string]any)
		if e["code"] != float64(jsonrpc.CodeInvalidRequest) || m["id"] != "deep" {
			t.Fatalf("depth %d: want -32600 to its id deep: %v", depth, m)
		}
	}
	// A response line (the server sent the client no request) is not
	// answered: an answer to id 1 would read as the answer to the client's
	// own call 1. The next line is answered as usual.
	send(t, in, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"+`{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"x"}}`+"\n"+
		`{"jsonrpc":"2.0","id":"after","method":"initialize","params":{"protocolVersion":1}}`+"\n")
	if m := r.next(); m["id"] != "after" || m["result"] == nil {
		t.Fatalf("after two response lines: want initialize's result to id after: %v", m)
	}
	// Broken after its id: a parse error, to that id too.
	send(t, in, `{"jsonrpc":"2.0","id":"cut","method":"initialize","params":{`+"\n")
	if m := r.next(); m["error"].(map[string]any)["code"] != float64(jsonrpc.CodeParseError) || m["id"] != "cut" {
		t.Fatalf("broken after its id: want -32700 to its id cut: %v", m)
	}
}
