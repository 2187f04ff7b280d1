package push

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/streams"
)

// Defaults of the options.
const (
	DefaultRetryWindow   = 24 * time.Hour
	DefaultBackoffBase   = time.Second
	DefaultBackoffMax    = 10 * time.Minute
	DefaultTimeout       = 10 * time.Second
	DefaultMaxBody       = 1 << 20
	DefaultMaxAckPending = 10000
	DefaultAckWait       = time.Minute
	DefaultOrderWait     = time.Second
	DefaultConsumer      = "push"
	// DefaultDeadShare is the part of E2A_PUSH_DEAD's MaxBytes one
	// principal's dead letters may hold (WithDeadShare).
	DefaultDeadShare = 0.125
	// AllowHostsEnv is the environment variable of the allow-list (read by
	// cmd/e2a, passed with WithAllowHosts).
	AllowHostsEnv = "E2A_PUSH_ALLOW_HOSTS"
)

// Option configures NewStore, Run, ListDead and Redeliver; each reads the
// options that concern it. Every option validates its value and returns
// an error wrapping ErrInvalidOption.
type Option func(*options) error

type options struct {
	urls                 urlPolicy
	streams              streams.Config
	maxPerTask           int
	maxTasksPerPrincipal int
	retryWindow          time.Duration
	backoffBase          time.Duration
	backoffMax           time.Duration
	timeout              time.Duration
	maxBody              int
	maxAckPending        int
	ackWait              time.Duration
	orderWait            time.Duration
	consumer             string
	deadShare            float64
	log                  *slog.Logger
	registerer           prometheus.Registerer
	signer               *Signer
	turns                TaskTurns
	sealer               *sealer
	// beforeIntake, when set (tests: WithBeforeIntake), runs first in
	// the consumer's callback, for each response message.
	beforeIntake func(jetstream.Msg)
}

// CheckOptions returns the error NewStore or Run would return for opts
// (matching ErrInvalidOption), without connecting: for a command that
// checks its configuration before it starts anything.
func CheckOptions(opts ...Option) error {
	_, err := buildOptions(opts)
	return err
}

func buildOptions(opts []Option) (options, error) {
	o := options{
		urls:                 urlPolicy{resolver: net.DefaultResolver},
		streams:              streams.DefaultConfig(),
		maxPerTask:           DefaultMaxPerTask,
		maxTasksPerPrincipal: DefaultMaxTasksPerPrincipal,
		retryWindow:          DefaultRetryWindow,
		backoffBase:          DefaultBackoffBase,
		backoffMax:           DefaultBackoffMax,
		timeout:              DefaultTimeout,
		maxBody:              DefaultMaxBody,
		maxAckPending:        DefaultMaxAckPending,
		ackWait:              DefaultAckWait,
		orderWait:            DefaultOrderWait,
		consumer:             DefaultConsumer,
		deadShare:            DefaultDeadShare,
		log:                  slog.New(slog.DiscardHandler),
	}
	if err := option.Apply(ErrInvalidOption, &o, opts); err != nil {
		return o, err
	}
	return o, nil
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, a...)...)
}

// WithSealKey seals the secrets of the configs stored in E2A_PUSH (a
// config's webhook URL, token and authentication credentials) with key, 32 bytes
// (AES-256-GCM; LoadSealKey reads SealKeyEnv's file): what the bucket, its
// replicas, backups and every NATS user that may read it hold is then of
// no use without the key. The Store that writes configs and the stage that
// delivers them need the same key. Configs stored before a key was set are
// read as they are and sealed when next written; a sealed config read
// without the key (or with another) is ErrUnavailable, never sent.
func WithSealKey(key []byte) Option {
	return func(o *options) error {
		s, err := newSealer(key)
		if err != nil {
			return invalid("%v", err)
		}
		o.sealer = s
		return nil
	}
}

// WithAllowHosts adds host[:port] patterns (a name, "*.example.com" for
// its subdomains, an IP literal, "[::1]:8443"; items may be comma
// separated, as in E2A_PUSH_ALLOW_HOSTS) whose webhooks may use http and
// may resolve to loopback or private addresses (e2a dev: localhost). A
// port is its number, 1..65535 ("h:0443" allows https://h/, and a URL's
// ":0443" is 443 too, as the dialer reads it); a pattern that is no
// host[:port] or *.domain, or a name with an empty label ("*..",
// "a..b"), is ErrInvalidOption.
func WithAllowHosts(patterns ...string) Option {
	return func(o *options) error {
		rules, err := parseAllowHosts(patterns)
		if err != nil {
			return err
		}
		o.urls.allow = append(o.urls.allow, rules...)
		return nil
	}
}

// WithResolver sets the resolver of webhook hosts (default
// net.DefaultResolver), at creation and at every connection.
func WithResolver(r Resolver) Option {
	return option.NotNil(ErrInvalidOption, "resolver", r, func(o *options) { o.urls.resolver = r })
}

// WithStreamsConfig sets the sizes E2A_PUSH and E2A_PUSH_DEAD are created
// with when they do not exist (default streams.DefaultConfig()).
func WithStreamsConfig(c streams.Config) Option {
	return func(o *options) error {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidOption, err)
		}
		o.streams = c
		return nil
	}
}

