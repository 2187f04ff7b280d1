package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// A complete custom agent: it streams the words of the request's text back
// in capitals and completes with the word count. Run serves the pool
// "shout" with it; ingress (here a plain publish) sends it requests on
// e2a.req.shout.<request_id>, and anyone can read its frames on
// e2a.live.<request_id> (or replay them from E2A_RESPONSES).
func Example() {
	shout := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		words := strings.Fields(env.ParamString("text"))
		for _, word := range words {
			select {
			case <-ctx.Done():
				// Cancelled or past its deadline: the runtime writes the final
				// frame. Shutdown: it hands the request back to the pool.
				return ctx.Err()
			default:
			}
			if err := w.Chunk(e2a.DeltaText, strings.ToUpper(word)+" "); err != nil {
				return err
			}
		}
		return w.Complete(map[string]any{"words": len(words)})
	})

	// An embedded JetStream server with the pipeline's streams.
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()

	// Serve the pool until ctx is done.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx, mem.Conn, "shout", shout) }()

	// Follow the live frames, then send a request.
	live, _ := subjects.Live("req-1")
	frames, _ := mem.Conn.SubscribeSync(live)
	req, _ := subjects.Request("shout", "req-1")
	body, _ := json.Marshal(e2a.Envelope{RequestID: "req-1", IsStream: true, Params: map[string]any{"text": "hello from the pipeline"}})
	if _, err := mem.JetStream.PublishMsg(ctx, &nats.Msg{Subject: req, Data: body}, jetstream.WithMsgID("req-1")); err != nil {
		panic(err)
	}
	var text strings.Builder
	for {
		m, err := frames.NextMsg(10 * time.Second)
		if err != nil {
			panic(err)
		}
		// A message holds one frame, or a burst of them (E2A-Frames).
		burst, _ := e2a.BurstResponses(m.Header.Get(subjects.HeaderFrames), m.Data)
		final := false
		for _, f := range burst {
			if c, err := f.Chunk(); err == nil {
				text.WriteString(c.Delta.(string))
			}
			if f.IsFinal {
				fmt.Printf("streamed: %s\nfinal: %s %s %s\n", strings.TrimSpace(text.String()), f.ResponseKind, f.Status, f.Body)
				final = true
			}
		}
		if final {
			break
		}
	}
	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// streamed: HELLO FROM THE PIPELINE
	// final: e2a.complete succeeded {"result":{"words":4}}
	// Run: <nil>
}
