package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/redact"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Config is the process configuration, read from environment variables with
// the prefix E2A_ (see docs/configuration.md).
type Config struct {
	// HTTPAddr is where ingress, egress, /metrics, /healthz and /readyz listen.
	HTTPAddr string `envconfig:"E2A_HTTP_ADDR" default:"127.0.0.1:8080"`
	// MetricsAddr, when set, is the only listener serving /metrics (not
	// HTTPAddr), so that the metrics need not be public.
	MetricsAddr string `envconfig:"E2A_METRICS_ADDR"`
	// PublicURL is the externally visible base URL (agent card, links);
	// empty = derived from the request (X-Forwarded-* honoured).
	PublicURL string `envconfig:"E2A_PUBLIC_URL"`
	// GRPCAddr, when set, is where the A2A v1.0 gRPC binding listens
	// (its own listener; the agent card then lists it). Empty: off.
	GRPCAddr string `envconfig:"E2A_GRPC_ADDR"`
	// ExtendedCard: the agent cards declare the extended agent card and
	// GetExtendedAgentCard serves it (false: neither, UnsupportedOperation).
	ExtendedCard bool `envconfig:"E2A_EXTENDED_CARD" default:"true"`

	// ConnConfig holds E2A_NATS_URL (empty starts an embedded JetStream
	// server in the process) and the credentials for an external cluster:
	// E2A_NATS_CREDS, E2A_NATS_USER, E2A_NATS_PASSWORD, E2A_NATS_NKEY,
	// E2A_NATS_TLS_CA, E2A_NATS_TLS_CERT, E2A_NATS_TLS_KEY.
	streams.ConnConfig

	// StoreDir is the embedded server's JetStream directory; empty = a
	// temporary directory removed at exit.
	StoreDir string `envconfig:"E2A_STORE_DIR"`
	// NATSPort is the embedded server's loopback client port (0 = random).
	NATSPort int `envconfig:"E2A_NATS_PORT" default:"4222"`
	// SyncAlways fsyncs every JetStream write on the embedded server.
	SyncAlways bool `envconfig:"E2A_SYNC_ALWAYS" default:"false"`

	// Replicas of every stream (1 embedded, 3 on a production cluster).
	Replicas int `envconfig:"E2A_REPLICAS" default:"1"`
	// RequestsMaxAge and ResponsesMaxAge bound the hot streams.
	RequestsMaxAge  time.Duration `envconfig:"E2A_REQUESTS_MAX_AGE" default:"24h"`
	ResponsesMaxAge time.Duration `envconfig:"E2A_RESPONSES_MAX_AGE" default:"24h"`
	// RequestsMaxBytes bounds E2A_REQUESTS; when full, ingress answers 503.
	RequestsMaxBytes int64 `envconfig:"E2A_REQUESTS_MAX_BYTES" default:"1073741824"`
	// ResponsesMaxBytes bounds E2A_RESPONSES (oldest frames dropped).
	ResponsesMaxBytes int64 `envconfig:"E2A_RESPONSES_MAX_BYTES" default:"1073741824"`
	// ControlMaxBytes bounds E2A_CONTROL (oldest cancels dropped).
	ControlMaxBytes int64 `envconfig:"E2A_CONTROL_MAX_BYTES" default:"67108864"`
	// AuditMaxAge and AuditMaxBytes bound E2A_AUDIT (oldest dropped; age 0
	// = bytes only).
	AuditMaxAge   time.Duration `envconfig:"E2A_AUDIT_MAX_AGE" default:"2160h"`
	AuditMaxBytes int64         `envconfig:"E2A_AUDIT_MAX_BYTES" default:"2147483648"`
	// ArchiveMaxAge and ArchiveMaxBytes bound E2A_ARCHIVE, the audit
	// history compressed in batches by the archiver (package archive;
	// oldest batches dropped; age 0 = bytes only, bytes -1 = unlimited).
	ArchiveMaxAge   time.Duration `envconfig:"E2A_ARCHIVE_MAX_AGE" default:"2160h"`
	ArchiveMaxBytes int64         `envconfig:"E2A_ARCHIVE_MAX_BYTES" default:"1073741824"`
	// IndexMaxBytes bounds the console's index (KV_E2A_INDEX; oldest
	// records dropped); KVMaxBytes each key-value bucket (a full one
	// refuses new writes; streams.Config.KeyValueMaxBytes). -1 = unlimited.
	IndexMaxBytes int64 `envconfig:"E2A_INDEX_MAX_BYTES" default:"536870912"`
	KVMaxBytes    int64 `envconfig:"E2A_KV_MAX_BYTES" default:"268435456"`
	// Archive: `e2a dev` runs the archiver in its process (default false:
	// in one process it costs 11-19 % of the requests/s and ≈ 120 MB of
	// heap, and dev's E2A_AUDIT keeps up to 90 days in 2 GiB, ≈ 280,000 requests; `e2a
	// archive` runs it alone, as deployments do). ArchiveBatchBytes (4 KiB..8 MiB,
	// before compression) and ArchiveFlushInterval (10ms..1h) close its
	// batches, in `e2a dev` and `e2a archive`.
	Archive              bool          `envconfig:"E2A_ARCHIVE" default:"false"`
	ArchiveBatchBytes    int           `envconfig:"E2A_ARCHIVE_BATCH_BYTES" default:"1048576"`
	ArchiveFlushInterval time.Duration `envconfig:"E2A_ARCHIVE_FLUSH_INTERVAL" default:"10s"`
	// History: GET /v1/requests/{id}[/stream] (`e2a serve`, `e2a dev`)
	// answers a request the hot streams no longer hold from the audit
	// history, E2A_AUDIT and E2A_ARCHIVE, as `e2a replay` finds it
	// (default true; false: 404 once the hot streams dropped it). In a
	// deployment the serve user reads both streams for it.
	History bool `envconfig:"E2A_HISTORY" default:"true"`
	// StreamFirstFrameWait and StreamIdleTimeout bound how long an answer
	// that follows a request (a stream, `?wait=true`, a blocking A2A
	// answer, an ACP prompt) waits for its first frame and for each next
	// one (egress.WithWaitLimits, streamWaitLimits): past either it ends
	// with a retryable timeout while the request runs on. 0: no limit
	// (the keep-alives hold the connection); negative is refused.
	StreamFirstFrameWait time.Duration `envconfig:"E2A_STREAM_FIRST_FRAME_WAIT" default:"5m"`
	StreamIdleTimeout    time.Duration `envconfig:"E2A_STREAM_IDLE_TIMEOUT" default:"10m"`
	// RequestsCompression, ResponsesCompression and AuditCompression are
	// the streams' storage compression, none or s2 (docs/capacity.md,
	// Bytes); a change applies to an existing stream through e2a streams
	// apply, for the blocks written afterwards.
	RequestsCompression  compression `envconfig:"E2A_REQUESTS_COMPRESSION" default:"none"`
	ResponsesCompression compression `envconfig:"E2A_RESPONSES_COMPRESSION" default:"none"`
	AuditCompression     compression `envconfig:"E2A_AUDIT_COMPRESSION" default:"none"`
	// DedupeWindow is how long the same request_id is recognized as one.
	DedupeWindow time.Duration `envconfig:"E2A_DEDUPE_WINDOW" default:"10m"`
	// TasksTTL is how long a record of E2A_TASKS (an A2A task or context,
	// an ACP session) lives after its last update; 0 keeps records forever.
	// Each is a subject in the NATS server's memory (README, Capacity:
	// Memory), so shorten it with the hot streams; at least
	// E2A_RESPONSES_MAX_AGE, whose frames GetTask rebuilds a task from.
	TasksTTL time.Duration `envconfig:"E2A_TASKS_TTL" default:"72h"`

	// DefaultPool receives requests that name no agent and match no route.
	DefaultPool string `envconfig:"E2A_DEFAULT_POOL" default:"demo"`
	// Routes is the routing rule (method or channel → pool), e.g.
	// "default=demo; method:tool/*=tools; channel:feishu=feishu"; empty
	// sends everything to DefaultPool (workflows to "workflow").
	Routes string `envconfig:"E2A_ROUTES"`
	// MaxBodyBytes bounds request bodies (413 beyond).
	MaxBodyBytes int64 `envconfig:"E2A_MAX_BODY_BYTES" default:"4194304"`
	// AcceptUnknownPools accepts requests for pools no worker ever served
	// (default: refused, 404 unknown_agent, so a typo does not wait forever).
	AcceptUnknownPools bool `envconfig:"E2A_ACCEPT_UNKNOWN_POOLS" default:"false"`

	// RateLimitPerMinute, RateLimitPerHour and RateLimitPerDay limit each
	// principal across all replicas (0 = that window off; all 0 = no
	// limiter).
	RateLimitPerMinute int `envconfig:"E2A_RATE_LIMIT_PER_MINUTE" default:"0"`
	RateLimitPerHour   int `envconfig:"E2A_RATE_LIMIT_PER_HOUR" default:"0"`
	RateLimitPerDay    int `envconfig:"E2A_RATE_LIMIT_PER_DAY" default:"0"`
	// RateLimitBytesPerMinute, RateLimitBytesPerHour and
	// RateLimitBytesPerDay are each principal's budget of request bytes
	// stored in E2A_REQUESTS per window, across all replicas (0 = off;
	// ingress.RateLimits).
	RateLimitBytesPerMinute int64 `envconfig:"E2A_RATE_LIMIT_BYTES_PER_MINUTE" default:"0"`
	RateLimitBytesPerHour   int64 `envconfig:"E2A_RATE_LIMIT_BYTES_PER_HOUR" default:"0"`
	RateLimitBytesPerDay    int64 `envconfig:"E2A_RATE_LIMIT_BYTES_PER_DAY" default:"0"`
	// RateLimitCancelsPerMinute is each principal's budget of cancels of
	// its own requests (A2A tasks/cancel, CancelTask, ACP session/cancel)
	// admitted per minute once its limits above refuse it, so that a
	// principal over its limit can still stop a runaway request (0 = off:
	// such a cancel is refused as any call; ingress.LimiterConfig). It
	// applies only where a limit is set.
	RateLimitCancelsPerMinute int `envconfig:"E2A_RATE_LIMIT_CANCELS_PER_MINUTE" default:"10"`
	// MaxStreamsPerPrincipal bounds concurrent streams per principal per
	// replica (0 = unbounded).
	MaxStreamsPerPrincipal int `envconfig:"E2A_MAX_STREAMS_PER_PRINCIPAL" default:"0"`
	// MaxWaitingTurns bounds the turns of one task or ACP session waiting
	// behind its running turn (ingress.WithMaxWaitingTurns; its default,
	// ingress.DefaultMaxWaitingTurns; 0 = unbounded): each holds its
	// delivery in its pool's MaxAckPending.
	MaxWaitingTurns int `envconfig:"E2A_MAX_WAITING_TURNS" default:"6"`

	// AuthFailureLimit refused credentials from one client address within
	// AuthFailureWindow throttle it (429, the credential unchecked) until
	// the window ends (0 = off); at most AuthFailureAddresses addresses are
	// tracked per replica. TrustedProxies (CIDR prefixes or addresses) are
	// the peers whose X-Forwarded-For names the client (ingress/AUTH.md).
	AuthFailureLimit     int           `envconfig:"E2A_AUTH_FAILURE_LIMIT" default:"20"`
	AuthFailureWindow    time.Duration `envconfig:"E2A_AUTH_FAILURE_WINDOW" default:"1m"`
	AuthFailureAddresses int           `envconfig:"E2A_AUTH_FAILURE_ADDRESSES" default:"10000"`
	TrustedProxies       []string      `envconfig:"E2A_TRUSTED_PROXIES"`

	// MemoryLimit is the container's memory limit in bytes (the shipped
	// manifests give limits.memory through resourceFieldRef); 0: none.
	// Unless GOMEMLIMIT is set, the process sets Go's soft memory limit to
	// 90 % of it (applyMemoryLimit): Go's limit covers only the memory the
	// runtime manages, so at 100 % the collector runs hardest exactly when
	// the kernel OOM-kills the container.
	MemoryLimit int64 `envconfig:"E2A_MEMORY_LIMIT" default:"0"`

	// LogFormat is json or text; LogLevel debug, info, warn or error.
	LogFormat string `envconfig:"E2A_LOG_FORMAT" default:"json"`
	LogLevel  string `envconfig:"E2A_LOG_LEVEL" default:"info"`

	// AgentAckWait is the agent pools' AckWait (`e2a agent`, whose
	// --ack-wait wins, and the pools `e2a dev` and `e2a acp` run): how long
	// a request may go without its worker's heartbeat before another
	// worker takes it over (0: the agent runtime's, agent.DefaultAckWait;
	// else at least 1s).
	// AgentWorkerID names the worker in its logs and in its frames'
	// provenance (empty: a random id); the shipped manifests give the pod's
	// name.
	AgentAckWait  time.Duration `envconfig:"E2A_AGENT_ACK_WAIT"`
	AgentWorkerID string        `envconfig:"E2A_AGENT_WORKER_ID"`
	// AgentDeadline bounds every request of the agent pools, counted from
	// when it was stored (agent.WithDefaultDeadline; an envelope's earlier
	// deadline wins): past it the request ends e2a.error
	// deadline_exceeded, its handler (a bridge's upstream call) cancelled.
	// 0: none.
	AgentDeadline time.Duration `envconfig:"E2A_AGENT_DEADLINE"`
	// AgentDrainTimeout is how long a stopping worker (SIGTERM) lets its
	// in-flight requests run before it hands the rest back to the pool
	// (agent.WithDrainTimeout): another worker then takes them over (an
	// A2A upstream's task is resubscribed to; an HTTP or OpenAI-compatible
	// upstream's answer that had started ends agent_interrupted,
	// retryable). 0 hands them back at once.
	AgentDrainTimeout time.Duration `envconfig:"E2A_AGENT_DRAIN_TIMEOUT" default:"25s"`

	// Upstream configures the bridge of `e2a agent --pool P --a2a|--openai|
	// --http URL` (E2A_UPSTREAM_*; the flags win over the variables).
	Upstream UpstreamConfig `ignored:"true"`

	// SecretKeys are extra words or keys (comma-separated) whose values are
	// secrets, added to the policy of package redact at start-up.
	SecretKeys []string `envconfig:"E2A_SECRET_KEYS"`
}

