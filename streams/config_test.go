package streams_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

func TestConfigValidate(t *testing.T) {
	if err := streams.DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	for name, mut := range map[string]func(*streams.Config){
		"replicas 0":              func(c *streams.Config) { c.Replicas = 0 },
		"replicas 6":              func(c *streams.Config) { c.Replicas = 6 },
		"storage":                 func(c *streams.Config) { c.Storage = 7 },
		"requests age 0":          func(c *streams.Config) { c.RequestsMaxAge = 0 },
		"duplicates > req age":    func(c *streams.Config) { c.RequestsMaxAge = time.Minute },
		"duplicates > resp age":   func(c *streams.Config) { c.ResponsesMaxAge = time.Minute },
		"duplicates > ctl age":    func(c *streams.Config) { c.ControlMaxAge = time.Minute },
		"duplicates 0":            func(c *streams.Config) { c.Duplicates = 0 },
		"requests bytes 0":        func(c *streams.Config) { c.RequestsMaxBytes = 0 },
		"responses bytes -2":      func(c *streams.Config) { c.ResponsesMaxBytes = -2 },
		"control bytes 0":         func(c *streams.Config) { c.ControlMaxBytes = 0 },
		"audit bytes 0":           func(c *streams.Config) { c.AuditMaxBytes = 0 },
		"index bytes 0":           func(c *streams.Config) { c.IndexMaxBytes = 0 },
		"kv bytes -2":             func(c *streams.Config) { c.KeyValueMaxBytes = -2 },
		"audit partitions 0":      func(c *streams.Config) { c.AuditPartitions = 0 },
		"audit partitions 2000":   func(c *streams.Config) { c.AuditPartitions = 2000 },
		"audit age tiny":          func(c *streams.Config) { c.AuditMaxAge = time.Millisecond },
		"tasks history 0":         func(c *streams.Config) { c.TasksHistory = 0 },
		"tasks history 65":        func(c *streams.Config) { c.TasksHistory = 65 },
		"rate limit ttl negative": func(c *streams.Config) { c.RateLimitTTL = -time.Second },
	} {
		c := streams.DefaultConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, streams.ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidConfig", name, err)
		}
	}
	// Short ages are fine for tests when the window fits.
	c := streams.DefaultConfig()
	c.ResponsesMaxAge, c.Duplicates = time.Minute, 30*time.Second
	c.AuditMaxAge = 0
	if err := c.Validate(); err != nil {
		t.Fatalf("short ages: %v", err)
	}
	// Every error is listed.
	c = streams.DefaultConfig()
	c.Replicas, c.AuditPartitions = 0, 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Replicas") || !strings.Contains(err.Error(), "AuditPartitions") {
		t.Fatalf("Validate() = %v", err)
	}
}

func TestDefinitions(t *testing.T) {
	c := streams.DefaultConfig()
	c.Replicas = 3
	all, err := c.StreamConfigs()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 || all[3].Name != streams.AuditStream || all[4].Name != streams.ArchiveStream {
		t.Fatalf("stream order: %v", all)
	}
	arch := c.ArchiveStreamConfig()
	if arch.Subjects[0] != subjects.ArchiveBatches || !arch.DenyDelete || !arch.DenyPurge || !arch.AllowDirect ||
		arch.MaxAge != 90*24*time.Hour || arch.MaxBytes != streams.GiB || arch.Discard != jetstream.DiscardOld ||
		arch.Compression != jetstream.NoCompression || arch.Replicas != 3 {
		t.Errorf("archive: %+v", arch)
	}
	req := c.RequestsStreamConfig()
	if req.Name != "E2A_REQUESTS" || req.Subjects[0] != subjects.RequestSubjects || req.Discard != jetstream.DiscardNew ||
		req.MaxBytes != streams.GiB || req.Duplicates != 10*time.Minute || req.MaxAge != 24*time.Hour || req.Replicas != 3 ||
		req.Retention != jetstream.LimitsPolicy {
		t.Errorf("requests: %+v", req)
	}
	resp := c.ResponsesStreamConfig()
	if resp.Subjects[0] != subjects.AllResponses || !resp.AllowDirect || !resp.AllowBatchPublish || resp.RePublish == nil ||
		resp.RePublish.Source != subjects.AllResponseFrames || resp.RePublish.Destination != subjects.LiveOfFrames || resp.RePublish.HeadersOnly {
		t.Errorf("responses: %+v", resp)
	}
	ctl := c.ControlStreamConfig()
	if ctl.Subjects[0] != subjects.AllControl || ctl.MaxMsgsPerSubject != 1 {
		t.Errorf("control: %+v", ctl)
	}
	audit := c.AuditStreamConfig()
	if !audit.DenyDelete || !audit.DenyPurge || len(audit.Sources) != 2 || len(audit.Subjects) != 0 || audit.Duplicates != 0 {
		t.Errorf("audit: %+v", audit)
	}
	if d := audit.Sources[0].SubjectTransforms[0].Destination; d != "e2a.audit.req.{{partition(16,2)}}" {
		t.Errorf("audit request transform %q", d)
	}

	kv, err := c.KeyValueConfig(streams.TasksBucket)
	if err != nil || kv.History != 5 || kv.Replicas != 3 || kv.TTL != 72*time.Hour {
		t.Errorf("tasks kv: %+v, %v", kv, err)
	}
	kv, err = c.KeyValueConfig("E2A_OTHER")
	if err != nil || kv.History != 1 || kv.TTL != 0 || kv.Replicas != 3 {
		t.Errorf("other kv: %+v, %v", kv, err)
	}
	if _, err := c.KeyValueConfig("bad.name"); !errors.Is(err, streams.ErrInvalidConfig) {
		t.Errorf("bad bucket: %v", err)
	}
	kvs, err := c.KeyValueConfigs()
	if err != nil || len(kvs) != 2 {
		t.Errorf("KeyValueConfigs: %v, %v", kvs, err)
	}
	bad := c
	bad.Replicas = 0
	if _, err := bad.StreamConfigs(); !errors.Is(err, streams.ErrInvalidConfig) {
		t.Errorf("StreamConfigs(invalid) = %v", err)
	}
}

