package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/render"
)

// script writes the frames of a demo-like agent: reasoning, a tool call and
// its response, text chunks, then complete. With hold, it waits (polling
// the cancel flag) before the text, and fails with cancelled if asked.
func script(w *writer, text []string, hold chan struct{}, canceled *chan struct{}) {
	w.chunk(e2a.DeltaReasoning, "Thinking")
	w.chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: "call_1", Name: "lookup", Args: map[string]any{"q": "x"}})
	w.chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionResponse, ID: "call_1", Name: "lookup", Response: map[string]any{"r": 1}})
	if hold != nil {
		select {
		case <-hold:
		case <-*canceled:
			w.fail(e2a.ErrCodeCancelled, "cancelled by the client", false)
			return
		}
	}
	for _, s := range text {
		w.text(s)
	}
	w.complete(map[string]any{"content": strings.Join(text, "")})
}

type rpcReq struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// A2AParams are the members of an A2A call's parameters (package
// a2amap's Params, which this package cannot import: a2amap imports it)
// that the A2A servers of these tests set.
type A2AParams struct {
	JSONRPCID                json.RawMessage
	TaskID, ContextID        string
	Resubscribe, Interaction bool
}

// A2ARenderers are A2A v0.3's renderers, answers and error table (package
// protocols/a2a's, which this package cannot import), for the A2A servers
// of runA2AClient and runEndToEnd: the tests of package egress_test pass
// them.
type A2ARenderers struct {
	// Stream is message/stream's and tasks/resubscribe's SSE renderer.
	Stream func(o *render.Output, requestID string, p A2AParams, from int64) render.Renderer
	// Send is message/send's renderer.
	Send func(o *render.Output, requestID string, p A2AParams) render.Renderer
	// Task and Cancel answer tasks/get and tasks/cancel from the frames
	// of the task's requests ids, read with svc.
	Task   func(ctx context.Context, svc *Service, taskID, contextID string, ids []string, historyLength *int) (*a2a.Task, error)
	Cancel func(ctx context.Context, svc *Service, taskID, contextID string, ids []string, cancel CancelFunc) (*a2a.Task, error)
	// Error is A2A's error table.
	Error func(error) *jsonrpc.Error
	// StreamFormat and SendFormat are their formats.
	StreamFormat, SendFormat string
}

// serveStream serves message/stream (serve: Service.Serve) or
// tasks/resubscribe (Service.ServeExisting) as package protocols/a2a does.
func (a A2ARenderers) serveStream(serve func(http.ResponseWriter, *http.Request, string, string, render.NewRenderer), w http.ResponseWriter, r *http.Request, requestID string, p A2AParams) {
	from, _ := ResumePoint(r)
	serve(w, r, requestID, a.StreamFormat, func(o *render.Output) render.Renderer { return a.Stream(o, requestID, p, from) })
}

// a2aTestServer is a minimal A2A JSON-RPC endpoint on the egress Service,
// standing in for ingress: it "accepts" a message by submitting an
// envelope and starting a scripted writer, then lets egress answer with
// A2A's renderers.
type a2aTestServer struct {
	t    *testing.T
	h    *httpEnv
	a2a  A2ARenderers
	mu   sync.Mutex
	task map[string][]string // task id → request ids
	hold map[string]chan struct{}
	canc map[string]chan struct{}
}

