package agent

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/option"
)

// Defaults of the options.
const (
	DefaultConcurrency    = 32
	DefaultMaxAckPending  = 1000
	DefaultAckWait        = 4 * time.Second
	DefaultHeartbeat      = DefaultAckWait / 4
	DefaultMaxDeliver     = 5
	DefaultDrainTimeout   = 25 * time.Second
	DefaultCoalesceBytes  = 16 << 10
	DefaultCoalesceDelay  = 0
	DefaultPublishTimeout = 30 * time.Second
)

// Option configures Run. Options validate their arguments: Run returns an
// error wrapping ErrInvalidOption for a bad one.
type Option func(*config) error

type config struct {
	concurrency    int
	maxAckPending  int
	ackWait        time.Duration
	heartbeat      time.Duration
	maxDeliver     int
	backOff        []time.Duration
	drainTimeout   time.Duration
	coalesceBytes  int
	coalesceDelay  time.Duration
	defaultDL      time.Duration
	logger         *slog.Logger
	registerer     prometheus.Registerer
	resumable      bool
	publishTimeout time.Duration
	fetchWait      time.Duration
	workerID       string
	provision      bool
	noHeartbeat    bool
	cancelSeen     func(id string)      // tests: see withCancelSeen
	missControl    func(id string) bool // tests: see withMissedControl
	staleMargin    time.Duration        // tests: see withStaleCancelMargin
	// beforeBurst (tests) is called before each message of frames is
	// published: n frames of request id from sequence first.
	beforeBurst func(id string, first int64, n int)
	// enqueueWait (tests) is called, under the writer's lock, when a write
	// of request id starts waiting to queue its frame behind the message
	// in flight.
	enqueueWait func(id string)
	// turnHeld (tests) is called when a turn ended before it ran
	// (cancelled, past its deadline) starts waiting for the turn before
	// it to end (holdUnrun).
	turnHeld func(id string)
	// stopGrace: how long a cancelled or timed-out request waits for its
	// handler to return before its final frame (StopGrace).
	stopGrace time.Duration
}

func defaultConfig() config {
	return config{
		concurrency:    DefaultConcurrency,
		maxAckPending:  DefaultMaxAckPending,
		ackWait:        DefaultAckWait,
		maxDeliver:     DefaultMaxDeliver,
		drainTimeout:   DefaultDrainTimeout,
		coalesceBytes:  DefaultCoalesceBytes,
		coalesceDelay:  DefaultCoalesceDelay,
		publishTimeout: DefaultPublishTimeout,
		fetchWait:      time.Second,
		provision:      true,
		staleMargin:    staleCancelMargin,
		stopGrace:      StopGrace,
	}
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, a...))
}

// WithConcurrency bounds the requests this process handles at once (n ≥ 1).
// The worker pulls a message only when it has a free slot, so nothing waits
// in a local buffer while its AckWait runs.
func WithConcurrency(n int) Option {
	return option.Check(ErrInvalidOption, n >= 1 && n <= 1<<16,
		func(c *config) { c.concurrency = n },
		"concurrency %d not in [1, 65536]", n)
}

// WithMaxAckPending bounds the requests in flight across every worker of the
// pool (the consumer's MaxAckPending, n ≥ 1). All workers of a pool must use
// the same consumer options, since each one provisions the consumer. A later
// turn of a task waiting for the turn before it (or held, ended before it
// ran, until that turn ends) counts: keep n above the turns that may wait at
// once. A held turn whose earlier turn is undelivered behind a full
// MaxAckPending ends at once rather than hold the pool.
func WithMaxAckPending(n int) Option {
	return option.Check(ErrInvalidOption, n >= 1, func(c *config) { c.maxAckPending = n }, "max ack pending %d < 1", n)
}

// WithAckWait sets the consumer's AckWait: how long a delivery may go without
// an ack or a heartbeat before the server redelivers it (≥ 1 s): how soon
// a dead worker's request is picked up again (default 4 s, with a heartbeat
// every second). It is also how long a live worker may be cut off from the
// consumer's leader (a NATS node's failover, a stalled process) before its
// requests are taken over: fenced, so still exactly once, but a handler that
// is not resumable then ends with agent_interrupted. Raise it for such
// handlers on a cluster whose failovers take longer.
func WithAckWait(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d >= time.Second, func(c *config) { c.ackWait = d }, "ack wait %v < 1s", d)
}