// LoadConfig reads the configuration from the environment.
func LoadConfig() (Config, error) {
	var c Config
	// Every tag names its variable in full (E2A_…) and the prefix is
	// empty: with a prefix, envconfig reads the bare tag name (NATS_PORT,
	// URL, API_KEY) when the prefixed variable is unset, and Kubernetes
	// sets NATS_PORT=tcp://… in every pod of a namespace with a Service
	// named nats.
	if err := envconfig.Process("", &c); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if err := envconfig.Process("", &c.Upstream); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	redact.AddWords(c.SecretKeys...)
	if c.Replicas < 1 {
		return c, fmt.Errorf("config: E2A_REPLICAS must be ≥ 1")
	}
	if c.DedupeWindow > c.RequestsMaxAge {
		return c, fmt.Errorf("config: E2A_DEDUPE_WINDOW (%s) must not exceed E2A_REQUESTS_MAX_AGE (%s)", c.DedupeWindow, c.RequestsMaxAge)
	}
	if c.TasksTTL != 0 && c.TasksTTL < c.ResponsesMaxAge {
		return c, fmt.Errorf("config: E2A_TASKS_TTL (%s) must be 0 (forever) or at least E2A_RESPONSES_MAX_AGE (%s)", c.TasksTTL, c.ResponsesMaxAge)
	}
	// A new A2A task's first request stands for its record until a second
	// turn writes one (ingress/tasks.go): a record that expired before that
	// request would leave the task as its first turn alone.
	if c.TasksTTL != 0 && c.TasksTTL < c.RequestsMaxAge {
		return c, fmt.Errorf("config: E2A_TASKS_TTL (%s) must be 0 (forever) or at least E2A_REQUESTS_MAX_AGE (%s)", c.TasksTTL, c.RequestsMaxAge)
	}
	if c.AgentDeadline < 0 {
		return c, fmt.Errorf("config: E2A_AGENT_DEADLINE (%s) must be 0 (none) or a positive duration", c.AgentDeadline)
	}
	if c.StreamFirstFrameWait < 0 {
		return c, fmt.Errorf("config: E2A_STREAM_FIRST_FRAME_WAIT (%s) must be 0 (no limit) or a positive duration", c.StreamFirstFrameWait)
	}
	if c.StreamIdleTimeout < 0 {
		return c, fmt.Errorf("config: E2A_STREAM_IDLE_TIMEOUT (%s) must be 0 (no limit) or a positive duration", c.StreamIdleTimeout)
	}
	if c.AgentDrainTimeout < 0 {
		return c, fmt.Errorf("config: E2A_AGENT_DRAIN_TIMEOUT (%s) must be 0 (hand in-flight requests back at once) or a positive duration", c.AgentDrainTimeout)
	}
	if c.AgentAckWait != 0 && c.AgentAckWait < time.Second {
		return c, fmt.Errorf("config: E2A_AGENT_ACK_WAIT (%s) must be 0 (the agent runtime's default) or at least 1s", c.AgentAckWait)
	}
	if err := c.checkArchive(); err != nil {
		return c, err
	}
	if err := bridge.CheckOptions(bridge.WithMaxAnswerBytes(c.Upstream.MaxAnswerBytes)); err != nil {
		return c, fmt.Errorf("config: E2A_UPSTREAM_MAX_ANSWER_BYTES: %w", err)
	}
	if err := c.checkLimits(); err != nil {
		return c, err
	}
	if _, err := c.authLimit(); err != nil {
		return c, err
	}
	if err := c.checkProcess(); err != nil {
		return c, err
	}
	if err := c.checkConn(); err != nil {
		return c, err
	}
	if err := c.StreamsConfig().Validate(); err != nil {
		// Refused now, by the variables' names (streams names its
		// fields), not when the streams are provisioned.
		return c, fmt.Errorf("config: %s", streamVars.Replace(strings.TrimPrefix(err.Error(), streams.ErrInvalidConfig.Error()+": ")))
	}
	return c, nil
}