func (s *a2aTestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req rpcReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	switch req.Method {
	case "message/send", "message/stream":
		var p a2a.MessageSendParams
		_ = json.Unmarshal(req.Params, &p)
		taskID := string(p.Message.TaskID)
		if taskID == "" {
			taskID = "task-" + p.Message.ID
		}
		reqID := "rq-" + p.Message.ID
		env := newEnvelope(reqID)
		env.TaskID, env.ContextID, env.Method = taskID, "ctx-1", req.Method
		env.Params = map[string]any{"text": p.Message.Parts[0].(a2a.TextPart).Text}
		s.h.submit(s.t, env)
		wr := s.h.writer(s.t, env)
		s.mu.Lock()
		s.task[taskID] = append(s.task[taskID], reqID)
		hold, canc := s.hold[p.Message.ID], s.canc[p.Message.ID]
		s.mu.Unlock()
		s.h.whenLive(reqID, func() { // frames arrive while the stream is open
			script(wr, []string{"Hel", "lo"}, hold, &canc)
		})
		params := A2AParams{JSONRPCID: req.ID, TaskID: taskID, ContextID: "ctx-1", Interaction: true}
		if req.Method == "message/send" {
			s.h.svc.ServeFrom(r.Context(), w, reqID, s.a2a.SendFormat, 0, func(o *render.Output) render.Renderer { return s.a2a.Send(o, reqID, params) })
		} else {
			s.a2a.serveStream(s.h.svc.Serve, w, r, reqID, params)
		}
	case "tasks/resubscribe":
		var p a2a.TaskIDParams
		_ = json.Unmarshal(req.Params, &p)
		s.mu.Lock()
		ids := s.task[string(p.ID)]
		s.mu.Unlock()
		last := "unknown"
		if len(ids) > 0 {
			last = ids[len(ids)-1]
		}
		s.a2a.serveStream(s.h.svc.ServeExisting, w, r, last, A2AParams{JSONRPCID: req.ID, TaskID: string(p.ID), ContextID: "ctx-1",
			Resubscribe: true, Interaction: true})
	case "tasks/get":
		var p a2a.TaskQueryParams
		_ = json.Unmarshal(req.Params, &p)
		s.mu.Lock()
		ids := s.task[string(p.ID)]
		s.mu.Unlock()
		t, err := s.a2a.Task(r.Context(), s.h.svc, string(p.ID), "ctx-1", ids, p.HistoryLength)
		s.writeTaskRPC(w, req.ID, t, err)
	case "tasks/cancel":
		var p a2a.TaskIDParams
		_ = json.Unmarshal(req.Params, &p)
		s.mu.Lock()
		ids := s.task[string(p.ID)]
		s.mu.Unlock()
		t, err := s.a2a.Cancel(r.Context(), s.h.svc, string(p.ID), "ctx-1", ids, func(ctx context.Context, requestID string) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			for msgID, ch := range s.canc {
				if "rq-"+msgID == requestID {
					close(ch)
				}
			}
			return nil
		})
		s.writeTaskRPC(w, req.ID, t, err)
	default:
		_ = jsonrpc.WriteError(w, req.ID, jsonrpc.MethodNotFound(req.Method))
	}
}

