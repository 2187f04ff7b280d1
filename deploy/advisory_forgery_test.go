package deploy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestStageUserCannotForgeMaxDeliveriesAdvisory: accounts.conf gives each
// stage user only what its stage needs; none but the server may publish a
// pool's max-deliveries advisory
// ($JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.E2A_REQUESTS.agent-demo), on
// which a worker ends the request at the advisory's stream_seq with a
// final e2a.error max_deliveries. But serve and ingress may create
// consumers of KV_E2A_TASKS ($JS.API.CONSUMER.CREATE.KV_E2A_TASKS.*.$KV.E2A_TASKS.>),
// and agent-workflow of its A2E buckets, with any configuration: a push
// consumer whose deliver_subject is the advisory subject, over a key the
// user wrote itself, has the server publish the user's bytes there
// (permissions cannot stop it, and servers before 2.15.3 accepted it). A
// worker ended another principal's running request as failed that way; it
// now ignores a delivery with a reply subject (the server's advisory has
// none), and nats-server 2.15.3, the version built here, refuses the
// consumer (a deliver subject under $JS.EVENT): either way the request
// runs on. On three real nats-server processes with the shipped
// configuration, a real demo worker as agent-demo.
func TestStageUserCannotForgeMaxDeliveriesAdvisory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node nats-server cluster")
	}
	c, ctx, adminNC, adminJS := provisionedCluster(t, 90*time.Second, nil)
	// The bucket the workflow pool creates at start-up, as it does: while
	// the new cluster still counts a peer offline (CI: "no suitable peers
	// for placement, peer offline" right after the streams were applied).
	if err := streams.RetryPlacement(ctx, func(ctx context.Context) error {
		_, err := adminJS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "A2E_LOCAL", Replicas: 3})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// A demo worker, as agent-demo, whose handler runs until cancelled.
	started := make(chan string, 8)
	agentNC, _ := c.connect("agent-demo")
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	logs := &testkit.Buffer{}
	go func() {
		agentDone <- agent.Run(agentCtx, agentNC, "demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			if err := w.Chunk(e2a.DeltaText, "working"); err != nil {
				return err
			}
			started <- env.RequestID
			<-ctx.Done()
			return ctx.Err()
		}), agent.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	}()
	defer func() {
		stopAgent()
		select {
		case <-agentDone:
		case <-time.After(30 * time.Second):
			t.Error("the agent did not stop")
		}
	}()

	for _, tc := range []struct{ user, stream, bucketSubj string }{
		{"serve", "KV_E2A_TASKS", "$KV.E2A_TASKS."},
		{"ingress", "KV_E2A_TASKS", "$KV.E2A_TASKS."},
		{"agent-workflow", "KV_A2E_LOCAL", "$KV.A2E_LOCAL."},
	} {
		t.Run(tc.user, func(t *testing.T) {
			// Another principal's request, being handled.
			id := uuid.Must(uuid.NewV7()).String()
			natstest.PublishRequest(t, adminJS, "demo", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "chat.send", UserID: "alice"})
			reqSubj, _ := subjects.Request("demo", id)
			req, err := streams.LastBySubject(ctx, adminNC, streams.RequestsStream, reqSubj)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-started:
				if got != id {
					t.Fatalf("handler started %s, want %s", got, id)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("the worker did not start %s:\n%s", id, logs)
			}

			nc, _ := c.connect(tc.user)
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			key := tc.bucketSubj + "forged-" + strings.ReplaceAll(tc.user, "-", "")
			adv := fmt.Sprintf(`{"stream":"E2A_REQUESTS","consumer":"agent-demo","stream_seq":%d,"deliveries":77}`, req.Seq)
			if _, err := js.Publish(ctx, key, []byte(adv)); err != nil {
				t.Fatalf("%s writes its own key: %v", tc.user, err)
			}
			ignored := strings.Count(logs.String(), "advisory the server did not send")
			advisory := subjects.MaxDeliveriesAdvisory(streams.RequestsStream, "agent-demo")
			if err := natstest.CreatePushConsumer(ctx, nc, tc.stream, "forged"+strings.ReplaceAll(tc.user, "-", ""), key, advisory); err != nil {
				t.Logf("%s's push consumer refused (as it should be): %v", tc.user, err)
				return
			}
			// The worker says it ignored it (the event to wait for), and the
			// request is still running: its last frame is the handler's.
			testkit.Eventually(t, 20*time.Second, "the worker to ignore "+tc.user+"'s forged advisory", func() bool {
				return strings.Count(logs.String(), "advisory the server did not send") > ignored
			})

			respSubj, _ := subjects.Response(id)
			m, err := streams.LastBySubject(ctx, adminNC, streams.ResponsesStream, respSubj)
			if err != nil {
				t.Fatal(err)
			}
			last, _, ferr := e2a.LastInBurst(m.Header.Get(subjects.HeaderFrames), m.Data)
			if f, perr := e2a.ResponseFromJSON(last); ferr != nil || perr != nil || f.IsFinal {
				t.Errorf("the %s user, which may not publish the pool's advisory subject, had the demo worker end %s (alice's, still running): %s",
					tc.user, id, last)
			}
		})
	}
}
