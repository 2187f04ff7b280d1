package deploy

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// recordingRegisterer registers on a real registry and remembers every
// metric name and its labels.
type recordingRegisterer struct {
	reg *prometheus.Registry
	mu  sync.Mutex
	m   map[string][]string // name -> variable labels
}

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

func (r *recordingRegisterer) record(c prometheus.Collector) {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		s := d.String()
		n := descName.FindStringSubmatch(s)
		if n == nil {
			continue
		}
		var labels []string
		if l := descLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
			for _, x := range strings.Split(l[1], ",") {
				labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(x, "c("), ")"))
			}
		}
		r.mu.Lock()
		r.m[n[1]] = labels
		r.mu.Unlock()
	}
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.record(c)
	return r.reg.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recordingRegisterer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

func (r *recordingRegisterer) names() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]string, len(r.m))
	for k, v := range r.m {
		out[k] = v
	}
	return out
}

// exporterMetrics are the prometheus-nats-exporter series the dashboard
// and the alerting rules may use, with their labels: the exporter as the
// NATS Helm chart runs it (-prefix=nats -jsz=all), names and labels from
// its collector/jsz.go (nats-io/prometheus-nats-exporter, the version the
// chart ships: BuildFQName(system, "server"|"stream"|"consumer", …),
// serverLabels, streamLabels, consumerLabels).
var exporterMetrics = map[string]bool{
	"nats_consumer_num_pending":       true,
	"nats_consumer_num_ack_pending":   true,
	"nats_consumer_num_redelivered":   true,
	"nats_consumer_num_waiting":       true,
	"nats_stream_total_messages":      true,
	"nats_stream_total_bytes":         true,
	"nats_stream_limit_bytes":         true,
	"nats_stream_first_seq":           true,
	"nats_stream_last_seq":            true,
	"nats_server_total_streams":       true,
	"nats_server_total_message_bytes": true,
	"nats_server_max_storage":         true,
}

// Labels of the exporter's jsz metrics (collector/jsz.go).
var (
	exporterServerLabels   = []string{"server_id", "server_name", "cluster", "domain", "meta_leader", "is_meta_leader"}
	exporterStreamLabels   = append(slices.Clone(exporterServerLabels), "account", "account_name", "account_id", "stream_name", "stream_leader", "is_stream_leader", "stream_raft_group")
	exporterConsumerLabels = append(slices.Clone(exporterStreamLabels), "consumer_name", "consumer_leader", "is_consumer_leader", "consumer_desc")
)

// exporterLabels returns the labels of an exporter metric.
func exporterLabels(name string) []string {
	switch {
	case strings.HasPrefix(name, "nats_consumer_"):
		return exporterConsumerLabels
	case strings.HasPrefix(name, "nats_stream_"):
		return exporterStreamLabels
	}
	return exporterServerLabels
}

// TestGrafanaDashboard checks deploy/grafana/e2a-dashboard.json against
// the metrics the stages really register: every e2a_* series it queries
// exists with the labels it groups by, every registered e2a_* metric has a
// panel, and the NATS exporter's consumer metrics (pending, ack pending,
// redelivered) are there.
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("grafana", "e2a-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}

	registered := registeredMetrics(t)

	metricRe := regexp.MustCompile(`\b((?:e2a|nats)_[a-z0-9_]+)\b`)
	byRe := regexp.MustCompile(`by \(([^)]*)\)`)
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			var groupBy []string
			for _, m := range byRe.FindAllStringSubmatch(tg.Expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					if l = strings.TrimSpace(l); l != "le" {
						groupBy = append(groupBy, l)
					}
				}
			}
			for _, m := range metricRe.FindAllString(tg.Expr, -1) {
				if strings.HasPrefix(m, "nats_") {
					if !exporterMetrics[m] {
						t.Errorf("panel %q: %s is not a metric of the NATS exporter", p.Title, m)
					}
					used[m] = true
					continue
				}
				name := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					name = strings.TrimSuffix(name, suf)
				}
				labels, ok := registered[name]
				if !ok {
					t.Errorf("panel %q: %s is not registered by any stage", p.Title, m)
					continue
				}
				used[name] = true
				for _, l := range groupBy {
					if !slices.Contains(labels, l) {
						t.Errorf("panel %q: %s has no label %q (labels %v)", p.Title, name, l, labels)
					}
				}
			}
		}
	}
	var missing []string
	for name := range registered {
		if strings.HasPrefix(name, "e2a_") && !used[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("metrics without a panel: %v", missing)
	}
	// Accepted requests are counted where they are accepted (every answer
	// mode and protocol), not inferred from HTTP 202 answers.
	if strings.Contains(string(data), `code=\"202\"`) || !used["e2a_ingress_accepted_total"] {
		t.Error("the dashboard counts accepted requests from HTTP 202 answers instead of e2a_ingress_accepted_total")
	}
	for _, m := range []string{"nats_consumer_num_pending", "nats_consumer_num_ack_pending", "nats_consumer_num_redelivered"} {
		if !used[m] {
			t.Errorf("dashboard does not show %s", m)
		}
	}
}

