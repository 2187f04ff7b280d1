package natstest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

func TestRunServer(t *testing.T) {
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{streams.RequestsStream, streams.ResponsesStream, streams.ControlStream, streams.AuditStream} {
		if _, err := js.Stream(ctx, name); err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
	}
	if _, err := js.KeyValue(ctx, streams.TasksBucket); err != nil {
		t.Fatal(err)
	}
	// Tools connect over TCP.
	tcp, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	subj, _ := subjects.Request("pool", "r1")
	if _, err := natstest.JetStream(t, tcp).Publish(ctx, subj, []byte("{}")); err != nil {
		t.Fatal(err)
	}
}

func TestRunServerWithoutStreams(t *testing.T) {
	_, nc := natstest.RunServer(t, natstest.WithoutStreams(), natstest.WithSyncAlways())
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, streams.RequestsStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream exists: %v", err)
	}
}

// TestClusterSurvivesNodeLoss kills the leader of an R3 stream: publishing
// goes on once a new leader is elected, and the node catches up when it
// comes back.
func TestClusterSurvivesNodeLoss(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	if len(c.ClientURLs()) != 3 || c.MetaLeader() < 0 {
		t.Fatalf("cluster: %v, meta leader %d", c.ClientURLs(), c.MetaLeader())
	}
	nc := c.Connect()
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	s, err := js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("replicas %d", r)
	}
	subj, _ := subjects.Response("req-1")
	publish := func(seq int) {
		t.Helper()
		m := nats.NewMsg(subj)
		m.Header.Set(subjects.HeaderMsgID, subjects.FrameMsgID("req-1", int64(seq)))
		dl, _ := ctx.Deadline()
		testkit.Eventually(t, time.Until(dl), fmt.Sprintf("publish %d acknowledged", seq), func() bool {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			defer pcancel()
			_, err := js.PublishMsg(pctx, m)
			return err == nil
		})
	}
	for i := range 10 {
		publish(i)
	}

	leader := -1
	testkit.Eventually(t, 10*time.Second, "a leader of E2A_RESPONSES", func() bool {
		leader = c.StreamLeader(streams.ResponsesStream)
		return leader >= 0
	})
	c.Kill(leader)
	start := time.Now()
	for i := 10; i < 20; i++ {
		publish(i) // retried until a new leader takes it
	}
	t.Logf("10 publishes after killing the stream leader n%d took %v", leader, time.Since(start))
	if nl := c.StreamLeader(streams.ResponsesStream); nl < 0 || nl == leader {
		t.Fatalf("stream leader after kill: %d", nl)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != 20 {
		t.Fatalf("after failover: %+v, %v", info, err)
	}

	// The killed node comes back and catches up: once every replica is at
	// the same last sequence, one read through it sees everything.
	c.Restart(leader)
	c.WaitStreamsSynced(streams.ResponsesStream)
	direct, err := nats.Connect(c.Node(leader).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	for range 5 { // any replica may answer: each must have all 20
		all, err := streams.DirectGetAll(ctx, direct, streams.ResponsesStream, subj, 0, 8)
		if err != nil || len(all) != 20 {
			t.Fatalf("after restart: %d messages, %v", len(all), err)
		}
	}
}

// TestSameLastSeqs: equal last sequences give them; a replica behind or
// missing is named.
func TestSameLastSeqs(t *testing.T) {
	node := func(seqs map[string]uint64) *server.JSInfo {
		var a server.AccountDetail
		for name, seq := range seqs {
			a.Streams = append(a.Streams, server.StreamDetail{Name: name, State: server.StreamState{LastSeq: seq}})
		}
		return &server.JSInfo{AccountDetails: []*server.AccountDetail{&a}}
	}
	both := map[string]uint64{"A": 7, "B": 3}
	last, err := natstest.SameLastSeqs([]*server.JSInfo{node(both), node(both), node(both)}, "A", "B")
	if err != nil || last["A"] != 7 || last["B"] != 3 {
		t.Fatalf("in sync: %v, %v", last, err)
	}
	if _, err := natstest.SameLastSeqs([]*server.JSInfo{node(both), node(map[string]uint64{"A": 6, "B": 3})}, "A"); err == nil {
		t.Fatal("a replica behind was not seen")
	}
	if _, err := natstest.SameLastSeqs([]*server.JSInfo{node(both), node(map[string]uint64{"B": 3})}, "A"); err == nil {
		t.Fatal("a missing replica was not seen")
	}
	if _, err := natstest.SameLastSeqs([]*server.JSInfo{node(both), node(map[string]uint64{"A": 7, "B": 4})}, "A"); err != nil {
		t.Fatalf("a stream not asked for was compared: %v", err)
	}
}
