package a2abridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2aclient03 "github.com/a2aproject/a2a-go/a2aclient"
	agentcard03 "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	acp "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// seen is what a client saw of one turn, whatever its front door.
type seen struct {
	state     string // A2A v0.3 names: completed, failed, canceled, input-required, auth-required
	message   string // the status message: the question, the failure
	text      string // text outside thoughts
	reasoning string
	data      []any                     // data parts that are not tool calls or responses
	artifacts map[a2a.ArtifactID]string // artifact id → its text, thoughts included (A2A only)
	taskID    string                    // the pipeline's task (A2A), for the next message
	contextID string
}

// conv is one conversation through a front door.
type conv interface {
	// send sends text and returns what the turn showed.
	send(t *testing.T, text string) seen
	// cancel sends text (a slow task) and cancels it through the door
	// once its first chunk arrived; it returns the turn's end.
	cancel(t *testing.T, text string) seen
}

// door is a front door of the pipeline.
type door struct {
	name string
	// interrupts: an interrupted turn shows its state (ACP shows only the
	// question, and ends the turn).
	interrupts bool
	// data: plain data parts reach the client (ACP: as embedded JSON
	// resources).
	data bool
	open func(t *testing.T, p *pipetest.Pipeline, pool string) conv
}

var doors = []door{
	{"a2a-v1-jsonrpc", true, true, v1Door(a2a.TransportProtocolJSONRPC, true)},
	{"a2a-v1-rest", true, true, v1Door(a2a.TransportProtocolHTTPJSON, false)},
	{"a2a-v1-grpc", true, true, v1Door(a2a.TransportProtocolGRPC, true)},
	{"a2a-v03", true, true, openV03},
	{"e2a-sse", true, true, openE2A},
	{"acp-stdio", false, true, openACP},
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ---- A2A v1.0 (a2a-go/v2's client) ----

type v1Conv struct {
	c         *a2aclient.Client
	stream    bool
	taskID    a2a.TaskID
	contextID string
}

// v1Door opens conversations with a2a-go/v2's client over binding b, from
// the pool's card (gRPC: its interface's tenant names the pool); stream
// chooses SendStreamingMessage over SendMessage.
func v1Door(b a2a.TransportProtocol, stream bool) func(*testing.T, *pipetest.Pipeline, string) conv {
	return func(t *testing.T, p *pipetest.Pipeline, pool string) conv {
		ctx := testCtx(t)
		cardURL := p.URL + "/pools/" + pool
		opts := []a2aclient.FactoryOption{a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{b}})}
		if b == a2a.TransportProtocolGRPC {
			// The pool's card lists gRPC with tenant <pool>, which the
			// client sends in every request.
			opts = append(opts, a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
		}
		card, err := agentcard.DefaultResolver.Resolve(ctx, cardURL)
		if err != nil {
			t.Fatal(err)
		}
		c, err := a2aclient.NewFromCard(ctx, card, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Destroy() })
		return &v1Conv{c: c, stream: stream}
	}
}

func (v *v1Conv) request(text string) *a2a.SendMessageRequest {
	msg := userMessage(text)
	msg.TaskID, msg.ContextID = v.taskID, v.contextID
	return &a2a.SendMessageRequest{Message: msg}
}

// userMessage is a user message of a client of the trpc interaction
// spec (interaction_spec_version): the pipeline shows it thoughts and
// tool parts, which it keeps from clients that did not declare it.
func userMessage(text string) *a2a.Message {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	msg.Metadata = map[string]any{"interaction_spec_version": "0.1"}
	return msg
}

func (v *v1Conv) send(t *testing.T, text string) seen {
	t.Helper()
	ctx := testCtx(t)
	turn := up.NewTurn()
	if v.stream {
		for ev, err := range v.c.SendStreamingMessage(ctx, v.request(text)) {
			if err != nil {
				t.Fatalf("A2A v1.0 stream of %q: %v", text, err)
			}
			turn.Add(ev)
		}
	} else {
		res, err := v.c.SendMessage(ctx, v.request(text))
		if err != nil {
			t.Fatalf("A2A v1.0 send of %q: %v", text, err)
		}
		turn.Add(res)
		if task, ok := res.(*a2a.Task); ok {
			// message/send's rules: the thoughts of a completed task
			// are in its history.
			s := turnSeen(turn)
			for _, m := range task.History {
				for _, p := range m.Parts {
					if m.Role == a2a.MessageRoleAgent && p.Metadata["thought"] == true {
						s.reasoning += p.Text()
					}
				}
			}
			return v.next(s)
		}
	}
	return v.next(turnSeen(turn))
}