// streamVars renames streams.Config's fields in its errors to the
// variables that set them (StreamsConfig).
var streamVars = strings.NewReplacer(
	"RequestsMaxAge", "E2A_REQUESTS_MAX_AGE", "ResponsesMaxAge", "E2A_RESPONSES_MAX_AGE",
	"RequestsMaxBytes", "E2A_REQUESTS_MAX_BYTES", "ResponsesMaxBytes", "E2A_RESPONSES_MAX_BYTES",
	"ControlMaxBytes", "E2A_CONTROL_MAX_BYTES", "AuditMaxAge", "E2A_AUDIT_MAX_AGE", "AuditMaxBytes", "E2A_AUDIT_MAX_BYTES",
	"ArchiveMaxAge", "E2A_ARCHIVE_MAX_AGE", "ArchiveMaxBytes", "E2A_ARCHIVE_MAX_BYTES", "Duplicates", "E2A_DEDUPE_WINDOW",
	"IndexMaxBytes", "E2A_INDEX_MAX_BYTES", "KeyValueMaxBytes", "E2A_KV_MAX_BYTES",
	"Replicas", "E2A_REPLICAS", "TasksTTL", "E2A_TASKS_TTL")

// checkLimits refuses negative limits (0 turns each off; a negative one
// was taken as off too, silently) and an E2A_PUBLIC_URL that is no
// absolute http(s) URL: the agent cards advertise it, and a host without
// its scheme made their URLs relative ones no client can call.
func (c Config) checkLimits() error {
	for _, l := range []struct {
		name string
		v    int64
	}{
		{"E2A_RATE_LIMIT_PER_MINUTE", int64(c.RateLimitPerMinute)}, {"E2A_RATE_LIMIT_PER_HOUR", int64(c.RateLimitPerHour)},
		{"E2A_RATE_LIMIT_PER_DAY", int64(c.RateLimitPerDay)}, {"E2A_MAX_STREAMS_PER_PRINCIPAL", int64(c.MaxStreamsPerPrincipal)},
		{"E2A_MAX_WAITING_TURNS", int64(c.MaxWaitingTurns)},
		{"E2A_RATE_LIMIT_BYTES_PER_MINUTE", c.RateLimitBytesPerMinute}, {"E2A_RATE_LIMIT_BYTES_PER_HOUR", c.RateLimitBytesPerHour},
		{"E2A_RATE_LIMIT_BYTES_PER_DAY", c.RateLimitBytesPerDay}, {"E2A_RATE_LIMIT_CANCELS_PER_MINUTE", int64(c.RateLimitCancelsPerMinute)},
		{"E2A_UPSTREAM_CARD_REFRESH", int64(c.Upstream.CardRefresh)},
	} {
		if l.v < 0 {
			return fmt.Errorf("config: %s must not be negative (0 turns it off)", l.name)
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("config: E2A_PUBLIC_URL %q must be an absolute http or https URL (https://e2a.example.com)", c.PublicURL)
		}
	}
	return nil
}