// runA2AClient drives A2A's renderers over the service with the a2a-go
// client's JSON-RPC transport: message/stream, tasks/resubscribe,
// message/send, tasks/get and tasks/cancel. TestA2AClient
// (a2aclient_test.go, package egress_test) runs it with protocols/a2a's
// renderers, which this package cannot import.
func runA2AClient(t *testing.T, rend A2ARenderers) {
	h := startHTTP(t, WithHeartbeatInterval(10*time.Millisecond))
	ts := &a2aTestServer{t: t, h: h, a2a: rend, task: map[string][]string{}, hold: map[string]chan struct{}{}, canc: map[string]chan struct{}{}}
	srv := httptest.NewServer(ts)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := a2aclient.NewJSONRPCTransport(srv.URL, nil)

	msg := &a2a.Message{ID: "m1", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "hi"}}}
	var events []a2a.Event
	for ev, err := range tr.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: msg}) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	checkA2AEvents(t, "message/stream", events, true)

	events = nil
	for ev, err := range tr.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: "task-m1"}) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	checkA2AEvents(t, "tasks/resubscribe", events, false)

	for _, err := range tr.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: "nope"}) {
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("resubscribe unknown: %v", err)
		}
	}

	res, err := tr.SendMessage(ctx, &a2a.MessageSendParams{Message: &a2a.Message{ID: "m2", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "again"}}}})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || len(task.History) != 3 {
		t.Fatalf("message/send: %#v", res)
	}
	if tp := task.Artifacts[0].Parts[0].(a2a.TextPart); tp.Text != "Hello" {
		t.Fatalf("final reply %q", tp.Text)
	}

	got, err := tr.GetTask(ctx, &a2a.TaskQueryParams{ID: "task-m1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "task-m1" || got.Status.State != a2a.TaskStateCompleted || len(got.History) != 4 || got.History[0].Role != a2a.MessageRoleUser {
		t.Fatalf("tasks/get: %+v", got)
	}
	two := 2
	got, err = tr.GetTask(ctx, &a2a.TaskQueryParams{ID: "task-m1", HistoryLength: &two})
	if err != nil || len(got.History) != 2 {
		t.Fatalf("historyLength: %v %+v", err, got)
	}
	if _, err := tr.GetTask(ctx, &a2a.TaskQueryParams{ID: "nope"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("tasks/get unknown: %v", err)
	}
	if _, err := tr.CancelTask(ctx, &a2a.TaskIDParams{ID: "task-m1"}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("cancel finished: %v", err)
	}

	// A running task is canceled.
	ts.mu.Lock()
	ts.hold["m3"], ts.canc["m3"] = make(chan struct{}), make(chan struct{})
	ts.mu.Unlock()
	streamDone := make(chan []a2a.Event, 1)
	go func() {
		var evs []a2a.Event
		for ev, err := range tr.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: &a2a.Message{ID: "m3", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "long"}}}}) {
			if err != nil {
				t.Error(err)
				break
			}
			evs = append(evs, ev)
		}
		streamDone <- evs
	}()
	// Cancel once the server holds the task (its first frame is written).
	testkit.Eventually(t, 10*time.Second, "task-m3 to start", func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return len(ts.task["task-m3"]) == 1
	})
	ct, err := tr.CancelTask(ctx, &a2a.TaskIDParams{ID: "task-m3"})
	if err != nil {
		t.Fatal(err)
	}
	if ct.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: state %s", ct.Status.State)
	}
	evs := <-streamDone
	last, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent)
	if !ok || !last.Final || last.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("stream of a canceled task ends with %#v", evs[len(evs)-1])
	}
}

func checkA2AEvents(t *testing.T, what string, events []a2a.Event, submitted bool) {
	t.Helper()
	if len(events) < 4 {
		t.Fatalf("%s: %d events", what, len(events))
	}
	if su, ok := events[0].(*a2a.TaskStatusUpdateEvent); submitted != (ok && su.Status.State == a2a.TaskStateSubmitted) {
		t.Fatalf("%s: first event %#v", what, events[0])
	}
	var text strings.Builder
	var calls int
	for _, ev := range events {
		if ev.TaskInfo().TaskID != "task-m1" || ev.TaskInfo().ContextID != "ctx-1" {
			t.Fatalf("%s: event ids %+v", what, ev.TaskInfo())
		}
		if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			for _, p := range au.Artifact.Parts {
				switch pt := p.(type) {
				case a2a.TextPart:
					if pt.Metadata["thought"] != true {
						text.WriteString(pt.Text)
					}
				case a2a.DataPart:
					if pt.Metadata["type"] == e2a.ToolFunctionCall {
						calls++
					}
				}
			}
		}
	}
	if text.String() != "Hello" || calls != 1 {
		t.Fatalf("%s: text %q, %d calls", what, text.String(), calls)
	}
	last, ok := events[len(events)-1].(*a2a.TaskStatusUpdateEvent)
	if !ok || !last.Final || last.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("%s: last event %#v", what, events[len(events)-1])
	}
}

// acpRecorder is the editor side of an ACP connection: it records the
// session updates it is sent.
type acpRecorder struct {
	acp.Client
	mu      sync.Mutex
	updates []acp.SessionNotification
}