// next keeps the task of an interrupted turn for the next message.
func (v *v1Conv) next(s seen) seen {
	v.taskID, v.contextID = "", ""
	if e2a.InterruptState(s.state) {
		v.taskID, v.contextID = a2a.TaskID(s.taskID), s.contextID
	}
	return s
}

func (v *v1Conv) cancel(t *testing.T, text string) seen {
	t.Helper()
	ctx := testCtx(t)
	turn := up.NewTurn()
	var once atomic.Bool
	for ev, err := range v.c.SendStreamingMessage(ctx, v.request(text)) {
		if err != nil {
			t.Fatalf("A2A v1.0 stream of %q: %v", text, err)
		}
		turn.Add(ev)
		if ae, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && once.CompareAndSwap(false, true) {
			if _, err := v.c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: ae.TaskID}); err != nil {
				t.Fatalf("CancelTask: %v", err)
			}
		}
	}
	return turnSeen(turn)
}

// turnSeen reads an A2A turn.
func turnSeen(turn *up.Turn) seen {
	s := seen{state: v03State(turn.State()), message: turn.Status, artifacts: map[a2a.ArtifactID]string{},
		taskID: string(turn.Task.TaskID), contextID: turn.Task.ContextID}
	var parts []*a2a.Part
	for id, a := range turn.Artifacts {
		s.artifacts[id] = up.TextOf(a.Parts)
		parts = append(parts, a.Parts...)
	}
	if turn.Message != nil {
		parts = append(parts, turn.Message.Parts...)
		if s.state == "" {
			s.state = "completed"
		}
	}
	for _, p := range parts {
		switch {
		case p.Metadata["thought"] == true:
			s.reasoning += p.Text()
		case p.Text() != "":
			s.text += p.Text()
		case p.Data() != nil && p.Metadata["type"] != e2a.ToolFunctionCall && p.Metadata["type"] != e2a.ToolFunctionResponse:
			s.data = append(s.data, p.Data())
		}
	}
	return s
}

// v03State names a v1.0 state as v0.3 does ("" for none).
func v03State(st a2a.TaskState) string {
	if st == a2a.TaskStateUnspecified {
		return ""
	}
	return string(a2av0.FromV1TaskState(st))
}

// ---- A2A v0.3 (a2a-go's v0.3 client) ----

type v03Conv struct {
	c         *a2aclient03.Client
	taskID    string
	contextID string
}

func openV03(t *testing.T, p *pipetest.Pipeline, pool string) conv {
	ctx := testCtx(t)
	card, err := agentcard03.DefaultResolver.Resolve(ctx, p.URL+"/pools/"+pool)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient03.NewFromCard(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return &v03Conv{c: c}
}

func (v *v03Conv) params(text string) *a2a03.MessageSendParams {
	msg := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: text})
	msg.Metadata = map[string]any{"interaction_spec_version": "0.1"}
	msg.TaskID, msg.ContextID = a2a03.TaskID(v.taskID), v.contextID
	return &a2a03.MessageSendParams{Message: msg}
}

// stream adds the v0.3 events of a message/stream (as v1.0 events), and
// calls each on every event.
func (v *v03Conv) stream(t *testing.T, text string, each func(a2a03.Event)) *up.Turn {
	t.Helper()
	turn := up.NewTurn()
	for ev, err := range v.c.SendStreamingMessage(testCtx(t), v.params(text)) {
		if err != nil {
			t.Fatalf("A2A v0.3 stream of %q: %v", text, err)
		}
		v1, err := a2av0.ToV1Event(ev)
		if err != nil {
			t.Fatalf("A2A v0.3 event %+v: %v", ev, err)
		}
		turn.Add(v1)
		if each != nil {
			each(ev)
		}
	}
	return turn
}

