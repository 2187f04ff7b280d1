package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2aclient03 "github.com/a2aproject/a2a-go/a2aclient"
	agentcard03 "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// apiKeyTransport sends an API key on every request.
type apiKeyTransport struct{ key string }

func (k apiKeyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(ingress.HeaderAPIKey, k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestPushOff: `e2a serve` and `e2a dev` with E2A_PUSH=off neither open
// nor create the E2A_PUSH bucket (serve's NATS has none after it served),
// run no push consumer, their cards (v1.0 and v0.3) say
// pushNotifications false, and the push-config methods answer
// PushNotificationNotSupported to the a2a-go/v2 client (JSON-RPC and
// HTTP+JSON) and the a2a-go v0.3 client.
func TestPushOff(t *testing.T) {
	const key = "push-off-key-5b1d9e"
	srv, nc := natstest.RunServer(t)
	serve := startE2A(t, serveAddr, []string{"E2A_NATS_URL=" + srv.ClientURL(), "E2A_API_KEYS=tester:" + key, "E2A_PUSH=off", "E2A_LOG_LEVEL=info"}, "serve")
	checkPushOff(t, serve.url, key)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js := natstest.JetStream(t, nc)
	if _, err := js.KeyValue(ctx, streams.PushBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("bucket %s with E2A_PUSH=off: %v (want none)", streams.PushBucket, err)
	}
	if _, err := js.Consumer(ctx, streams.ResponsesStream, push.DefaultConsumer); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("consumer %s with E2A_PUSH=off: %v (want none)", push.DefaultConsumer, err)
	}
	if l := serve.log.String(); !strings.Contains(l, "push notification stage not run here") {
		t.Errorf("serve's log does not say the stage is not run:\n%s", l)
	}
	dev := startE2A(t, devAddr, []string{"E2A_NATS_URL=", "E2A_API_KEYS=tester:" + key, "E2A_PUSH=off"}, "dev")
	checkPushOff(t, dev.url, key)
}

func checkPushOff(t *testing.T, base, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hc := &http.Client{Transport: apiKeyTransport{key}}
	if resp, err := hc.Get(base + "/console/api/tasks/t-1/push"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("console push view with E2A_PUSH=off: %v %v, want 404", resp, err)
	} else {
		_ = resp.Body.Close()
	}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, base)
	if err != nil {
		t.Fatalf("v1.0 card: %v", err)
	}
	if card.Capabilities.PushNotifications {
		t.Errorf("v1.0 card capabilities %+v: pushNotifications with E2A_PUSH=off", card.Capabilities)
	}
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
		c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
			a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}))
		if err != nil {
			t.Fatalf("%s client: %v", binding, err)
		}
		_, err = c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: "t-1", URL: "https://example.com/hook"})
		if !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
			t.Errorf("%s CreateTaskPushConfig: %v, want PushNotificationNotSupported", binding, err)
		}
		if _, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: "t-1"}); !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
			t.Errorf("%s ListTaskPushConfigs: %v, want PushNotificationNotSupported", binding, err)
		}
		_ = c.Destroy()
	}
	card03, err := agentcard03.NewResolver(hc).Resolve(ctx, base)
	if err != nil {
		t.Fatalf("v0.3 card: %v", err)
	}
	if card03.Capabilities.PushNotifications {
		t.Errorf("v0.3 card capabilities %+v: pushNotifications with E2A_PUSH=off", card03.Capabilities)
	}
	c03, err := a2aclient03.NewFromCard(ctx, card03, a2aclient03.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatalf("v0.3 client: %v", err)
	}
	defer func() { _ = c03.Destroy() }()
	_, err = c03.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: "t-1", Config: a2a03.PushConfig{URL: "https://example.com/hook"}})
	if !errors.Is(err, a2a03.ErrPushNotificationNotSupported) {
		t.Errorf("v0.3 tasks/pushNotificationConfig/set: %v, want PushNotificationNotSupported", err)
	}
}

// TestPushConsoleWired: `e2a dev` with E2A_PUSH=on serves the console's view of
// a task's push deliveries: a task without configs answers 200 with none.
func TestPushConsoleWired(t *testing.T) {
	const key = "push-console-key-8a2c4e"
	dev := startE2A(t, devAddr, []string{"E2A_NATS_URL=", "E2A_API_KEYS=tester:" + key, "E2A_PUSH=on"}, "dev")
	hc := &http.Client{Transport: apiKeyTransport{key}}
	resp, err := hc.Get(dev.url + "/console/api/tasks/t-1/push")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tp struct {
		TaskID  string            `json:"task_id"`
		Configs []json.RawMessage `json:"configs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tp); err != nil || resp.StatusCode != http.StatusOK || tp.TaskID != "t-1" || tp.Configs == nil || len(tp.Configs) != 0 {
		t.Fatalf("GET /console/api/tasks/t-1/push: %d %+v %v", resp.StatusCode, tp, err)
	}
}

// TestPushAPIOnly: `e2a serve` with E2A_PUSH=api (serve in Kubernetes,
// beside e2a push replicas) serves the push config methods (its card
// declares pushNotifications, E2A_PUSH exists) but runs no stage: no push
// consumer on E2A_RESPONSES.
func TestPushAPIOnly(t *testing.T) {
	const key = "push-api-key-3f7a1c"
	srv, nc := natstest.RunServer(t)
	serve := startE2A(t, serveAddr, []string{"E2A_NATS_URL=" + srv.ClientURL(), "E2A_API_KEYS=tester:" + key, "E2A_PUSH=api", "E2A_LOG_LEVEL=info"}, "serve")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	card, err := agentcard.NewResolver(&http.Client{Transport: apiKeyTransport{key}}).Resolve(ctx, serve.url)
	if err != nil || !card.Capabilities.PushNotifications {
		t.Fatalf("card with E2A_PUSH=api: %+v %v, want pushNotifications", card, err)
	}
	js := natstest.JetStream(t, nc)
	if _, err := js.KeyValue(ctx, streams.PushBucket); err != nil {
		t.Errorf("bucket %s with E2A_PUSH=api: %v", streams.PushBucket, err)
	}
	if _, err := js.Consumer(ctx, streams.ResponsesStream, push.DefaultConsumer); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("consumer %s with E2A_PUSH=api: %v (want none: e2a push delivers)", push.DefaultConsumer, err)
	}
	// Logged before "serving", which startE2A waited for.
	if l := serve.log.String(); !strings.Contains(l, "push notification stage not run here") {
		t.Errorf("serve's log does not say the stage is not run:\n%s", l)
	}
}
