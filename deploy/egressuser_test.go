package deploy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestNATSClusterEgressTellsExpiredFrames: the egress user of
// deploy/nats/accounts.conf reads what the read API needs to tell a
// request whose frames aged out of E2A_RESPONSES from a pending one (the
// info of its pool's consumer, the responses stream leader's message
// get): a request its pool acknowledged, whose frames the stream dropped
// while E2A_REQUESTS keeps its envelope, is answered 410 frames_expired at
// once, not 202 pending, on three real nats-server processes, refused
// nothing.
func TestNATSClusterEgressTellsExpiredFrames(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node nats-server cluster")
	}
	c, ctx, _, adminJS := provisionedCluster(t, 90*time.Second, nil)
	id := storeFinished(t, adminJS)
	// Its pool acknowledges it, as the agent does once the final frame is
	// stored.
	cfg, err := streams.AgentConsumerConfig("demo", 4)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := adminJS.CreateOrUpdateConsumer(ctx, streams.RequestsStream, cfg)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		if md, err := m.Metadata(); err == nil {
			seq = md.Sequence.Stream
		}
	}
	if seq == 0 {
		t.Fatal("the pool's consumer delivered no request")
	}
	// The ack is confirmed before every replica's consumer state shows it:
	// egress tells answered from queued by the ack floor it reads, so wait
	// for that floor, as egress would see it a moment later.
	testkit.Eventually(t, 10*time.Second, "the consumer's ack floor to pass the request", func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.AckFloor.Stream >= seq
	})
	natstest.Purge(t, adminJS, streams.ResponsesStream)

	egNC, sink := c.connect("egress")
	eg, err := egress.New(egNC, egress.WithWaitLimits(20*time.Second, 20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	eg.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); eg.Close() })
	for _, path := range []string{"", "?wait=true"} {
		if a := testkit.Get(t, srv.URL+"/v1/requests/"+id+path); a.Status != http.StatusGone || !strings.Contains(a.Body, `"code":"frames_expired"`) {
			t.Errorf("GET %s%s as egress: %+v, want 410 frames_expired", id, path, a)
		}
	}
	if sink.waitFor(0, "permissions violation") == nil {
		t.Errorf("the egress user was refused something: %s", sink)
	}
}
