package ingress_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/streams"
)

// A Publisher stores a request durably in E2A_REQUESTS, on
// e2a.req.<pool>.<request_id>, and returns once JetStream acknowledged it;
// an agent of the pool serves it whenever one runs (none does here).
// Publishing the same request_id again within the dedupe window stores
// nothing new: Accepted.Duplicate is true and the sequence is the first
// publish's, so a client may retry a publish without making two requests.
func ExamplePublisher_Publish() {
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	pub := ingress.NewPublisher(mem.JetStream, 5*time.Second)
	env := &e2a.Envelope{RequestID: "req-1", Params: map[string]any{"text": "hello"}}
	first, err := pub.Publish(ctx, "shout", env)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(first.RequestID, first.Pool, first.Duplicate)

	again, err := pub.Publish(ctx, "shout", env)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(again.RequestID, again.Pool, again.Duplicate, again.StreamSeq == first.StreamSeq)

	// A pool name must be a single subject token.
	_, err = pub.Publish(ctx, "no.dots", &e2a.Envelope{RequestID: "req-2"})
	fmt.Println(errors.Is(err, ingress.ErrInvalidPool))
	// Output:
	// req-1 shout false
	// req-1 shout true true
	// true
}
