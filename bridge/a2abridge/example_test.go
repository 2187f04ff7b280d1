package a2abridge_test

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

// capitals is the A2A agent of the example, written with the official
// a2a-go SDK: it answers every message with a task whose "answer"
// artifact it streams in two text chunks, then completes the task.
type capitals struct{}

func (capitals) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
			!yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		chunks := []string{"Paris", " is the capital of France."}
		for i, c := range chunks {
			ev := a2a.NewArtifactUpdateEvent(ec, "answer", a2a.NewTextPart(c))
			ev.Append, ev.LastChunk = i > 0, i == len(chunks)-1
			if !yield(ev, nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (capitals) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// An A2A agent behind the pool "capitals", as `e2a agent --pool capitals
// --a2a URL` serves it: the bridge reads the agent's card, and each
// request becomes one A2A message to it (SendStreamingMessage, the card
// saying the agent streams), whose artifact text is written as e2a.chunk
// text frames and whose completed task as the final e2a.complete frame
// (the answer's text and the upstream task and context ids, which vary
// from run to run and are not printed here). Here the agent is a2a-go's
// JSON-RPC server on an httptest.Server.
func Example() {
	// The agent: a2a-go's request handler around the executor, with an
	// in-memory task store, on the JSON-RPC binding, and its card at
	// /.well-known/agent-card.json naming that interface.
	mux := http.NewServeMux()
	server := httptest.NewServer(mux)
	defer server.Close()
	handler := a2asrv.NewHandler(capitals{}, a2asrv.WithTaskStore(taskstore.NewInMemory(
		&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})))
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(handler))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a.AgentCard{
		Name:        "Capitals",
		Description: "Answers questions about capital cities.",
		Version:     "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(server.URL+"/a2a", a2a.TransportProtocolJSONRPC),
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{
			ID: "capitals", Name: "Capitals", Tags: []string{"geography"},
			Description: "Names the capital of a country.",
		}},
	}))

	// An embedded JetStream server with the pipeline's streams.
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()

	// The bridge: a client of the agent's base URL (its card is read
	// there), the conversations store (a session's next turn goes on in
	// the agent's task and context), and bridge.New around it (retries, a
	// bound on calls in flight). The bridge calls, with its credentials,
	// only an interface of the card on the configured URL's host or on a
	// host WithAllowedHosts (E2A_UPSTREAM_ALLOWED_HOSTS) lists. This card
	// names its interface on the httptest server's own host, 127.0.0.1,
	// which is always allowed: the list stays empty, as cmd/e2a's default
	// and the package's tests leave it.
	client, err := bridge.NewClient(server.URL)
	if err != nil {
		panic(err)
	}
	convs, err := bridge.OpenConversations(context.Background(), mem.JetStream, mem.Config)
	if err != nil {
		panic(err)
	}
	up, err := a2abridge.New(context.Background(), client,
		a2abridge.WithConversations("capitals", convs), a2abridge.WithAllowedHosts(""))
	if err != nil {
		panic(err)
	}
	defer up.Close()
	h, err := bridge.New("capitals", up)
	if err != nil {
		panic(err)
	}

	// Serve the pool until ctx is done.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx, mem.Conn, "capitals", h) }()

	// Send a request, then read its frames in order: egress.Replay waits
	// for those not written yet and returns after the final one.
	env := &e2a.Envelope{RequestID: "req-1", IsStream: true, Params: map[string]any{"text": "What is the capital of France?"}}
	if _, err := ingress.NewPublisher(mem.JetStream, 10*time.Second).Publish(ctx, "capitals", env); err != nil {
		panic(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var text strings.Builder
	err = egress.Replay(rctx, mem.Conn, "req-1", 0, func(fr render.Frame) error {
		f := fr.Response
		if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaText {
			text.WriteString(c.Delta.(string))
		}
		if f.IsFinal {
			fmt.Printf("streamed: %s\nfinal: %s %s\n", text.String(), f.ResponseKind, f.Status)
			if c, err := f.Complete(); err == nil {
				res, _ := c.Result.(map[string]any)
				fmt.Printf("result: %v, text: %s\n", slices.Sorted(maps.Keys(res)), res["text"])
			}
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// streamed: Paris is the capital of France.
	// final: e2a.complete succeeded
	// result: [text upstream_context_id upstream_task_id], text: Paris is the capital of France.
	// Run: <nil>
}

// ExampleClientCredentialsOf reads where a client of an agent behind
// OAuth 2.0 asks for its tokens, and for which scopes, from the agent's
// card: what `e2a agent --a2a URL` does when only the client's id and
// secret are given.
func ExampleClientCredentialsOf() {
	card := &a2a.AgentCard{
		Name: "travel",
		SecuritySchemes: a2a.NamedSecuritySchemes{"corp": a2a.OAuth2SecurityScheme{
			Flows: a2a.ClientCredentialsOAuthFlow{TokenURL: "https://idp.example.com/oauth/token",
				Scopes: map[string]string{"agents": "call the agent"}}}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"corp": {"agents"}}},
	}
	cc, err := a2abridge.ClientCredentialsOf(card)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cc.Scheme, cc.TokenURL, cc.Scopes)
	// Output: corp https://idp.example.com/oauth/token [agents]
}