func (v *v03Conv) send(t *testing.T, text string) seen {
	t.Helper()
	s := turnSeen(v.stream(t, text, nil))
	v.taskID, v.contextID = "", ""
	if e2a.InterruptState(s.state) {
		v.taskID, v.contextID = s.taskID, s.contextID
	}
	return s
}

func (v *v03Conv) cancel(t *testing.T, text string) seen {
	t.Helper()
	var once atomic.Bool
	turn := v.stream(t, text, func(ev a2a03.Event) {
		if ae, ok := ev.(*a2a03.TaskArtifactUpdateEvent); ok && once.CompareAndSwap(false, true) {
			if _, err := v.c.CancelTask(testCtx(t), &a2a03.TaskIDParams{ID: ae.TaskID}); err != nil {
				t.Errorf("tasks/cancel: %v", err)
			}
		}
	})
	return turnSeen(turn)
}

// ---- E2A over SSE, resumed with Last-Event-ID ----

type e2aConv struct {
	p       *pipetest.Pipeline
	pool    string
	session string
}

var e2aSeq atomic.Int64

func openE2A(t *testing.T, p *pipetest.Pipeline, pool string) conv {
	return &e2aConv{p: p, pool: pool, session: fmt.Sprintf("e2a-session-%d", e2aSeq.Add(1))}
}

// post sends text as a request of the session; the answer's SSE body is
// returned with the request's id.
func (e *e2aConv) post(t *testing.T, text string) (string, io.ReadCloser) {
	t.Helper()
	id := fmt.Sprintf("%s-r%d", e.session, e2aSeq.Add(1))
	body, _ := json.Marshal(map[string]any{"request_id": id, "session_id": e.session, "params": map[string]any{"text": text}})
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, e.p.URL+"/pools/"+e.pool+"/v1/requests", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("E2A POST: %d %s", resp.StatusCode, b)
	}
	return id, resp.Body
}

// send reads the answer's first two frames, drops the connection, and
// reads the rest from GET …/stream with Last-Event-ID: the frames must
// follow one another, from 0, with no gap or repeat.
func (e *e2aConv) send(t *testing.T, text string) seen {
	t.Helper()
	id, body := e.post(t, text)
	frames := newSSE(body).read(t, 2)
	body.Close()
	if last := frames[len(frames)-1]; !last.IsFinal {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, e.p.URL+"/pools/"+e.pool+"/v1/requests/"+id+"/stream", nil)
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last.Sequence, 10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, newSSE(resp.Body).read(t, 0)...)
		resp.Body.Close()
	}
	return framesSeen(t, frames)
}

func (e *e2aConv) cancel(t *testing.T, text string) seen {
	t.Helper()
	id, body := e.post(t, text)
	defer body.Close()
	sse := newSSE(body)
	frames := sse.read(t, 1)
	for frames[len(frames)-1].ResponseKind != e2a.KindChunk {
		frames = append(frames, sse.read(t, 1)...)
	}
	if _, err := agent.Cancel(testCtx(t), e.p.JS, id); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	return framesSeen(t, append(frames, sse.read(t, 0)...))
}

// sse reads the frames of an E2A SSE stream.
type sse struct{ sc *bufio.Scanner }

func newSSE(r io.Reader) *sse {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	return &sse{sc}
}

// read reads up to n frames (0: to the final one).
func (s *sse) read(t *testing.T, n int) []*e2a.Response {
	t.Helper()
	var out []*e2a.Response
	sc := s.sc
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		f, err := e2a.ResponseFromJSON([]byte(d))
		if err != nil {
			t.Fatalf("frame %q: %v", d, err)
		}
		out = append(out, f)
		if f.IsFinal || len(out) == n {
			return out
		}
	}
	if len(out) == 0 {
		t.Fatalf("the stream ended without a frame (%v)", sc.Err())
	}
	return out
}

