package a2abridge_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestWorkerKilledMidStream: the worker streaming an agent's long task
// loses its connection (as a killed process does); the request is
// redelivered to another worker, which subscribes to the agent's task and
// writes only what the stored frames do not hold: the client's answer has
// every chunk of the agent exactly once, in order.
func TestWorkerKilledMidStream(t *testing.T) {
	t.Parallel()
	const chunks = 40
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 40 * time.Millisecond, SlowChunks: chunks})
	p := pipetest.Start(t)
	opts := []agent.Option{agent.WithAckWait(time.Second), agent.WithHeartbeat(200 * time.Millisecond)}
	connect := func() *nats.Conn {
		nc, err := nats.Connect(p.NC.ConnectedUrl())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ncA := connect()
	doneA := make(chan error, 1)
	go func() { doneA <- agent.Run(ctx, ncA, "agent", newHandler(t, p, "agent", srv.BaseURL()), opts...) }()

	resp, err := http.Post(p.URL+"/pools/agent/v1/requests", "application/json", strings.NewReader(`{"request_id":"killed-1","params":{"text":"slow: x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	subj, _ := subjects.Response("killed-1")
	testkit.Eventually(t, 30*time.Second, "a few frames stored by the first worker", func() bool {
		msgs, err := streams.DirectGetAll(context.Background(), p.NC, streams.ResponsesStream, subj, 1, 256)
		return err == nil && len(msgs) >= 3
	})
	ncA.Close() // the first worker is gone: no heartbeat, no publish
	<-doneA

	ncB := connect()
	doneB := make(chan error, 1)
	go func() { doneB <- agent.Run(ctx, ncB, "agent", newHandler(t, p, "agent", srv.BaseURL()), opts...) }()
	defer func() { cancel(); <-doneB }()

	a := p.Ask(t, "agent", `{"request_id":"killed-1","params":{"text":"slow: x"}}`)
	var want strings.Builder
	for i := 1; i <= chunks; i++ {
		want.WriteString(up.SlowChunk(i))
	}
	if got := a.Text(e2a.DeltaText); got != want.String() {
		t.Errorf("text after the takeover:\n got %q\nwant %q", got, want.String())
	}
	if f := a.Final(); f == nil || f.ResponseKind != e2a.KindComplete {
		t.Errorf("final frame %+v", f)
	}
	for i, f := range a.Frames {
		if f.Sequence != int64(i) {
			t.Fatalf("frame %d has sequence %d", i, f.Sequence)
		}
	}
}
