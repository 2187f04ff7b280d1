package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestConfigReadsOnlyPrefixedVariables: docs/configuration.md says the variables
// have the prefix E2A_, but envconfig v1.4 falls back to the unprefixed
// tag name when the E2A_ one is unset. In a Kubernetes namespace with a
// Service named "nats" (deploy/k8s: Helm release "nats", E2A_NATS_URL
// nats://nats:4222), the kubelet injects NATS_PORT=tcp://IP:4222 into every
// pod, and deploy/k8s/config.yaml does not set E2A_NATS_PORT.
func TestConfigReadsOnlyPrefixedVariables(t *testing.T) {
	t.Run("k8s service link NATS_PORT", func(t *testing.T) {
		t.Setenv("E2A_NATS_URL", "nats://nats:4222")
		t.Setenv("NATS_PORT", "tcp://10.96.0.12:4222")
		if _, err := LoadConfig(); err != nil {
			t.Errorf("LoadConfig with only the kubelet's NATS_PORT set: %v", err)
		}
	})
	t.Run("NATS_URL used for E2A_NATS_URL", func(t *testing.T) {
		t.Setenv("NATS_URL", "nats://prod.example:4222")
		t.Setenv("NATS_PASSWORD", "s3cret")
		c, err := LoadConfig()
		if err != nil {
			t.Fatal(err)
		}
		if c.NatsURL != "" || c.Password != "" {
			t.Errorf("E2A_NATS_URL unset but NatsURL=%q Password=%q (docs: empty starts an embedded server)", c.NatsURL, c.Password)
		}
	})
	t.Run("generic API_KEY and URL become the upstream's", func(t *testing.T) {
		t.Setenv("API_KEY", "some-other-service-key")
		t.Setenv("URL", "https://unrelated.example/")
		c, err := LoadConfig()
		if err != nil {
			t.Fatal(err)
		}
		if c.Upstream.APIKey != "" || c.Upstream.URL != "" {
			t.Errorf("E2A_UPSTREAM_* unset but Upstream.APIKey=%q URL=%q", c.Upstream.APIKey, c.Upstream.URL)
		}
		// `e2a agent --pool demo` then refuses to start (exit 2).
		if _, err := (bridgeFlags{}).upstream(c.Upstream); err != errNoUpstream {
			t.Errorf("e2a agent --pool demo with URL set in the environment: %v (want errNoUpstream)", err)
		}
	})
	t.Run("LOG_LEVEL", func(t *testing.T) {
		t.Setenv("LOG_LEVEL", "verbose")
		c, err := LoadConfig()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.EqualFold(c.LogLevel, "info") {
			t.Errorf("E2A_LOG_LEVEL unset but LogLevel=%q", c.LogLevel)
		}
	})
	t.Run("WORKFLOW_MAX_STEPS", func(t *testing.T) {
		t.Setenv("WORKFLOW_MAX_STEPS", "5")
		c, err := workflow.ConfigFromEnv()
		if err != nil {
			t.Fatal(err)
		}
		if c.MaxSteps != 1000 {
			t.Errorf("E2A_WORKFLOW_MAX_STEPS unset but MaxSteps=%d", c.MaxSteps)
		}
	})
	t.Run("PUSH", func(t *testing.T) {
		t.Setenv("PUSH", "nonsense")
		cfg, err := LoadConfig()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := pushOptions(cfg, false, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("E2A_PUSH unset, PUSH=nonsense: %v", err)
		}
	})
}

// TestSealKeyWarning: without E2A_PUSH_SEAL_KEY a process that stores push
// configs (e2a serve, e2a push: E2A_PUSH on or api) warns that their
// tokens are stored as given; with E2A_PUSH=off it stores none and says
// nothing (it warned), nor does e2a dev.
func TestSealKeyWarning(t *testing.T) {
	for _, c := range []struct {
		push string
		dev  bool
		warn bool
	}{{"on", false, true}, {"api", false, true}, {"off", false, false}, {"on", true, false}} {
		t.Setenv("E2A_PUSH", c.push)
		t.Setenv("E2A_PUSH_SEAL_KEY", "")
		cfg, err := LoadConfig()
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		if _, _, err := pushOptions(cfg, c.dev, nil, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "E2A_PUSH_SEAL_KEY"); got != c.warn {
			t.Errorf("E2A_PUSH=%s dev=%v: warned %v, want %v: %s", c.push, c.dev, got, c.warn, logs.String())
		}
	}
}

// TestPushMaxTasksPerPrincipalEnv: E2A_PUSH_MAX_TASKS_PER_PRINCIPAL sets
// how many tasks with push configs a principal may have (the push store
// of e2a serve and e2a dev); out of 1..10000 it is refused before start,
// named. Only the Go option set it: a client putting an inline config on
// every new task had its 1,001st message refused within E2A_TASKS_TTL,
// and an operator could not raise it.
func TestPushMaxTasksPerPrincipalEnv(t *testing.T) {
	_, nc := natstest.RunServer(t)
	t.Setenv("E2A_PUSH_MAX_TASKS_PER_PRINCIPAL", "2")
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	st, err := openPushStore(t.Context(), nc, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, task := range []string{"t1", "t2", "t3"} {
		_, err := st.Create(t.Context(), "alice", push.Config{TaskID: task, URL: "http://127.0.0.1:1/" + task})
		if limited := errors.Is(err, push.ErrLimit); limited != (i == 2) || (err != nil && !limited) {
			t.Errorf("task %d of alice with E2A_PUSH_MAX_TASKS_PER_PRINCIPAL=2: %v", i+1, err)
		}
	}
	for _, v := range []string{"0", "10001", "-1"} {
		t.Setenv("E2A_PUSH_MAX_TASKS_PER_PRINCIPAL", v)
		if _, err := checkHTTPConfig(cfg, false); err == nil || !strings.Contains(err.Error(), "E2A_PUSH_MAX_TASKS_PER_PRINCIPAL") {
			t.Errorf("E2A_PUSH_MAX_TASKS_PER_PRINCIPAL=%s: %v, want refused naming it", v, err)
		}
	}
}
