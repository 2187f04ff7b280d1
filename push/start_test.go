package push_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestRunWaitsForItsStreams: the stage started before E2A_RESPONSES exists
// (a deployment whose streams are applied after the stage starts, or a
// cluster still electing their leaders) logs that it waits and binds its
// consumer once the streams are applied. It returned the error at once,
// and the process exited (seen in CI: the stage of a 3-node cluster under
// load, which then hung the deploy test).
func TestRunWaitsForItsStreams(t *testing.T) {
	_, nc := natstest.RunServer(t, natstest.WithoutStreams())
	log := &testkit.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- push.Run(ctx, nc, push.WithLogger(slog.New(slog.NewTextHandler(log, nil)))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	testkit.Eventually(t, 10*time.Second, "the stage waiting for its streams", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("Run returned before its streams were applied: %v", err)
		default:
		}
		return strings.Contains(log.String(), "not available yet")
	})
	js := natstest.JetStream(t, nc)
	if _, err := streams.Apply(ctx, js, natstest.Config()); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the stage's consumer", func() bool {
		_, err := js.Consumer(ctx, streams.ResponsesStream, push.DefaultConsumer)
		return err == nil
	})
}