// authLimit is the failure limiter's configuration (ingress.WithAuthLimit),
// refused by its variables' names.
func (c Config) authLimit() (ingress.AuthLimitConfig, error) {
	trusted, err := ingress.ParseTrustedProxies(c.TrustedProxies)
	if err != nil {
		return ingress.AuthLimitConfig{}, fmt.Errorf("config: E2A_TRUSTED_PROXIES: %w", err)
	}
	l := ingress.AuthLimitConfig{MaxFailures: c.AuthFailureLimit, Window: c.AuthFailureWindow,
		MaxAddresses: c.AuthFailureAddresses, TrustedProxies: trusted}
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("config: E2A_AUTH_FAILURE_LIMIT (≥ 0), E2A_AUTH_FAILURE_WINDOW (1s..24h), "+
			"E2A_AUTH_FAILURE_ADDRESSES (1..1000000): %w", err)
	}
	return l, nil
}

// checkProcess refuses, by their variables' names, values that were
// refused only later by an option's own name (ingress's "max body bytes",
// "invalid agent pool", obs's "log level", the embedded server's "invalid
// port") or, for E2A_HTTP_ADDR set but empty, taken as ":0": every
// interface at a random port instead of the loopback default; and
// E2A_LOG_FORMAT set but empty, which was taken as json while an empty
// E2A_LOG_LEVEL was refused.
func (c Config) checkProcess() error {
	var lv slog.Level
	switch {
	case strings.TrimSpace(c.HTTPAddr) == "":
		return fmt.Errorf("config: E2A_HTTP_ADDR is set but empty (unset it for 127.0.0.1:8080; :8080 listens on every interface)")
	case c.NATSPort < 0 || c.NATSPort > 65535:
		return fmt.Errorf("config: E2A_NATS_PORT (%d) must be within 0..65535 (0 = random)", c.NATSPort)
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("config: E2A_MAX_BODY_BYTES (%d) must be positive", c.MaxBodyBytes)
	case subjects.ValidatePool(c.DefaultPool) != nil:
		return fmt.Errorf("config: E2A_DEFAULT_POOL %q is no agent pool name (1 to 64 letters, digits, - and _)", c.DefaultPool)
	case c.LogLevel == "":
		return fmt.Errorf("config: E2A_LOG_LEVEL is set but empty: want debug, info, warn or error (unset it for info)")
	case lv.UnmarshalText([]byte(c.LogLevel)) != nil:
		return fmt.Errorf("config: E2A_LOG_LEVEL %q: want debug, info, warn or error", c.LogLevel)
	case c.LogFormat == "":
		// Set but empty (an empty ConfigMap value): refused as
		// E2A_LOG_LEVEL, E2A_HTTP_ADDR and E2A_DEFAULT_POOL are, not taken
		// as json (obs.NewLogger's "" is json).
		return fmt.Errorf("config: E2A_LOG_FORMAT is set but empty: want json or text (unset it for json)")
	case c.LogFormat != "json" && c.LogFormat != "text":
		return fmt.Errorf("config: E2A_LOG_FORMAT %q: want json or text", c.LogFormat)
	case c.MemoryLimit != 0 && c.MemoryLimit < minMemoryLimit:
		// Below 16 MiB it is no container's limit in bytes but a slip
		// (a resourceFieldRef with a divisor: "256" for 256Mi), and a soft
		// limit that low would run the collector without pause.
		return fmt.Errorf("config: E2A_MEMORY_LIMIT (%d) must be 0 (none) or the memory limit in bytes, at least %d (16 MiB)", c.MemoryLimit, minMemoryLimit)
	}
	return nil
}

