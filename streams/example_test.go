package streams_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

func ExampleStartEmbedded() {
	dir, _ := os.MkdirTemp("", "e2a-example-")
	defer os.RemoveAll(dir)
	srv, err := streams.StartEmbedded(streams.EmbeddedOptions{StoreDir: dir, SyncAlways: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	nc, err := srv.Connect() // in process; tools use srv.ClientURL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	fmt.Println(nc.IsConnected(), srv.Server().JetStreamEnabled())
	// Output: true true
}

func ExampleApply() {
	srv, _ := streams.StartEmbedded(streams.EmbeddedOptions{})
	defer srv.Shutdown()
	nc, _ := srv.Connect()
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cfg := streams.DefaultConfig()
	cfg.RequestsMaxBytes = 64 << 20
	rep, err := streams.Apply(ctx, js, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(rep)

	cfg.ResponsesMaxAge = 48 * time.Hour
	rep, _ = streams.Apply(ctx, js, cfg)
	c, _ := rep.Get(streams.ResponsesStream)
	fmt.Println(c.Action, c.Drift)
	// Output:
	// stream E2A_REQUESTS: created
	// stream E2A_RESPONSES: created
	// stream E2A_CONTROL: created
	// stream E2A_AUDIT: created
	// stream E2A_ARCHIVE: created
	// kv E2A_TASKS: created
	// kv E2A_RATELIMIT: created
	// updated [MaxAge: 24h0m0s -> 48h0m0s]
}

// StartInMemory is the pipeline's layout on an embedded server, in
// memory: what a test or an example of an agent of one's own runs on, in
// one call. Here a request published on its subject is stored in
// E2A_REQUESTS.
func ExampleStartInMemory() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mem, err := streams.StartInMemory(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mem.Close() // the connection, then the server

	subj, _ := subjects.Request("shout", "req-1")
	ack, err := mem.JetStream.Publish(ctx, subj, []byte(`{"request_id":"req-1"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _ := mem.JetStream.Stream(ctx, ack.Stream)
	info := s.CachedInfo()
	fmt.Println(ack.Stream, ack.Sequence, info.Config.Storage, info.Config.MaxBytes>>20, "MiB")
	// Output: E2A_REQUESTS 1 Memory 64 MiB
}

func ExampleDirectGetBatch() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mem, err := streams.StartInMemory(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mem.Close()

	subj, _ := subjects.Response("req-42")
	for i := range 5 {
		_, _ = mem.JetStream.Publish(ctx, subj, fmt.Appendf(nil, "frame %d", i))
	}

	// Read the frames two at a time, resuming after the last one read.
	var from uint64
	for {
		msgs, more, err := streams.DirectGetBatch(ctx, mem.Conn, streams.ResponsesStream, subj, from, 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, m := range msgs {
			fmt.Printf("%d %s\n", m.Seq, m.Data)
		}
		if !more {
			break
		}
		from = msgs[len(msgs)-1].Seq + 1
	}
	last, _ := streams.LastBySubject(ctx, mem.Conn, streams.ResponsesStream, subj)
	fmt.Println("last:", last.Seq)
	// Output:
	// 1 frame 0
	// 2 frame 1
	// 3 frame 2
	// 4 frame 3
	// 5 frame 4
	// last: 5
}

func ExampleAgentConsumerConfig() {
	cc, err := streams.AgentConsumerConfig("summarizer", 32)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cc.Durable, cc.FilterSubject, cc.MaxAckPending, cc.MaxDeliver, cc.AckWait, cc.BackOff)
	// Output: agent-summarizer e2a.req.summarizer.> 32 5 1m0s [1m0s 2m0s 4m0s 5m0s 5m0s]
}

func ExampleConfig_KeyValueConfig() {
	cfg := streams.DefaultConfig()
	cfg.Replicas = 3
	kv, _ := cfg.KeyValueConfig(streams.RateLimitBucket)
	fmt.Println(kv.Bucket, kv.History, kv.TTL, kv.Replicas)
	// Output: E2A_RATELIMIT 1 25h0m0s 3
}

func ExampleConnConfig() {
	c := streams.ConnConfig{NatsURL: "nats://nats-1:4222,nats://nats-2:4222", User: "e2a", Password: "secret"}
	fmt.Println(c.Validate() == nil)
	fmt.Println(c) // secrets are redacted
	// Output:
	// true
	// url=nats://nats-1:4222,nats://nats-2:4222 user=e2a password=[redacted]
}

// A request looked up by id whatever its pool: a direct get reads it (any
// replica answers); when that finds none, the stream leader's answer is
// the one to trust before calling the request unknown.
func ExampleLeaderLastBySubject() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mem, err := streams.StartInMemory(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mem.Close()
	subj, _ := subjects.Request("demo", "req-42")
	if _, err := mem.JetStream.Publish(ctx, subj, []byte(`{"request_id":"req-42"}`)); err != nil {
		fmt.Println(err)
		return
	}
	anyPool, _ := subjects.RequestAnyPool("req-42")
	m, err := streams.LeaderLastBySubject(ctx, mem.Conn, streams.RequestsStream, anyPool)
	fmt.Println(m.Subject, m.Seq, string(m.Data), err)
	unknown, _ := subjects.RequestAnyPool("req-43")
	_, err = streams.LeaderLastBySubject(ctx, mem.Conn, streams.RequestsStream, unknown)
	fmt.Println(errors.Is(err, streams.ErrNoMessages))
	// Output:
	// e2a.req.demo.req-42 1 {"request_id":"req-42"} <nil>
	// true
}
