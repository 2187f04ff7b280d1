package a2aupstream_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	grpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// variant is one kind of server the tests run every scenario against.
type variant struct {
	binding     a2a.TransportProtocol
	v03, stream bool
}

func (v variant) String() string {
	s := string(v.binding)
	if v.v03 {
		s += "/v0.3"
	}
	if !v.stream {
		s += "/no-streaming"
	}
	return s
}

func variants() []variant {
	var out []variant
	for _, b := range []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON, up.GRPC} {
		for _, v03 := range []bool{false, true} {
			for _, stream := range []bool{true, false} {
				out = append(out, variant{b, v03, stream})
			}
		}
	}
	return out
}

func (v variant) start(t *testing.T, o up.Options) *up.Server {
	o.Binding, o.V03, o.NoStreaming = v.binding, v.v03, !v.stream
	o.SlowInterval = 5 * time.Millisecond
	return up.Start(t, o)
}

// connect resolves the server's card as a client would (the v0.3 parser
// for a v0.3 card) and builds a2a-go/v2's client from it.
func connect(t *testing.T, s *up.Server, v03 bool) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	resolver := agentcard.DefaultResolver
	if v03 {
		resolver = &agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}
	}
	card, err := resolver.Resolve(ctx, s.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	creds := grpc.WithTransportCredentials(insecure.NewCredentials())
	c, err := a2aclient.NewFromCard(ctx, card,
		grpcv1.WithGRPCTransport(creds), grpcv0.WithGRPCTransport(creds),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}), a2av0.WithRESTTransport(a2av0.RESTTransportConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

func msg(text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
}

func reply(task a2a.TaskInfoProvider, text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart(text))}
}

// view folds a turn's events (or a result) into what a client sees.
type view struct {
	events    int
	states    []a2a.TaskState
	status    string // text of the last status message
	task      a2a.TaskInfo
	message   *a2a.Message
	artifacts map[a2a.ArtifactID]*a2a.Artifact
	chunks    map[a2a.ArtifactID]int
	last      map[a2a.ArtifactID]bool
}

func newView() *view {
	return &view{artifacts: map[a2a.ArtifactID]*a2a.Artifact{}, chunks: map[a2a.ArtifactID]int{}, last: map[a2a.ArtifactID]bool{}}
}

func (v *view) add(ev a2a.Event) {
	v.events++
	switch e := ev.(type) {
	case *a2a.Message:
		v.message = e
	case *a2a.Task:
		v.task = e.TaskInfo()
		v.setStatus(e.Status)
		for _, a := range e.Artifacts {
			v.artifacts[a.ID] = a
		}
	case *a2a.TaskStatusUpdateEvent:
		v.task = e.TaskInfo()
		v.setStatus(e.Status)
	case *a2a.TaskArtifactUpdateEvent:
		v.task = e.TaskInfo()
		a := v.artifacts[e.Artifact.ID]
		if a == nil || !e.Append {
			a = &a2a.Artifact{ID: e.Artifact.ID}
			v.artifacts[a.ID] = a
		}
		a.Parts = append(a.Parts, e.Artifact.Parts...)
		v.chunks[a.ID]++
		v.last[a.ID] = e.LastChunk
	}
}

func (v *view) setStatus(st a2a.TaskStatus) {
	v.states = append(v.states, st.State)
	if st.Message != nil {
		v.status = up.TextOf(st.Message.Parts)
	}
}

func (v *view) state() a2a.TaskState {
	if len(v.states) == 0 {
		return a2a.TaskStateUnspecified
	}
	return v.states[len(v.states)-1]
}

func (v *view) text(id a2a.ArtifactID) string {
	if a := v.artifacts[id]; a != nil {
		return up.TextOf(a.Parts)
	}
	return ""
}

// stream runs a streaming call to its end; stop, when set, ends reading
// early (the view so far is returned).
func stream(t *testing.T, events func(func(a2a.Event, error) bool), stop func(*view) bool) *view {
	t.Helper()
	v := newView()
	for ev, err := range events {
		if err != nil {
			t.Fatalf("after %d events: %v", v.events, err)
		}
		v.add(ev)
		if stop != nil && stop(v) {
			break
		}
	}
	return v
}