// minMemoryLimit is the least E2A_MEMORY_LIMIT taken (16 MiB).
const minMemoryLimit = 16 << 20

// applyMemoryLimit sets Go's soft memory limit to 90 % of E2A_MEMORY_LIMIT
// unless GOMEMLIMIT is set (it wins, "off" too, as GOGC wins over
// gcDefault), and returns the limit set (0: none). The 10 % left are what
// the runtime's limit does not cover: goroutine stacks beyond its goal,
// memory outside the Go heap, the page cache charged to the container,
// fragmentation (Go's GC guide: leave 5–10 % headroom).
func (c Config) applyMemoryLimit() int64 {
	if c.MemoryLimit == 0 || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := c.MemoryLimit - c.MemoryLimit/10
	debug.SetMemoryLimit(limit)
	return limit
}

// logMemoryLimit says at start which soft memory limit the runtime runs
// with, and where it came from: E2A_MEMORY_LIMIT's 90 % (applyMemoryLimit,
// which run calls before the logger exists) or GOMEMLIMIT, which wins.
// The limit in effect was seen only on /metrics (go_gc_gomemlimit_bytes),
// so a manifest whose E2A_MEMORY_LIMIT was lost (or overridden by a
// GOMEMLIMIT left in an image) went unnoticed. Neither set: debug only.
func logMemoryLimit(c Config, log *slog.Logger) {
	limit := debug.SetMemoryLimit(-1) // reads it
	switch gomem := os.Getenv("GOMEMLIMIT"); {
	case gomem != "":
		log.Info("Go memory limit from GOMEMLIMIT (it wins over E2A_MEMORY_LIMIT)", "GOMEMLIMIT", gomem,
			"E2A_MEMORY_LIMIT", c.MemoryLimit, "go_memory_limit", limit)
	case c.MemoryLimit != 0:
		log.Info("Go memory limit set", "E2A_MEMORY_LIMIT", c.MemoryLimit, "go_memory_limit", limit)
	default:
		log.Debug("no Go memory limit (E2A_MEMORY_LIMIT and GOMEMLIMIT unset)")
	}
}