func (c *acpRecorder) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	c.updates = append(c.updates, n)
	c.mu.Unlock()
	return nil
}

// runACPClient: acp-go-sdk's client talks to an agent whose session/prompt
// turn is an ACP rendering the service serves with serve (NDJSON over
// HTTP, copied onto the client's stdio-like pipe). TestACPClient
// (acpclient_test.go, package egress_test) runs it with protocols/acp's
// renderer, which this package cannot import.
func runACPClient(t *testing.T, serve func(svc *Service, w http.ResponseWriter, r *http.Request, requestID string, rpcID json.RawMessage)) {
	h := startHTTP(t, WithHeartbeatInterval(10*time.Millisecond))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("request")
		serve(h.svc, w, r, id, json.RawMessage(r.URL.Query().Get("rpcid")))
	}))
	defer srv.Close()

	toAgentR, toAgentW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	rec := &acpRecorder{}
	conn := acp.NewClientSideConnection(rec, toAgentW, toClientR)
	// The agent side: answers initialize and session/new itself, and
	// session/prompt with the egress stream of a request it submits.
	go func() {
		sc := bufio.NewScanner(toAgentR)
		for sc.Scan() {
			var req rpcReq
			if err := json.Unmarshal(sc.Bytes(), &req); err != nil || len(req.ID) == 0 {
				continue
			}
			var out []byte
			switch req.Method {
			case "initialize":
				out, _ = json.Marshal(jsonrpc.ResultResponse(req.ID, acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber, AuthMethods: []acp.AuthMethod{}}))
			case "session/new":
				out, _ = json.Marshal(jsonrpc.ResultResponse(req.ID, acp.NewSessionResponse{SessionId: "s1"}))
			case "session/prompt":
				env := newEnvelope("acp-" + strings.Trim(string(req.ID), `"`))
				env.SessionID, env.Method = "s1", e2a.ACPSessionPrompt
				h.submit(t, env)
				w := h.writer(t, env)
				h.whenLive(env.RequestID, func() { // frames arrive while the stream is open
					script(w, []string{"Hel", "lo"}, nil, nil)
				})
				resp, err := http.Get(srv.URL + "?request=" + env.RequestID + "&rpcid=" + string(req.ID))
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				for _, l := range bytes.Split(body, []byte("\n")) {
					if len(bytes.TrimSpace(l)) > 0 {
						_, _ = toClientW.Write(append(l, '\n'))
					}
				}
				continue
			default:
				out, _ = json.Marshal(jsonrpc.ErrorResponse(req.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}))
			}
			_, _ = toClientW.Write(append(out, '\n'))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/", McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stopReason %q", res.StopReason)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var kinds []string
	var text strings.Builder
	for _, n := range rec.updates {
		u := n.Update
		switch {
		case u.AgentThoughtChunk != nil:
			kinds = append(kinds, "thought")
		case u.ToolCall != nil:
			kinds = append(kinds, "tool_call:"+string(u.ToolCall.ToolCallId))
		case u.ToolCallUpdate != nil:
			kinds = append(kinds, fmt.Sprintf("tool_call_update:%s", *u.ToolCallUpdate.Status))
		case u.AgentMessageChunk != nil:
			kinds = append(kinds, "message")
			text.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
	}
	want := "thought tool_call:call_1 tool_call_update:completed message message"
	if strings.Join(kinds, " ") != want || text.String() != "Hello" {
		t.Fatalf("updates %v text %q", kinds, text.String())
	}
	toAgentW.Close()
	toClientW.Close()
}

// writeTaskRPC answers a tasks/get or tasks/cancel as ingress does.
func (s *a2aTestServer) writeTaskRPC(w http.ResponseWriter, id json.RawMessage, t *a2a.Task, err error) {
	if err != nil {
		_ = jsonrpc.WriteError(w, id, s.a2a.Error(err))
		return
	}
	_ = jsonrpc.WriteResult(w, id, t)
}