// WithMaxPerTask bounds the configs of one task, 1..100 (default 10).
func WithMaxPerTask(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 100 {
			return invalid("max configs per task %d (1..100)", n)
		}
		o.maxPerTask = n
		return nil
	}
}

// WithMaxTasksPerPrincipal bounds the tasks with configs of one principal,
// 1..10000 (default 1000), across replicas (slots.go: one key holds a
// principal's slots, about 55 bytes each).
func WithMaxTasksPerPrincipal(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 10_000 {
			return invalid("max tasks per principal %d (1..10000)", n)
		}
		o.maxTasksPerPrincipal = n
		return nil
	}
}

// WithRetryWindow sets how long an update is retried before it is
// dead-lettered, 1 ms..30 days (default 24 h).
func WithRetryWindow(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Millisecond || d > 30*24*time.Hour {
			return invalid("retry window %s (1ms..720h)", d)
		}
		o.retryWindow = d
		return nil
	}
}

// WithBackoff sets the first retry delay and its cap: attempt n waits
// base·2^(n-1), at most max, with full jitter over its upper half
// (defaults 1 s and 10 min). 1 ms ≤ base ≤ max ≤ 24 h.
func WithBackoff(base, max time.Duration) Option {
	return func(o *options) error {
		if base < time.Millisecond || max < base || max > 24*time.Hour {
			return invalid("backoff %s..%s (1ms ≤ base ≤ max ≤ 24h)", base, max)
		}
		o.backoffBase, o.backoffMax = base, max
		return nil
	}
}

// WithTimeout bounds one delivery (connect, TLS, request and response
// headers), 10 ms..5 min (default 10 s).
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 10*time.Millisecond || d > 5*time.Minute {
			return invalid("timeout %s (10ms..5m)", d)
		}
		o.timeout = d
		return nil
	}
}

// WithMaxBody bounds a delivery's body, 1 KiB..64 MiB (default 1 MiB); a
// larger update is dead-lettered at once, without its body
// (ReasonTooLarge): it can never be posted as it is.
func WithMaxBody(n int) Option {
	return func(o *options) error {
		if n < 1<<10 || n > 64<<20 {
			return invalid("max body %d (1KiB..64MiB)", n)
		}
		o.maxBody = n
		return nil
	}
}

// WithMaxAckPending bounds the response messages in flight across the
// stage's replicas (the consumer's MaxAckPending, 1..1000000, default
// 10000). Every replica must use the same value.
func WithMaxAckPending(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 1_000_000 {
			return invalid("max ack pending %d (1..1000000)", n)
		}
		o.maxAckPending = n
		return nil
	}
}

// WithAckWait sets the consumer's ack wait, 1 s..10 min (default 1 min):
// how soon a dead replica's messages go to another one (a live replica
// extends it while it delivers).
func WithAckWait(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Second || d > 10*time.Minute {
			return invalid("ack wait %s (1s..10m)", d)
		}
		o.ackWait = d
		return nil
	}
}

// WithOrderWait sets how soon a message whose predecessor (for a config)
// is still being delivered elsewhere is looked at again, 1 ms..1 min
// (default 1 s).
func WithOrderWait(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Millisecond || d > time.Minute {
			return invalid("order wait %s (1ms..1m)", d)
		}
		o.orderWait = d
		return nil
	}
}

// WithDeadShare sets the part of E2A_PUSH_DEAD's MaxBytes that one
// principal's dead letters may hold, 0.01..1 (default 0.125, 1/8): once
// the stream is over half full, a principal's dead letter that would take
// it over its share removes its own oldest ones first, so that one
// principal's failing webhooks do not make the stream drop the others'
// (deadshare.go). 1 lets a principal use the whole stream (one tenant).
func WithDeadShare(f float64) Option {
	return func(o *options) error {
		if !(f >= 0.01 && f <= 1) {
			return invalid("dead-letter share %v (0.01..1)", f)
		}
		o.deadShare = f
		return nil
	}
}

var validConsumer = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// WithConsumerName sets the durable consumer's name (default "push"):
// replicas sharing it share the work.
func WithConsumerName(name string) Option {
	return func(o *options) error {
		if !validConsumer.MatchString(name) {
			return invalid("consumer name %q", name)
		}
		o.consumer = name
		return nil
	}
}

// WithLogger sets the logger (default: none). Logs name configs by task,
// id and redacted URL; never a token, credentials or body.
func WithLogger(l *slog.Logger) Option {
	return option.NotNil(ErrInvalidOption, "logger", l, func(o *options) { o.log = l })
}

// WithRegisterer registers the stage's metrics (e2a_push_*) with r.
func WithRegisterer(r prometheus.Registerer) Option {
	return option.NotNil(ErrInvalidOption, "registerer", r, func(o *options) { o.registerer = r })
}

// untok decodes a token of tok.
func untok(s string) (string, error) {
	if !strings.HasPrefix(s, "t") {
		return "", fmt.Errorf("not a token")
	}
	b, err := base64.RawURLEncoding.DecodeString(s[1:])
	return string(b), err
}