// checkConn refuses the connection settings streams.ConnConfig.Validate
// refuses when connecting, by the variables' names (it says "password
// without user"); never quoting a credential.
func (c Config) checkConn() error {
	methods := 0
	for _, set := range []bool{c.CredsFile != "", c.User != "" || c.Password != "", c.NKeySeedFile != ""} {
		if set {
			methods++
		}
	}
	switch {
	case c.ReconnectWait < 0:
		return fmt.Errorf("config: E2A_NATS_RECONNECT_WAIT (%s) must not be negative (0 = 2s)", c.ReconnectWait)
	case c.PingInterval < 0:
		return fmt.Errorf("config: E2A_NATS_PING_INTERVAL (%s) must not be negative (0 = 1s)", c.PingInterval)
	case c.ReconnectBufSize < 0:
		return fmt.Errorf("config: E2A_NATS_RECONNECT_BUFFER (%d) must not be negative (0 = 8 MiB)", c.ReconnectBufSize)
	case methods > 1:
		return fmt.Errorf("config: set one of E2A_NATS_CREDS, E2A_NATS_USER (with E2A_NATS_PASSWORD) and E2A_NATS_NKEY")
	case c.Password != "" && c.User == "":
		return fmt.Errorf("config: E2A_NATS_PASSWORD is set without E2A_NATS_USER")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return fmt.Errorf("config: E2A_NATS_TLS_CERT and E2A_NATS_TLS_KEY go together")
	}
	if c.NatsURL == "" {
		return nil // an embedded server's connection reads none of the files
	}
	// A file that cannot be read is named by its variable: nats.go said
	// "nats: open /etc/nats/user.creds: no such file or directory" when
	// connecting, naming no variable.
	for _, f := range []struct{ name, path string }{{"E2A_NATS_CREDS", c.CredsFile}, {"E2A_NATS_NKEY", c.NKeySeedFile},
		{"E2A_NATS_TLS_CA", c.TLSCA}, {"E2A_NATS_TLS_CERT", c.TLSCert}, {"E2A_NATS_TLS_KEY", c.TLSKey}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("config: %s: %w", f.name, err)
		}
	}
	return nil
}

// checkArchive checks the E2A_ARCHIVE_* values, the batch's against the
// bounds of archive's options, so that a bad value stops every command at
// once with the variable's name.
func (c Config) checkArchive() error {
	switch {
	case c.ArchiveMaxBytes != streams.Unlimited && c.ArchiveMaxBytes <= 0:
		return fmt.Errorf("config: E2A_ARCHIVE_MAX_BYTES (%d) must be positive, or -1 (unlimited)", c.ArchiveMaxBytes)
	case c.ArchiveMaxAge != 0 && c.ArchiveMaxAge < 100*time.Millisecond:
		return fmt.Errorf("config: E2A_ARCHIVE_MAX_AGE (%s) must be 0 (bytes only) or at least 100ms", c.ArchiveMaxAge)
	case c.ArchiveBatchBytes < archive.BatchBytesMin || c.ArchiveBatchBytes > archive.BatchBytesMax:
		return fmt.Errorf("config: E2A_ARCHIVE_BATCH_BYTES (%d) must be within %d..%d (4 KiB..8 MiB)", c.ArchiveBatchBytes, archive.BatchBytesMin, archive.BatchBytesMax)
	case c.ArchiveFlushInterval < archive.FlushIntervalMin || c.ArchiveFlushInterval > archive.FlushIntervalMax:
		return fmt.Errorf("config: E2A_ARCHIVE_FLUSH_INTERVAL (%s) must be within %s..%s", c.ArchiveFlushInterval, archive.FlushIntervalMin, archive.FlushIntervalMax)
	}
	return nil
}

// agentOptions are the options every agent pool of this process runs
// with: E2A_AGENT_DRAIN_TIMEOUT, and E2A_AGENT_ACK_WAIT and
// E2A_AGENT_DEADLINE when set (`e2a agent` applies its own flag and the
// deadline itself).
func (c Config) agentOptions() []agent.Option {
	opts := []agent.Option{agent.WithDrainTimeout(c.AgentDrainTimeout)}
	if c.AgentAckWait != 0 {
		opts = append(opts, agent.WithAckWait(c.AgentAckWait))
	}
	if c.AgentDeadline > 0 {
		opts = append(opts, agent.WithDefaultDeadline(c.AgentDeadline))
	}
	return opts
}

