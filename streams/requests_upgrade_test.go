package streams_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestRequestsNarrowingKeepsConsumers: an earlier E2A_REQUESTS (e2a.req.>)
// with the consumers a running deployment has on it (a pool's durable,
// filter e2a.req.<pool>.>; the console index's, e2a.req.>) is narrowed by
// Apply in place; both consumers still deliver the requests published
// after, and may be created again with their filters (a restart).
func TestRequestsNarrowingKeepsConsumers(t *testing.T) {
	_, _, js := startServer(t)
	cfg := testConfig()
	old := cfg.RequestsStreamConfig()
	old.Subjects = []string{subjects.AllRequests}
	if _, err := js.CreateStream(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	consumers := map[string]string{"agent-demo": "e2a.req.demo.>", "console-index": subjects.AllRequests}
	for name, filter := range consumers {
		if _, err := js.CreateOrUpdateConsumer(ctx(t), streams.RequestsStream, jetstream.ConsumerConfig{
			Durable: name, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatalf("consumer %s on the earlier stream: %v", name, err)
		}
	}
	if rep, err := streams.Apply(ctx(t), js, cfg); err != nil {
		t.Fatalf("Apply over an earlier E2A_REQUESTS with consumers: %v\n%s", err, rep)
	}
	subj, _ := subjects.Request("demo", "r-1")
	if _, err := js.Publish(ctx(t), subj, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	for name, filter := range consumers {
		c, err := js.CreateOrUpdateConsumer(ctx(t), streams.RequestsStream, jetstream.ConsumerConfig{
			Durable: name, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Errorf("consumer %s again after Apply: %v", name, err)
			continue
		}
		b, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for range b.Messages() {
			n++
		}
		if n != 1 {
			t.Errorf("consumer %s delivered %d requests after Apply, want 1", name, n)
		}
	}
}