// WithHeartbeat sets how often an in-flight request is reported in progress
// (InProgress), which restarts its AckWait. The default is a quarter of the
// shortest of AckWait and the BackOff steps (1 s with the default AckWait):
// a delivery is redelivered only after 3 heartbeats in a row were lost. It
// must be shorter than that shortest wait. Each heartbeat is one message per
// request held (on a replicated consumer, one proposal to its group).
func WithHeartbeat(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d >= 10*time.Millisecond,
		func(c *config) { c.heartbeat = d },
		"heartbeat %v < 10ms", d)
}

// WithMaxDeliver sets how many times a request is delivered to the
// handler before it is given up: the runtime then writes a final e2a.error
// max_deliveries (n from 1 to 99: the consumer delivers it once more, to
// give it up, and streams.WithMaxDeliver bounds the consumer at 100; a
// larger n was refused only by Run, wrapping streams.ErrInvalidOptions,
// and math.MaxInt made Run panic).
func WithMaxDeliver(n int) Option {
	return option.Check(ErrInvalidOption, n >= 1 && n <= 99, func(c *config) { c.maxDeliver = n }, "max deliver %d not in 1..99", n)
}

// WithBackOff sets the consumer's redelivery back-off: the wait before
// delivery k+1 is steps[min(k-1, len-1)], replacing AckWait. MaxDeliver must
// be larger than the number of steps.
func WithBackOff(steps ...time.Duration) Option {
	return func(c *config) error {
		for _, d := range steps {
			if d < time.Second {
				return invalid("back-off step %v < 1s", d)
			}
		}
		c.backOff = append([]time.Duration(nil), steps...)
		return nil
	}
}

// WithDrainTimeout sets how long Run waits, once its context is done, for
// in-flight requests to finish before it hands them back (Nak) to the pool.
func WithDrainTimeout(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d >= 0, func(c *config) { c.drainTimeout = d }, "drain timeout %v < 0", d)
}

// WithCoalesce bounds the coalescing of text and reasoning deltas: deltas
// of one kind written while a frame is in flight are joined into one frame of
// at most maxBytes bytes (a single larger delta goes alone), and a delta waits
// at most maxDelay (plus the frame in flight) for company. maxBytes 0 turns
// coalescing off: every Chunk is one frame, written before Chunk returns.
func WithCoalesce(maxBytes int, maxDelay time.Duration) Option {
	return func(c *config) error {
		if maxBytes < 0 {
			return invalid("coalesce max bytes %d < 0", maxBytes)
		}
		if maxDelay < 0 || maxDelay > time.Second {
			return invalid("coalesce max delay %v not in [0, 1s]", maxDelay)
		}
		c.coalesceBytes, c.coalesceDelay = maxBytes, maxDelay
		return nil
	}
}

// WithDefaultDeadline sets a deadline for requests, counted from the time
// the request was stored. An envelope deadline that is earlier wins. A request
// past its deadline gets a final e2a.error deadline_exceeded (a later turn of
// a task that passed it waiting for the turn before it gets it once that
// turn has ended: a task's turns end in the order they run). 0 means none.
func WithDefaultDeadline(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d >= 0, func(c *config) { c.defaultDL = d }, "default deadline %v < 0", d)
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return option.NotNil(ErrInvalidOption, "logger", l, func(c *config) { c.logger = l })
}

// WithMetrics registers the worker's metrics on r. Several workers may share
// one registerer; they then share the collectors.
func WithMetrics(r prometheus.Registerer) Option {
	return option.NotNil(ErrInvalidOption, "registerer", r, func(c *config) { c.registerer = r })
}

// WithResumable declares whether the handler can resume a request that
// already has frames (after a crash). A handler implementing [Resumer]
// decides for itself. Non-resumable requests found partial get a final
// e2a.error agent_interrupted, retryable.
func WithResumable(ok bool) Option {
	return func(c *config) error {
		c.resumable = ok
		return nil
	}
}

// WithPublishTimeout bounds how long one frame is retried (timeouts, no
// responders, leader changes) before the request is given up by this worker.
func WithPublishTimeout(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d >= 100*time.Millisecond,
		func(c *config) { c.publishTimeout = d },
		"publish timeout %v < 100ms", d)
}