// StreamsConfig maps the configuration onto the stream definitions.
func (c Config) StreamsConfig() streams.Config {
	s := streams.DefaultConfig()
	s.Replicas = c.Replicas
	s.RequestsMaxAge = c.RequestsMaxAge
	s.ResponsesMaxAge = c.ResponsesMaxAge
	s.RequestsMaxBytes = c.RequestsMaxBytes
	s.ResponsesMaxBytes = c.ResponsesMaxBytes
	s.ControlMaxBytes = c.ControlMaxBytes
	s.AuditMaxAge = c.AuditMaxAge
	s.AuditMaxBytes = c.AuditMaxBytes
	s.ArchiveMaxAge = c.ArchiveMaxAge
	s.ArchiveMaxBytes = c.ArchiveMaxBytes
	s.IndexMaxBytes = c.IndexMaxBytes
	s.KeyValueMaxBytes = c.KVMaxBytes
	s.RequestsCompression = c.RequestsCompression.store()
	s.ResponsesCompression = c.ResponsesCompression.store()
	s.AuditCompression = c.AuditCompression.store()
	s.Duplicates = c.DedupeWindow
	s.TasksTTL = c.TasksTTL
	return s
}

// UpstreamConfig is a bridge pool's upstream (E2A_UPSTREAM_*). APIKey and
// the header values are secrets: never logged (bridge.Credentials), never
// published.
type UpstreamConfig struct {
	// Kind is a2a, openai or http (set by --a2a, --openai, --http).
	Kind string `envconfig:"E2A_UPSTREAM_KIND"`
	// URL: the A2A agent's card URL (or its base), the OpenAI-compatible
	// base URL (http://localhost:8000/v1), the HTTP agent's URL.
	URL string `envconfig:"E2A_UPSTREAM_URL"`
	// Model and System: the OpenAI-compatible model and system prompt.
	Model  string `envconfig:"E2A_UPSTREAM_MODEL"`
	System string `envconfig:"E2A_UPSTREAM_SYSTEM"`
	// ThinkOpen: the OpenAI-compatible model's chat template opens its
	// <think> block in the prompt (openai.WithThinkOpen).
	ThinkOpen bool `envconfig:"E2A_UPSTREAM_THINK_OPEN"`
	// APIKey is sent as "Authorization: Bearer <key>", or in the header an
	// A2A agent's card asks for an API key in.
	APIKey string `envconfig:"E2A_UPSTREAM_API_KEY"`
	// Headers are extra headers sent upstream, "Name: value" pairs
	// separated by ";" (values may be secrets).
	Headers string `envconfig:"E2A_UPSTREAM_HEADERS"`
	// ConnectTimeout bounds connecting; IdleTimeout the wait for the answer
	// and the silence between its bytes.
	ConnectTimeout time.Duration `envconfig:"E2A_UPSTREAM_CONNECT_TIMEOUT" default:"5s"`
	IdleTimeout    time.Duration `envconfig:"E2A_UPSTREAM_IDLE_TIMEOUT" default:"60s"`
	// MaxInFlight bounds the upstream calls in flight per process.
	MaxInFlight int `envconfig:"E2A_UPSTREAM_MAX_IN_FLIGHT" default:"64"`
	// MaxAnswerBytes bounds the bytes of the frames one upstream answer
	// writes (bridge.WithMaxAnswerBytes, ≥ 1024): past it the request ends
	// upstream_protocol_error and the upstream is read no further, so one
	// answer cannot fill E2A_RESPONSES and evict every other request's
	// frames. It bounds the bytes an SDK reads of one answer's body that
	// is no event stream too (bridge.WithMaxBodyBytes).
	MaxAnswerBytes int64 `envconfig:"E2A_UPSTREAM_MAX_ANSWER_BYTES" default:"67108864"`
	// Retries before the first frame (backoff from RetryBase, at most
	// RetryMax, full jitter, Retry-After honoured).
	Retries   int           `envconfig:"E2A_UPSTREAM_RETRIES" default:"3"`
	RetryBase time.Duration `envconfig:"E2A_UPSTREAM_RETRY_BASE" default:"200ms"`
	RetryMax  time.Duration `envconfig:"E2A_UPSTREAM_RETRY_MAX" default:"10s"`
	// Name and Description describe the pool in its agent card (an A2A
	// upstream's card gives its own).
	Name        string `envconfig:"E2A_UPSTREAM_NAME"`
	Description string `envconfig:"E2A_UPSTREAM_DESCRIPTION"`
	// CardRefresh is how often an A2A upstream's card is read again, so
	// that the pool's card follows it (skills added, a new version); 0
	// reads it at start only.
	CardRefresh time.Duration `envconfig:"E2A_UPSTREAM_CARD_REFRESH" default:"5m"`
	// AllowedHosts are the hosts besides the configured URL's on which an
	// A2A upstream's card may name the interface the bridge calls, with
	// the credentials (comma-separated hostnames, any port, or host:port;
	// a2abridge.WithAllowedHosts): an interface elsewhere is not used;
	// nor is a token endpoint the card names elsewhere (OAuthTokenURL).
	AllowedHosts string `envconfig:"E2A_UPSTREAM_ALLOWED_HOSTS"`
	// InputModes are the media types (comma-separated) the A2A doors take
	// in a file part to the pool, listed on its card (set by
	// --input-modes); empty: an A2A upstream's own card's, else the
	// defaults (text/plain, application/json).
	InputModes string `envconfig:"E2A_UPSTREAM_INPUT_MODES"`
	// Params is a JSON object of chat completion request members an
	// --openai pool sends with every call (e.g. {"temperature":0.2,
	// "max_tokens":1024}; openai.ParseParams checks them); a request's own
	// params replace them, but for a token limit above it.
	Params string `envconfig:"E2A_UPSTREAM_PARAMS"`
	// TLSCA is the PEM file of the authorities an https upstream's
	// certificate is checked against instead of the system's roots;
	// TLSCert and TLSKey are the PEM files of the client certificate the
	// bridge presents to an upstream that asks for one (mutual TLS), both
	// or neither.
	TLSCA   string `envconfig:"E2A_UPSTREAM_TLS_CA"`
	TLSCert string `envconfig:"E2A_UPSTREAM_TLS_CERT"`
	TLSKey  string `envconfig:"E2A_UPSTREAM_TLS_KEY"`
	// OAuthTokenURL, OAuthClientID and OAuthClientSecret (all three, or
	// none) get the upstream's bearer tokens by OAuth 2.0's client
	// credentials grant (RFC 6749 §4.4) instead of a fixed API key: an
	// identity provider's token endpoint (Keycloak, Microsoft Entra ID,
	// Okta, Auth0), asked again before a token expires. OAuthScopes
	// (space- or comma-separated) and OAuthAudience (the audience
	// parameter some providers ask for) go with the grant. The secret is
	// sent to the token endpoint only: https, or http on this machine.
	// For an A2A upstream OAuthTokenURL may be left out: the agent card's
	// client-credentials flow names it, and the scopes unless OAuthScopes
	// is set (tokenFromCard), on the agent's host or one of AllowedHosts.
	OAuthTokenURL     string `envconfig:"E2A_UPSTREAM_OAUTH_TOKEN_URL"`
	OAuthClientID     string `envconfig:"E2A_UPSTREAM_OAUTH_CLIENT_ID"`
	OAuthClientSecret string `envconfig:"E2A_UPSTREAM_OAUTH_CLIENT_SECRET"`
	OAuthScopes       string `envconfig:"E2A_UPSTREAM_OAUTH_SCOPES"`
	OAuthAudience     string `envconfig:"E2A_UPSTREAM_OAUTH_AUDIENCE"`
	// cardScopes are the scopes the agent card asks for (tokenFromCard),
	// non-nil when they stand for OAuthScopes: kept whole, as a scope
	// may hold a comma, which OAuthScopes' list separates.
	cardScopes []string
}

