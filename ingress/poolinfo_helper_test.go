package ingress_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/streams"
)

// publishPoolInfo publishes info in E2A_BRIDGE as a bridge pool does at
// start (`e2a agent --a2a|--openai|--http`): ingress reads a pool's card,
// streaming, required extensions and input modes from it. Publish before
// the pool's first request: ingress keeps a pool's profile 5 s.
func publishPoolInfo(t testing.TB, nc *nats.Conn, info bridge.PoolInfo) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := bridge.OpenConversations(context.Background(), js, streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := conv.PublishPool(context.Background(), info); err != nil {
		t.Fatal(err)
	}
}