// WithWorkerID names this worker in logs and frame provenance (default: a
// fresh UUID).
func WithWorkerID(id string) Option {
	return option.Check(ErrInvalidOption, id != "", func(c *config) { c.workerID = id }, "empty worker id")
}

// WithProvisionConsumer tells whether Run creates or updates the pool's
// consumer from its options (default true). With false the consumer must
// exist (e.g. made by `e2a streams apply`).
func WithProvisionConsumer(ok bool) Option {
	return func(c *config) error {
		c.provision = ok
		return nil
	}
}

// withFetchWait sets the expiry of each pull request (tests).
func withFetchWait(d time.Duration) Option {
	return func(c *config) error {
		c.fetchWait = d
		return nil
	}
}

// withCancelSeen calls f with the id of each cancel the worker's control
// subscription has recorded, once it stopped the requests it names (tests:
// a pick-up after it is covered).
func withCancelSeen(f func(id string)) Option {
	return func(c *config) error {
		c.cancelSeen = f
		return nil
	}
}

// withMissedControl makes the control subscription ignore the cancels of
// the ids f returns true for (tests: a cancel a cluster's route did not
// forward).
func withMissedControl(f func(id string) bool) Option {
	return func(c *config) error {
		c.missControl = f
		return nil
	}
}

// withStaleCancelMargin sets how much older than a request a cancel of its
// id must be to be ignored as an earlier request's (tests: a cancel a
// moment older than the request is stale, instead of staleCancelMargin).
func withStaleCancelMargin(d time.Duration) Option {
	return func(c *config) error {
		c.staleMargin = d
		return nil
	}
}

// withoutHeartbeats stops InProgress (tests: a stalled worker).
func withoutHeartbeats() Option {
	return func(c *config) error {
		c.noHeartbeat = true
		return nil
	}
}

// withBeforeBurst calls f before each message of frames a writer publishes
// (tests: hold a burst back while the handler queues more).
func withBeforeBurst(f func(id string, first int64, n int)) Option {
	return func(c *config) error {
		c.beforeBurst = f
		return nil
	}
}

// withEnqueueWait calls f when a write starts waiting to queue its frame
// behind the message in flight (tests: release that message only then).
func withEnqueueWait(f func(id string)) Option {
	return func(c *config) error {
		c.enqueueWait = f
		return nil
	}
}

// withTurnHeld calls f with the id of each turn ended before it ran
// (cancelled, past its deadline) that waits for the turn before it to end
// before it ends (tests: its end is not stored before then).
func withTurnHeld(f func(id string)) Option {
	return func(c *config) error {
		c.turnHeld = f
		return nil
	}
}

// withStopGrace sets how long a cancelled or timed-out request waits for
// its handler to return before its final frame (tests; StopGrace).
func withStopGrace(d time.Duration) Option {
	return func(c *config) error {
		c.stopGrace = d
		return nil
	}
}

// minWait is the shortest time a delivery may go without a heartbeat.
func (c *config) minWait() time.Duration {
	w := c.ackWait
	for _, d := range c.backOff {
		if d < w {
			w = d
		}
	}
	return w
}

// configOf is the configuration opts make of the defaults, finished.
func configOf(opts []Option) (config, error) {
	c := defaultConfig()
	if err := option.Apply(ErrInvalidOption, &c, opts); err != nil {
		return c, err
	}
	return c, c.finish()
}

// CheckOptions returns the error Run would return for opts (matching
// ErrInvalidOption), for a command that checks its arguments before it
// calls an upstream or publishes anything.
func CheckOptions(opts ...Option) error {
	_, err := configOf(opts)
	return err
}

func (c *config) finish() error {
	if len(c.backOff) > 0 && c.maxDeliver <= len(c.backOff) {
		return invalid("max deliver %d must exceed the %d back-off steps", c.maxDeliver, len(c.backOff))
	}
	if c.heartbeat == 0 {
		c.heartbeat = c.minWait() / 4
	} else if c.heartbeat >= c.minWait() {
		return invalid("heartbeat %v must be shorter than the ack wait %v", c.heartbeat, c.minWait())
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return nil
}
