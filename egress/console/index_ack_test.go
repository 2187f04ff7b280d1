package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestIndexLostAckDoesNotStallIndex: an index publish whose acknowledgement
// never comes (taken by a server that then lost it, as a stream leader
// change can) must neither stop the indexer for good nor drop the record:
// the batch is published again once the index stream answers, and later
// requests are indexed after it. Here the index stream is gone and a
// subscriber that never answers takes the publishes; the stream comes back
// once the first record was taken.
func TestIndexLostAckDoesNotStallIndex(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true,
		console: []console.Option{console.WithIndexPublishTimeout(300 * time.Millisecond)}})
	js := natstest.JetStream(t, p.nc)
	ctx := context.Background()
	const indexStream = "KV_" + console.Bucket
	if err := js.DeleteStream(ctx, indexStream); err != nil {
		t.Fatal(err)
	}
	taken := make(chan struct{}, 16)
	silent, err := p.nc.Subscribe(subjects.KV(console.Bucket, ">"), func(*nats.Msg) {
		select {
		case taken <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	first := p.submit(t, `{"params":{"text":"lost ack"}}`)
	select {
	case <-taken:
	case <-time.After(20 * time.Second):
		t.Fatal("the indexer published no record of the first request")
	}
	if _, err := js.CreateStream(ctx, console.IndexStreamConfig(streams.DefaultConfig(), 0)); err != nil {
		t.Fatal(err)
	}
	if err := silent.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	second := p.submit(t, `{"params":{"text":"after the lost ack"}}`)
	waitIndexed(t, p, first, second)
}