func send(t *testing.T, c *a2aclient.Client, req *a2a.SendMessageRequest) *view {
	t.Helper()
	res, err := c.SendMessage(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	v := newView()
	v.add(res)
	return v
}

// TestScenarios: every scenario's exact content reaches a2a-go/v2's client
// over every binding, v1.0 and v0.3, streaming (event by event: chunks,
// lastChunk, the thought mark) and with SendMessage (the final task).
func TestScenarios(t *testing.T) {
	for _, vr := range variants() {
		t.Run(vr.String(), func(t *testing.T) {
			s := vr.start(t, up.Options{})
			c := connect(t, s, vr.v03)
			for _, how := range []string{"stream", "send"} {
				for _, sc := range []string{up.Stream, up.Tool, up.Fail, up.Message, up.File, up.Echo} {
					t.Run(how+"/"+sc, func(t *testing.T) {
						text := sc + ": some body"
						if sc == up.Echo {
							text = "just words"
						}
						var v *view
						if how == "stream" {
							v = stream(t, c.SendStreamingMessage(context.Background(), msg(text)), nil)
						} else {
							v = send(t, c, msg(text))
						}
						checkScenario(t, sc, "some body", text, v, how == "stream" && vr.stream)
					})
				}
			}
		})
	}
}

func checkScenario(t *testing.T, sc, body, text string, v *view, streamed bool) {
	t.Helper()
	want := map[a2a.ArtifactID]string{}
	state := a2a.TaskStateCompleted
	switch sc {
	case up.Stream:
		want = map[a2a.ArtifactID]string{up.ThoughtArtifact: up.Thought(body), up.TextArtifact: up.StreamText(body)}
		checkStreamParts(t, body, v, streamed)
	case up.Tool:
		want[up.TextArtifact] = up.ToolText(body)
		checkData(t, v, up.ToolCallArtifact, up.ToolCall(body), "function_call")
		checkData(t, v, up.ToolResponseArtifact, up.ToolResponse(body), "function_response")
	case up.Fail:
		state = a2a.TaskStateFailed
		if v.status != up.FailText(body) {
			t.Errorf("status message %q, want %q", v.status, up.FailText(body))
		}
	case up.Message:
		if v.message == nil || up.TextOf(v.message.Parts) != up.MessageText(body) || v.events != 1 {
			t.Fatalf("want one direct message %q, got %d events, message %+v", up.MessageText(body), v.events, v.message)
		}
		return
	case up.File:
		checkFiles(t, body, v)
	case up.Echo:
		want[up.EchoArtifact] = up.EchoText(text)
	}
	if v.state() != state {
		t.Errorf("states %v, want the last %s", v.states, state)
	}
	for id, w := range want {
		if got := v.text(id); got != w {
			t.Errorf("artifact %s: %q, want %q", id, got, w)
		}
	}
}

func checkStreamParts(t *testing.T, body string, v *view, streamed bool) {
	t.Helper()
	th := v.artifacts[up.ThoughtArtifact]
	if th == nil || len(th.Parts) != 1 || th.Parts[0].Metadata["thought"] != true {
		t.Errorf("thought artifact %+v, want one part with metadata thought=true", th)
	}
	checkData(t, v, up.DataArtifact, up.StreamData(), "")
	if n := len(up.StreamChunks(body)); streamed && (v.chunks[up.TextArtifact] != n || !v.last[up.TextArtifact]) {
		t.Errorf("text artifact in %d chunks (last %v), want %d ending with lastChunk", v.chunks[up.TextArtifact], v.last[up.TextArtifact], n)
	}
	if streamed && (v.states[0] != a2a.TaskStateSubmitted || v.states[1] != a2a.TaskStateWorking) {
		t.Errorf("states %v, want submitted, working … completed", v.states)
	}
}

func checkData(t *testing.T, v *view, id a2a.ArtifactID, want map[string]any, typ string) {
	t.Helper()
	a := v.artifacts[id]
	if a == nil || len(a.Parts) != 1 {
		t.Fatalf("artifact %s: %+v, want one DataPart", id, a)
	}
	if got := a.Parts[0].Data(); !reflect.DeepEqual(got, want) {
		t.Errorf("artifact %s data %#v, want %#v", id, got, want)
	}
	if typ != "" && a.Parts[0].Metadata["type"] != typ {
		t.Errorf("artifact %s part metadata %v, want type %s", id, a.Parts[0].Metadata, typ)
	}
}

func checkFiles(t *testing.T, body string, v *view) {
	t.Helper()
	b, u := v.artifacts[up.FileBytesArtifact], v.artifacts[up.FileURLArtifact]
	if b == nil || len(b.Parts) != 1 || string(b.Parts[0].Raw()) != string(up.FileBytes(body)) ||
		b.Parts[0].Filename != up.FileName || b.Parts[0].MediaType != up.FileMIME {
		t.Errorf("file bytes artifact %+v", b)
	}
	if u == nil || len(u.Parts) != 1 || string(u.Parts[0].URL()) != up.FileURL(body) {
		t.Errorf("file URL artifact %+v, want %s", u, up.FileURL(body))
	}
}

// TestAskContinues: "ask:" stops in input-required with the question; the
// answer, sent on the same task and context, completes it, and the agent
// ran the second turn on the stored task with the first message in its
// history.
func TestAskContinues(t *testing.T) {
	for _, vr := range variants() {
		t.Run(vr.String(), func(t *testing.T) {
			s := vr.start(t, up.Options{})
			c := connect(t, s, vr.v03)
			first := stream(t, c.SendStreamingMessage(context.Background(), msg("ask: hi")), nil)
			if first.state() != a2a.TaskStateInputRequired || first.status != up.AskQuestion {
				t.Fatalf("first turn: states %v, status %q", first.states, first.status)
			}
			if vr.stream && first.text(up.AskArtifact) != up.AskChunk {
				t.Errorf("first turn streamed %q, want %q", first.text(up.AskArtifact), up.AskChunk)
			}
			second := stream(t, c.SendStreamingMessage(context.Background(), reply(first.task, "Ada")), nil)
			if second.state() != a2a.TaskStateCompleted || second.text(up.ReplyArtifact) != up.AskReply("Ada") {
				t.Fatalf("second turn: states %v, reply %q", second.states, second.text(up.ReplyArtifact))
			}
			if m := s.LastMessage(); m.TaskID != first.task.TaskID || m.ContextID != first.task.ContextID {
				t.Errorf("last message on %s/%s, want %s/%s", m.TaskID, m.ContextID, first.task.TaskID, first.task.ContextID)
			}
			ex := s.Executions()
			last := ex[len(ex)-1]
			if last.Scenario != up.Answer || !last.Continued || last.TaskID != first.task.TaskID ||
				len(last.History) < 2 || up.TextOf(last.History[0].Parts) != "ask: hi" || up.TextOf(last.History[len(last.History)-1].Parts) != "Ada" {
				t.Errorf("agent's second turn %+v", last)
			}
		})
	}
}

// TestAuthContinues: "auth:" reaches auth-required with its prompt (the
// stream stays open there, as a2a-go/v2 keeps auth-required executions);
// the next message on the task is the credential the waiting execution
// takes, and completes it.
func TestAuthContinues(t *testing.T) {
	for _, vr := range variants() {
		t.Run(vr.String(), func(t *testing.T) {
			s := vr.start(t, up.Options{})
			c := connect(t, s, vr.v03)
			ctx, cancel := context.WithCancel(context.Background())
			atAuth := func(v *view) bool { return v.state() == a2a.TaskStateAuthRequired }
			first := stream(t, c.SendStreamingMessage(ctx, msg("auth: please")), atAuth)
			cancel()
			if first.state() != a2a.TaskStateAuthRequired || first.status != up.AuthPrompt {
				t.Fatalf("first turn: states %v, status %q", first.states, first.status)
			}
			var second *view
			if vr.stream {
				second = stream(t, c.SendStreamingMessage(context.Background(), reply(first.task, "token-1")), nil)
			} else {
				second = send(t, c, reply(first.task, "token-1"))
			}
			if second.state() != a2a.TaskStateCompleted || second.text(up.ReplyArtifact) != up.AuthReply("token-1") {
				t.Fatalf("second turn: states %v, reply %q", second.states, second.text(up.ReplyArtifact))
			}
			ex := s.Executions()
			if last := ex[len(ex)-1]; last.Scenario != up.Authed || last.TaskID != first.task.TaskID || up.TextOf(last.Message.Parts) != "token-1" {
				t.Errorf("agent's second turn %+v", last)
			}
		})
	}
}

// TestCancelSlow: a "slow:" task streams chunks until CancelTask; the
// cancel reaches the agent, the task ends canceled, and the stream (or,
// without streaming, GetTask) shows it.
func TestCancelSlow(t *testing.T) {
	for _, vr := range variants() {
		t.Run(vr.String(), func(t *testing.T) {
			s := vr.start(t, up.Options{})
			c := connect(t, s, vr.v03)
			ctx := context.Background()
			var id a2a.TaskID
			if vr.stream {
				v := stream(t, c.SendStreamingMessage(ctx, msg("slow: x")), func(v *view) bool { return v.chunks[up.SlowArtifact] == 3 })
				id = v.task.TaskID
				if got := v.text(up.SlowArtifact); got != up.SlowChunk(1)+up.SlowChunk(2)+up.SlowChunk(3) {
					t.Errorf("slow chunks %q", got)
				}
			} else {
				req := msg("slow: x")
				req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
				res, err := c.SendMessage(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				id = res.TaskInfo().TaskID
			}
			task, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
			if err != nil {
				t.Fatal(err)
			}
			if task.Status.State != a2a.TaskStateCanceled {
				t.Errorf("CancelTask answered %s", task.Status.State)
			}
			got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
			if err != nil || got.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("GetTask after cancel: %v, %v", got, err)
			}
			if cs := s.Cancels(); len(cs) != 1 || cs[0] != id {
				t.Errorf("cancels %v, want [%s]", cs, id)
			}
		})
	}
}

// TestNoStreamingRefuses: a server without streaming refuses
// SubscribeToTask with the unsupported-operation error, and its card says
// so.
func TestNoStreamingRefuses(t *testing.T) {
	for _, b := range []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON, up.GRPC} {
		t.Run(string(b), func(t *testing.T) {
			s := up.Start(t, up.Options{Binding: b, NoStreaming: true})
			if s.Card().Capabilities.Streaming {
				t.Fatal("card declares streaming")
			}
			c := connect(t, s, false)
			res, err := c.SendMessage(context.Background(), msg("ask: q"))
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range c.SubscribeToTask(context.Background(), &a2a.SubscribeToTaskRequest{ID: res.TaskInfo().TaskID}) {
				if !errors.Is(err, a2a.ErrUnsupportedOperation) {
					t.Errorf("SubscribeToTask: %v, want %v", err, a2a.ErrUnsupportedOperation)
				}
				break
			}
		})
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []up.Options{
		{Binding: "SOAP"},
		{Binding: up.GRPC, Fault: up.Fault{Kind: up.FaultGarbage}},
		{Fault: up.Fault{Kind: up.FaultStatus, Status: 200}},
		{Fault: up.Fault{Kind: up.FaultStatus, Times: -1}},
		{SlowInterval: -time.Second},
		{Headers: map[string]string{"authorization": "x"}},
	} {
		if _, err := up.New(o); !errors.Is(err, up.ErrInvalidOption) {
			t.Errorf("New(%+v): %v, want %v", o, err, up.ErrInvalidOption)
		}
	}
}