// tlsConfig is the TLS that TLSCA, TLSCert and TLSKey set, nil for none
// (the system's roots); an error names the variables.
func (u UpstreamConfig) tlsConfig() (*tls.Config, error) {
	if u.TLSCA == "" && u.TLSCert == "" && u.TLSKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if u.TLSCA != "" {
		pem, err := os.ReadFile(u.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("E2A_UPSTREAM_TLS_CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("E2A_UPSTREAM_TLS_CA: %s holds no PEM certificate", u.TLSCA)
		}
	}
	const pair = "E2A_UPSTREAM_TLS_CERT, E2A_UPSTREAM_TLS_KEY"
	switch {
	case (u.TLSCert == "") != (u.TLSKey == ""):
		return nil, fmt.Errorf("%s go together", pair)
	case u.TLSCert != "":
		cert, err := tls.LoadX509KeyPair(u.TLSCert, u.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("%s: the client certificate: %w", pair, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// headers parses Headers ("Name: value; Name2: value2"). A header named
// twice, in any case, is refused: "a: 1; A: 2" set both names and the
// map's order chose which value the upstream got.
func (u UpstreamConfig) headers() (map[string]string, error) {
	if strings.TrimSpace(u.Headers) == "" {
		return nil, nil
	}
	out := map[string]string{}
	entry := map[string]int{} // canonical name → its entry
	n := 0
	for _, kv := range strings.Split(u.Headers, ";") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		n++
		k, v, ok := strings.Cut(kv, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			// The value may be a secret: name the position, not the text
			// (the entries' count: out counts names, one for two entries
			// naming one).
			return nil, fmt.Errorf("E2A_UPSTREAM_HEADERS: an entry without \"Name: value\" (entry %d)", n)
		}
		if first, ok := entry[http.CanonicalHeaderKey(k)]; ok {
			return nil, fmt.Errorf("E2A_UPSTREAM_HEADERS: one header in entries %d and %d", first, n)
		}
		entry[http.CanonicalHeaderKey(k)] = n
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// streamWaitLimits is egress's wait limits as E2A_STREAM_FIRST_FRAME_WAIT
// and E2A_STREAM_IDLE_TIMEOUT give them: 0 is no limit (egress's
// negative; its zero keeps its default).
func (c Config) streamWaitLimits() egress.Option {
	none := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	return egress.WithWaitLimits(none(c.StreamFirstFrameWait), none(c.StreamIdleTimeout))
}
