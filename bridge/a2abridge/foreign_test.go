package a2abridge_test

import (
	"context"
	"iter"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// foreignText is what the agent streams on another task than the
// request's.
const foreignText = "the other user's order #4411"

// mineAnswerer answers every message with artifact "answer" ("mine"),
// then completed.
type mineAnswerer struct{}

func (mineAnswerer) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		ev := a2a.NewArtifactUpdateEvent(ec, "answer", a2a.NewTextPart("mine"))
		ev.Append, ev.LastChunk = false, true
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) &&
			yield(ev, nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (mineAnswerer) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// crossedStreams is a2a-go/v2's request handler with a streaming fault: before
// the request's own final status it sends events of another task and
// context ("foreign-task"), as an agent whose event queues cross does.
type crossedStreams struct{ a2asrv.RequestHandler }

func (c crossedStreams) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	inner := c.RequestHandler.SendStreamingMessage(ctx, req)
	return func(yield func(a2a.Event, error) bool) {
		for ev, err := range inner {
			if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && su.Status.State == a2a.TaskStateCompleted {
				other := a2a.TaskInfo{TaskID: "foreign-task", ContextID: "foreign-context"}
				art := a2a.NewArtifactUpdateEvent(other, "foreign", a2a.NewTextPart(foreignText))
				art.Append, art.LastChunk = false, true
				st := a2a.NewStatusUpdateEvent(other, a2a.TaskStateWorking,
					a2a.NewMessageForTask(a2a.MessageRoleAgent, other, a2a.NewTextPart(" status of "+foreignText)))
				if !yield(art, nil) || !yield(st, nil) {
					return
				}
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// TestEventsOfAnotherTaskDropped: the A2A agent's stream for a request
// carries, besides the request's own task's events, an artifact update
// and a status update naming another task and context (A2A §3.1.2/§7.2:
// a SendStreamingMessage stream carries the events of the task it
// created). Those are not this request's answer: once the turn's task is
// known, they are dropped; the client gets its own task's answer only,
// and the final frame names the request's own upstream task.
func TestEventsOfAnotherTaskDropped(t *testing.T) {
	base := serveA2A(t, crossedStreams{a2asrv.NewHandler(mineAnswerer{})})
	p := pipetest.Start(t)
	bridgePool(t, p, "crossed", base)
	a := p.Ask(t, "crossed", `{"params":{"text":"my order"}}`)
	if !strings.Contains(a.Text(e2a.DeltaText), "mine") {
		t.Fatalf("the request's own answer is missing: frames %d, final %+v", len(a.Frames), a.Final())
	}
	for i, f := range a.Frames {
		if strings.Contains(string(f.Body), foreignText) {
			t.Errorf("frame %d (%s) holds the other task's content: %s; want only the request's own task's events written", i, f.ResponseKind, f.Body)
		}
	}
	if f := a.Final(); f != nil && strings.Contains(string(f.Body), "foreign-task") {
		t.Errorf("final frame names the other task: %s; want the request's own upstream task", f.Body)
	}
}

// serveA2A serves h, an A2A agent streaming over JSON-RPC, on a port of
// its own until the test ends, and returns its base URL (its card at the
// well-known path).
func serveA2A(t *testing.T, h a2asrv.RequestHandler) string {
	t.Helper()
	return serveA2ACard(t, h, true)
}

// testCard is a test agent's v1.0 card with one interface.
func testCard(iface *a2a.AgentInterface, streaming bool) *a2a.AgentCard {
	return &a2a.AgentCard{
		Name: "agent", Description: "a test agent", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{iface},
		Capabilities:        a2a.AgentCapabilities{Streaming: streaming},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "c", Name: "c", Description: "c", Tags: []string{"test"}}},
	}
}

// serveA2ACard is serveA2A with the card's capabilities.streaming.
func serveA2ACard(t *testing.T, h a2asrv.RequestHandler, streaming bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	card := testCard(a2a.NewAgentInterface(base+"/rpc", a2a.TransportProtocolJSONRPC), streaming)
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(h))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return base
}
