package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

// The demo agent, served as `e2a agent --pool demo` serves it: a request
// asking for two text pieces, then one that asks the client for input
// (params.ask), whose turn ends input-required with the agent's question.
func ExampleNew() {
	// An embedded JetStream server with the pipeline's streams.
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx, mem.Conn, "demo", demo.New()) }()

	pub := ingress.NewPublisher(mem.JetStream, 10*time.Second)
	for _, env := range []*e2a.Envelope{
		{RequestID: "req-1", IsStream: true, Params: map[string]any{"text": "hello", "frames": 2}},
		{RequestID: "req-2", IsStream: true, Params: map[string]any{"text": "the weather", "ask": "input"}},
	} {
		if _, err := pub.Publish(ctx, "demo", env); err != nil {
			panic(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		// Each frame in order; Replay returns after the final one.
		err := egress.Replay(rctx, mem.Conn, env.RequestID, 0, func(fr render.Frame) error {
			f := fr.Response
			if c, err := f.Chunk(); err == nil {
				delta, _ := json.Marshal(c.Delta)
				fmt.Printf("%s %d %s %s\n", f.RequestID, f.Sequence, c.DeltaKind, delta)
				return nil
			}
			fmt.Printf("%s %d %s %s %s\n", f.RequestID, f.Sequence, f.ResponseKind, f.Status, f.Body)
			return nil
		})
		cancel()
		if err != nil {
			panic(err)
		}
	}
	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// req-1 0 reasoning "Thinking about: hello"
	// req-1 1 tool {"args":{"query":"hello"},"id":"call_db160f11","name":"lookup","type":"function_call"}
	// req-1 2 tool {"id":"call_db160f11","name":"lookup","response":{"result":"found 5 characters"},"type":"function_response"}
	// req-1 3 text "You sai"
	// req-1 4 text "d: hello"
	// req-1 5 e2a.complete succeeded {"result":{"content":"You said: hello"}}
	// req-2 0 reasoning "Thinking about: the weather"
	// req-2 1 text "I need more from you first."
	// req-2 2 a2a.stream_event succeeded {"branch":"status_update","payload":{"kind":"status-update","status":{"state":"input-required","message":{"kind":"message","role":"agent","parts":[{"kind":"text","text":"What should I say about the weather? Answer in this task."}]}},"final":true}}
	// Run: <nil>
}
