package agent_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestRunWaitsLongForItsConsumer: a worker without consumer provisioning
// started before its consumer is made (`e2a streams apply` after the
// workers) waits for it, however long, and then serves. Run's set-up
// context (10 s) was started before that wait: a consumer made after it
// ran out left Run failing at once on its first flush (context deadline
// exceeded) instead of serving.
func TestRunWaitsLongForItsConsumer(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool, id = "latecons", "latecons-1"
	logs := &testkit.Buffer{}
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return w.Complete("done")
	})
	startWorker(t, s.connect(t), pool, h, agent.WithProvisionConsumer(false),
		agent.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	// Its retries wait 0.1, 0.2, 0.4, 0.8, 1.6, 3.2 and 5 s: after the
	// eighth attempt more than 10 s have passed.
	testkit.Eventually(t, 60*time.Second, "eight attempts to find the consumer", func() bool {
		return strings.Count(logs.String(), "consumer not available yet") >= 8
	})
	cc, err := streams.AgentConsumerConfig(pool, agent.DefaultMaxAckPending)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.js.CreateConsumer(tctx(t), streams.RequestsStream, cc); err != nil {
		t.Fatal(err)
	}
	publish(t, s.js, pool, request(id, nil))
	fr := waitFinal(t, s.nc, id, 30*time.Second)
	if last := fr[len(fr)-1]; last.ResponseKind != e2a.KindComplete {
		t.Fatalf("final frame %s, want the handler's e2a.complete", last.ResponseKind)
	}
}