func TestAgentConsumerConfig(t *testing.T) {
	cc, err := streams.AgentConsumerConfig("summarizer", 8)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Durable != "agent-summarizer" || cc.FilterSubject != "e2a.req.summarizer.>" || cc.AckPolicy != jetstream.AckExplicitPolicy ||
		cc.AckWait != 60*time.Second || cc.MaxDeliver != 5 || cc.MaxAckPending != 8 {
		t.Fatalf("consumer: %+v", cc)
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	if len(cc.BackOff) != len(want) {
		t.Fatalf("backoff %v", cc.BackOff)
	}
	for i := range want {
		if cc.BackOff[i] != want[i] {
			t.Fatalf("backoff %v, want %v", cc.BackOff, want)
		}
	}
	cc, err = streams.AgentConsumerConfig("p", 1, streams.WithMaxDeliver(3), streams.WithBackOff(5*time.Second, 10*time.Second))
	if err != nil || cc.AckWait != 5*time.Second || cc.MaxDeliver != 3 || len(cc.BackOff) != 2 {
		t.Fatalf("with options: %+v, %v", cc, err)
	}
	for name, tc := range map[string]struct {
		pool string
		n    int
		opts []streams.ConsumerOption
		want error
	}{
		"bad pool":        {"a.b", 1, nil, subjects.ErrInvalidPool},
		"concurrency 0":   {"p", 0, nil, streams.ErrInvalidOptions},
		"ack wait":        {"p", 1, []streams.ConsumerOption{streams.WithAckWait(time.Millisecond)}, streams.ErrInvalidOptions},
		"max deliver":     {"p", 1, []streams.ConsumerOption{streams.WithMaxDeliver(0)}, streams.ErrInvalidOptions},
		"backoff too big": {"p", 1, []streams.ConsumerOption{streams.WithMaxDeliver(1), streams.WithBackOff(time.Second, time.Second)}, streams.ErrInvalidOptions},
		"backoff empty":   {"p", 1, []streams.ConsumerOption{streams.WithBackOff()}, streams.ErrInvalidOptions},
	} {
		if _, err := streams.AgentConsumerConfig(tc.pool, tc.n, tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
}

func TestAgentConsumerOnServer(t *testing.T) {
	_, _, js := startApplied(t)
	cc, err := streams.AgentConsumerConfig("pool-1", 4)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.CreateOrUpdateConsumer(ctx(t), streams.RequestsStream, cc)
	if err != nil {
		t.Fatalf("server refused consumer: %v", err)
	}
	got := c.CachedInfo().Config
	if got.Durable != cc.Durable || got.MaxAckPending != 4 || got.AckWait != cc.AckWait || len(got.BackOff) != len(cc.BackOff) {
		t.Fatalf("server config %+v", got)
	}
	// Idempotent.
	if _, err := js.CreateOrUpdateConsumer(ctx(t), streams.RequestsStream, cc); err != nil {
		t.Fatal(err)
	}
}
