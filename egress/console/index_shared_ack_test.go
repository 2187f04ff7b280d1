package console_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestIndexBatchOfStoppedProcessNotAcknowledged: two egress processes
// share the durable consumer console-index-requests-v2 (doc.go: "each request
// is indexed by one of them"). Process A has fetched a batch and stops
// (rolling upgrade, crash) before indexing it; the batch is unacknowledged,
// so the consumer must deliver it again after its ack wait and the
// request still reaches the index (what TestIndexPointersOfDuplicateRecord
// relies on). Process B indexes a later request and acknowledges its batch
// its own: with the consumer's ack-all (earlier builds) that one ack also
// acknowledged A's unindexed batch, which the consumer then never
// delivered again, so A's requests were missing from the console list for
// good.
func TestIndexBatchOfStoppedProcessNotAcknowledged(t *testing.T) {
	srv, nc := natstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := natstest.JetStream(t, nc)

	// An earlier process made the shared durable consumer and went away.
	ncA, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	first, err := console.New(ctx, ncA, nil)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	ncA.Close()
	// The ack wait shortened (30 s as shipped) so that the redelivery comes
	// within the test.
	cons, err := js.Consumer(ctx, streams.RequestsStream, console.RequestsConsumer)
	if err != nil {
		t.Fatal(err)
	}
	cc := cons.CachedInfo().Config
	cc.AckWait = time.Second
	if _, err := js.UpdateConsumer(ctx, streams.RequestsStream, cc); err != nil {
		t.Fatal(err)
	}

	publish := func(id string) {
		t.Helper()
		subj, err := subjects.Request("idle", id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, subj, []byte(`{"request_id":"`+id+`","user_id":"alice","params":{}}`), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}

	// Process A takes the next batch of the shared consumer and stops
	// before indexing it (no ack: the consumer is to deliver it again).
	publish("held-by-stopped-process")
	ncH, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	consH, err := natstest.JetStream(t, ncH).Consumer(ctx, streams.RequestsStream, console.RequestsConsumer)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := consH.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for m := range batch.Messages() {
		held = append(held, m.Subject())
	}
	if len(held) != 1 {
		t.Fatalf("process A fetched %v, want the held request", held)
	}
	ncH.Close()

	// Process B runs the indexer and indexes a later request.
	b, err := console.New(ctx, nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	publish("indexed-by-b")
	listed := func() []string {
		pg, err := b.List(ctx, console.Query{Limit: console.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range pg.Entries {
			ids = append(ids, e.RequestID)
		}
		return ids
	}
	testkit.Eventually(t, 20*time.Second, "process B indexing its request", func() bool {
		return slices.Contains(listed(), "indexed-by-b")
	})
	testkit.Eventually(t, 20*time.Second, "the request process A fetched and never indexed, delivered again after the ack wait "+
		"and indexed by process B (with ack-all, B's ack of its own batch acknowledged it: never delivered again)", func() bool {
		return slices.Contains(listed(), "held-by-stopped-process")
	})
}