// framesSeen reads the frames of one turn: sequences from 0 without gap
// or repeat, a final frame last.
func framesSeen(t *testing.T, frames []*e2a.Response) seen {
	t.Helper()
	var s seen
	for i, f := range frames {
		if f.Sequence != int64(i) {
			t.Fatalf("frame %d has sequence %d", i, f.Sequence)
		}
		if c, err := f.Chunk(); err == nil {
			switch c.DeltaKind {
			case e2a.DeltaText:
				s.text += c.Delta.(string)
			case e2a.DeltaReasoning:
				s.reasoning += c.Delta.(string)
			}
			continue
		}
		s.data = append(s.data, nativeData(f)...)
	}
	final := frames[len(frames)-1]
	if !final.IsFinal {
		t.Fatalf("no final frame: the last is %+v", final)
	}
	s.state, s.message = finalState(final)
	return s
}

// finalState is the A2A state (v0.3 name) and message of a final frame.
func finalState(f *e2a.Response) (string, string) {
	if st, msg, ok := f.Interrupt(); ok {
		return st, msg
	}
	switch f.ResponseKind {
	case e2a.KindComplete:
		return "completed", ""
	case e2a.KindError:
		b, _ := f.Error()
		if b.Code == e2a.ErrCodeCancelled {
			return "canceled", b.Message
		}
		return "failed", b.Message
	}
	return "unknown " + f.ResponseKind, ""
}

// nativeData is the data of the data parts of an a2a.stream_event
// artifact_update frame.
func nativeData(f *e2a.Response) []any {
	var body struct {
		Branch  string `json:"branch"`
		Payload struct {
			Artifact struct {
				Parts []struct {
					Kind string `json:"kind"`
					Data any    `json:"data"`
				} `json:"parts"`
			} `json:"artifact"`
		} `json:"payload"`
	}
	if f.ResponseKind != e2a.KindA2AStreamEvent || json.Unmarshal(f.Body, &body) != nil || body.Branch != e2a.BranchArtifactUpdate {
		return nil
	}
	var out []any
	for _, p := range body.Payload.Artifact.Parts {
		if p.Kind == "data" {
			out = append(out, p.Data)
		}
	}
	return out
}

// ---- ACP over stdio (acp-go-sdk) ----

type acpConv struct {
	conn *acp.ClientSideConnection
	rec  *acptest.Recorder
	sid  acp.SessionId
	last []acp.SessionUpdate // the updates of the last prompt
}

// openACP serves ACP over stdio from the pipeline (its default pool) to
// acp-go-sdk's client, and opens a session.
func openACP(t *testing.T, p *pipetest.Pipeline, _ string) conv {
	s := acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ingress.ServeACPStdio(ctx, in, out, p.Ingress)
	})
	return &acpConv{conn: s.Conn, rec: s.Rec, sid: s.ID}
}

func (a *acpConv) prompt(t *testing.T, text string) seen {
	t.Helper()
	res, err := a.conn.Prompt(testCtx(t), acp.PromptRequest{SessionId: a.sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	s := seen{state: "completed"}
	switch {
	case err != nil:
		s.state, s.message = "failed", err.Error()
	case res.StopReason == acp.StopReasonCancelled:
		s.state = "canceled"
	case res.StopReason != acp.StopReasonEndTurn:
		s.state = "stop " + string(res.StopReason)
	}
	a.last = a.rec.Take(a.sid)
	for _, u := range a.last {
		if c := u.AgentMessageChunk; c != nil && c.Content.Text != nil {
			s.text += c.Content.Text.Text
		}
		if d, ok := acpData(u); ok {
			s.data = append(s.data, d)
		}
		if c := u.AgentThoughtChunk; c != nil && c.Content.Text != nil {
			s.reasoning += c.Content.Text.Text
		}
	}
	return s
}

func (a *acpConv) send(t *testing.T, text string) seen { t.Helper(); return a.prompt(t, text) }

func (a *acpConv) cancel(t *testing.T, text string) seen {
	t.Helper()
	a.rec.Forget()
	done := make(chan seen, 1)
	go func() { done <- a.prompt(t, text) }()
	a.rec.WaitUpdate(t, a.sid)
	if err := a.conn.Cancel(testCtx(t), acp.CancelNotification{SessionId: a.sid}); err != nil {
		t.Fatalf("session/cancel: %v", err)
	}
	return <-done
}
