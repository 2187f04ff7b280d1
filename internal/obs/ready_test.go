package obs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestPresenceChecks: StreamPresent, BucketPresent and ConsumerPresent
// pass while what they name exists on a real server and fail, naming it,
// once it is gone (what /readyz says of a process missing one).
func TestPresenceChecks(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateConsumer(ctx, streams.RequestsStream, jetstream.ConsumerConfig{Durable: "agent-x"}); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		check  obs.Check
		remove func() error
		names  string
	}{
		{obs.ConsumerPresent(js, streams.RequestsStream, "agent-x"),
			func() error { return js.DeleteConsumer(ctx, streams.RequestsStream, "agent-x") }, "consumer agent-x on " + streams.RequestsStream},
		{obs.BucketPresent(js, streams.TasksBucket),
			func() error { return js.DeleteKeyValue(ctx, streams.TasksBucket) }, "bucket " + streams.TasksBucket},
		{obs.StreamPresent(js, streams.ControlStream),
			func() error { return js.DeleteStream(ctx, streams.ControlStream) }, "stream " + streams.ControlStream},
	}
	for _, c := range checks {
		if err := c.check(ctx); err != nil {
			t.Fatalf("%s present: %v", c.names, err)
		}
		if err := c.remove(); err != nil {
			t.Fatal(err)
		}
		if err := c.check(ctx); err == nil || !strings.HasPrefix(err.Error(), c.names+":") || obs.Degraded(err) {
			t.Errorf("%s gone: %v, want an error naming it, not degraded (a 404 is this deployment's)", c.names, err)
		}
	}
}
