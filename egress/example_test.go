package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

// startPipeline starts an embedded JetStream server with the pipeline's
// streams and an agent pool "echo" that answers each request with one text
// chunk per word of its "words" parameter, then completes. It publishes the
// request requestID to that pool and returns the connection and a function
// that stops it all.
func startPipeline(requestID string, words ...string) (*nats.Conn, func()) {
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}

	echo := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		list, _ := env.Params["words"].([]any)
		for _, word := range list {
			if err := w.Chunk(e2a.DeltaText, fmt.Sprint(word)); err != nil {
				return err
			}
		}
		return w.Complete(map[string]any{"words": len(list)})
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	// Coalescing off: every Chunk is a frame of its own, so the frames
	// printed below do not depend on timing.
	go func() { done <- agent.Run(ctx, mem.Conn, "echo", echo, agent.WithCoalesce(0, 0)) }()

	env := &e2a.Envelope{RequestID: requestID, IsStream: true, Params: map[string]any{"words": words}}
	if _, err := ingress.NewPublisher(mem.JetStream, 10*time.Second).Publish(ctx, "echo", env); err != nil {
		panic(err)
	}
	return mem.Conn, func() {
		stop()
		<-done
		mem.Close()
	}
}

// printFrame prints a frame's sequence and kind, and its text delta or
// final status.
func printFrame(f render.Frame) error {
	r := f.Response
	if c, err := r.Chunk(); err == nil {
		fmt.Printf("%d %s %q\n", r.Sequence, r.ResponseKind, c.Delta)
		return nil
	}
	fmt.Printf("%d %s %s final=%t\n", r.Sequence, r.ResponseKind, r.Status, r.IsFinal)
	return nil
}

// Replay reads the frames of a request by its id, in order, and returns
// once it has delivered the final frame: it waits for frames the agent has
// not written yet, so it can be called right after the request was
// published. From 0 it starts with the first frame; from n it resumes,
// delivering only the frames of sequence n and after, as a client that
// already has frames 0 to n-1 needs.
func ExampleReplay() {
	nc, stop := startPipeline("req-replay", "one", "two", "three")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	fmt.Println("from 0:")
	if err := egress.Replay(ctx, nc, "req-replay", 0, printFrame); err != nil {
		fmt.Println(err)
	}
	fmt.Println("from 2:")
	if err := egress.Replay(ctx, nc, "req-replay", 2, printFrame); err != nil {
		fmt.Println(err)
	}
	// An id no request was published with.
	err := egress.Replay(ctx, nc, "req-unknown", 0, printFrame)
	fmt.Println("unknown:", errors.Is(err, egress.ErrNotFound))
	// Output:
	// from 0:
	// 0 e2a.chunk "one"
	// 1 e2a.chunk "two"
	// 2 e2a.chunk "three"
	// 3 e2a.complete succeeded final=true
	// from 2:
	// 2 e2a.chunk "three"
	// 3 e2a.complete succeeded final=true
	// unknown: true
}

// Open returns a Reader, the pull form of Replay: Next returns the frames
// one by one, and io.EOF after the final frame. Here a client resumes
// after the frame of sequence 1, the last it received: it opens at 2, the
// sequence of the next frame it needs (Reader.NextSequence).
func ExampleOpen() {
	nc, stop := startPipeline("req-open", "alpha", "beta", "gamma", "delta")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	lastSeen := int64(1)
	rd, err := egress.Open(ctx, nc, "req-open", lastSeen+1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rd.Close()
	fmt.Println("next:", rd.NextSequence())
	for {
		f, err := rd.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		printFrame(f)
	}
	// Output:
	// next: 2
	// 2 e2a.chunk "gamma"
	// 3 e2a.chunk "delta"
	// 4 e2a.complete succeeded final=true
}
