package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// BenchmarkIntake measures how fast one replica of the stage reads the
// response messages of requests whose tasks have no configs (the common
// case: every frame of the pipeline passes the stage): b.N requests of one
// final frame each, stored before the stage starts reading.
func BenchmarkIntake(b *testing.B) {
	srv, nc := natstest.RunServer(b)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	// The consumer exists (new messages only) before the messages.
	stop := startBenchStage(b, srv)
	stop()
	pub := ingress.NewPublisher(js, 10*time.Second)
	for range b.N {
		id := uuid.NewString()
		en := &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "message/stream", IsStream: true,
			UserID: "alice", TaskID: "t-" + id, Channel: "test", Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}
		if _, err := pub.Publish(ctx, pool, en); err != nil {
			b.Fatal(err)
		}
		subj, _ := subjects.Response(id)
		f, _ := e2a.MarshalResponse(&e2a.Response{ProtocolVersion: e2a.ProtocolVersion, ResponseID: id, RequestID: id,
			IsFinal: true, Status: "completed", ResponseKind: e2a.KindComplete, Timestamp: e2a.Now(), Body: []byte(`{"result":"x"}`),
			Provenance: e2a.Provenance{SourceProtocol: e2a.SourceE2A}})
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: f}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	stop = startBenchStage(b, srv)
	defer stop()
	testkit.Eventually(b, 10*time.Minute, "all read", func() bool {
		c, err := js.Consumer(ctx, streams.ResponsesStream, push.DefaultConsumer)
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
	})
}

// startBenchStage runs a replica of the stage until stop.
func startBenchStage(b *testing.B, srv *streams.Embedded) (stop func()) {
	nc, err := srv.Connect()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- push.Run(ctx, nc) }()
	js, _ := jetstream.New(nc)
	testkit.Eventually(b, 10*time.Second, "push consumer", func() bool {
		_, err := js.Consumer(ctx, streams.ResponsesStream, push.DefaultConsumer)
		return err == nil
	})
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		nc.Close()
	}
}
