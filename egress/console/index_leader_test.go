package console_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestIndexGoesOnAfterConsumerLeaderChange: the index consumer's leader
// moves to another server (a stepdown, as a rolling restart of the NATS
// servers makes). The new leader ends the pull the indexer had waiting
// ("leadership change", the servers keep the waiting pulls replicated) and
// the indexer pulls again: a request published after the change is listed
// within seconds. (It passed with the client's default heartbeat too: a
// leader change is not how a pull gets lost; TestIndexGoesOnAfterPullLost
// is.)
func TestIndexGoesOnAfterConsumerLeaderChange(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	nc := c.Connect()
	ctx, js, publish, listed := startIndexed(t, nc)

	leader := func() string {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		cons, err := js.Consumer(cctx, streams.RequestsStream, console.RequestsConsumer)
		if err != nil || cons.CachedInfo().Cluster == nil {
			return ""
		}
		return cons.CachedInfo().Cluster.Leader
	}
	var was string
	testkit.Eventually(t, 20*time.Second, "the index consumer's leader", func() bool { was = leader(); return was != "" })
	resp, err := nc.RequestWithContext(ctx, "$JS.API.CONSUMER.LEADER.STEPDOWN."+streams.RequestsStream+"."+console.RequestsConsumer, nil)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Success bool                `json:"success"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &answer); err != nil || !answer.Success {
		t.Fatalf("consumer leader stepdown: %s (%v)", resp.Data, err)
	}
	testkit.Eventually(t, 20*time.Second, "a new leader of the index consumer (was "+was+")", func() bool {
		l := leader()
		return l != "" && l != was
	})

	publish("after-stepdown")
	testkit.Eventually(t, 10*time.Second, "the request published after the leader change listed", listed("after-stepdown"))
}

// TestIndexGoesOnAfterPullLost: a pull of the indexer reaches no
// consumer (here: the consumer deleted and made again, an operator's
// repair; in CI's production test, a pull the cluster answered before the
// new consumer's leader was known, the console then listing nothing for
// 20 s). The client counts such a pull as waiting until its heartbeats
// are missed: with its default (15 s, noticed after 30) the console listed
// nothing new for half a minute. With the indexer's 1-second heartbeat it
// pulls again within seconds.
func TestIndexGoesOnAfterPullLost(t *testing.T) {
	_, nc := natstest.RunServer(t)
	ctx, js, publish, listed := startIndexed(t, nc)

	s, err := js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := s.Consumer(ctx, console.RequestsConsumer)
	if err != nil {
		t.Fatal(err)
	}
	cfg := cons.CachedInfo().Config
	// The pulls on their way to the consumer, seen: once it is deleted (its
	// waiting pull ended "consumer deleted"), the indexer's next pull comes
	// here and nowhere else.
	pulls, err := nc.SubscribeSync(subjects.ConsumerNext(streams.RequestsStream, console.RequestsConsumer))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConsumer(ctx, console.RequestsConsumer); err != nil {
		t.Fatal(err)
	}
	if _, err := pulls.NextMsg(20 * time.Second); err != nil {
		t.Fatalf("no pull of the indexer after the consumer was deleted: %v", err)
	}
	if err := pulls.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateConsumer(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	publish("after-lost-pull")
	testkit.Eventually(t, 10*time.Second, "the request published after the lost pull listed", listed("after-lost-pull"))
}

// startIndexed starts a console on nc (its indexer feeding the index),
// checks that a first request is listed, and returns a context for the
// test, nc's JetStream, a publish of a request of id into E2A_REQUESTS and
// a condition: the console lists id.
func startIndexed(t *testing.T, nc *nats.Conn) (ctx context.Context, js jetstream.JetStream, publish func(id string), listed func(id string) func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	js = natstest.JetStream(t, nc)
	con, err := console.New(ctx, nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	publish = func(id string) {
		t.Helper()
		subj, err := subjects.Request("demo", id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, subj, []byte(`{"request_id":"`+id+`","user_id":"alice","params":{}}`)); err != nil {
			t.Fatal(err)
		}
	}
	listed = func(id string) func() bool {
		return func() bool {
			pg, err := con.List(ctx, console.Query{Limit: console.MaxPageSize})
			return err == nil && slices.ContainsFunc(pg.Entries, func(e console.Entry) bool { return e.RequestID == id })
		}
	}
	publish("first")
	testkit.Eventually(t, 20*time.Second, "the first request listed", listed("first"))
	return ctx, js, publish, listed
}
