package obs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
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

// TestLeaderlessIsDegraded: an R3 stream two of whose three servers are
// gone is answered by the member left (nats-server answers the info of a
// group without a leader) with no leader named; StreamPresent is then
// degraded, ErrNoLeader, rather than ready: nothing can be written to
// the stream. (It was nil, "ready", as long as the info was answered.)
func TestLeaderlessIsDegraded(t *testing.T) {
	c := natstest.RunCluster(t, 3) // the E2A streams with three replicas
	nc := c.Connect()
	js := natstest.JetStream(t, nc)
	check := obs.StreamPresent(js, streams.RequestsStream)
	c.Kill(1)
	c.Kill(2)
	var last string
	ok := testkit.Until(90*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, streams.RequestsStream)
		if err != nil || st.CachedInfo().Cluster == nil || st.CachedInfo().Cluster.Leader != "" {
			last = fmt.Sprintf("info: %v", err)
			return false
		}
		err = check(ctx)
		last = fmt.Sprintf("check after a leaderless info: %v", err)
		if err == nil {
			t.Fatalf("StreamPresent of a stream without a leader: ready, want degraded (%s)", last)
		}
		return errors.Is(err, obs.ErrNoLeader) && obs.Degraded(err) &&
			strings.HasPrefix(err.Error(), "stream "+streams.RequestsStream+":")
	})
	if !ok {
		t.Fatalf("no degraded ErrNoLeader within 90 s; last: %s", last)
	}
}

// TestLeaderNamedIsReady: a check whose answer names a leader (a single
// server names itself) is ready; ErrNoLeader is degraded.
func TestLeaderNamedIsReady(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	if ci := st.CachedInfo().Cluster; ci == nil || ci.Leader == "" {
		t.Fatalf("single server's stream info names no leader: %+v", ci)
	}
	for _, check := range []obs.Check{obs.StreamPresent(js, streams.RequestsStream), obs.BucketPresent(js, streams.TasksBucket)} {
		if err := check(ctx); err != nil {
			t.Errorf("present on a single server: %v", err)
		}
	}
}