// registeredMetrics returns the metrics ingress (with authentication and
// its failure limiter on), egress, an agent pool, a bridge (an OpenAI
// bridge's, as e2a agent --openai builds it), the push stage and the
// archiver register (name → variable labels), started in process on an
// embedded server.
func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	// The metrics of ingress, egress and an agent pool, as registered.
	_, nc := natstest.RunServer(t)
	rec := &recordingRegisterer{reg: prometheus.NewRegistry(), m: map[string][]string{}}
	eg, err := egress.New(nc, egress.WithRegisterer(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer eg.Close()
	// With authentication on, as e2a serve runs it: the failure limiter
	// registers its metrics (an open Auth has nothing to limit).
	auth, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{{Principal: "alice", Secret: "ak_dashboard_0123456789abcdef"}}},
		ingress.WithAuthLimit(ingress.DefaultAuthLimitConfig()), ingress.WithAuthRegisterer(rec))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingress.New(nc, eg, ingress.WithRegisterer(rec), ingress.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	// A bridge's (e2a_bridge_*), registered as it is built; never called.
	client, err := bridge.NewClient("http://127.0.0.1:8000/v1")
	if err != nil {
		t.Fatal(err)
	}
	up, err := openai.New(client, "llama3.2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bridge.New("llm", up, bridge.WithMetrics(rec)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	go func() { done <- agent.Run(ctx, nc, demo.Pool, demo.New(), agent.WithMetrics(rec)) }()
	testkit.Eventually(t, 10*time.Second, "the agent metrics registered", func() bool {
		_, ok := rec.names()["e2a_agent_in_flight"]
		return ok
	})
	// The push stage's.
	go func() { done <- push.Run(ctx, nc, push.WithRegisterer(rec)) }()
	testkit.Eventually(t, 10*time.Second, "the push metrics registered", func() bool {
		_, ok := rec.names()["e2a_push_lag_seconds"]
		return ok
	})
	// The archiver's.
	go func() { done <- archive.Run(ctx, nc, archive.WithRegisterer(rec)) }()
	testkit.Eventually(t, 10*time.Second, "the archive metrics registered", func() bool {
		_, ok := rec.names()["e2a_archive_last_record_timestamp_seconds"]
		return ok
	})
	// Every process's NATS connection events, as cmd/e2a's newRegistry
	// registers them.
	rec.MustRegister(obs.NATSConnEvents(streams.NewConnEvents(nil)))
	cancel()
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// Every process's e2a_jetstream_unavailable, registered with its
	// /readyz (obs.Register).
	obs.Register(http.NewServeMux(), rec.reg)
	mfs, err := rec.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if _, ok := rec.names()[mf.GetName()]; !ok && len(mf.GetMetric()) > 0 {
			var labels []string
			for _, l := range mf.GetMetric()[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
			rec.mu.Lock()
			rec.m[mf.GetName()] = labels
			rec.mu.Unlock()
		}
	}
	return rec.names()
}
