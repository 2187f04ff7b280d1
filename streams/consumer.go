package streams

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Agent consumer defaults.
const (
	// DefaultAckWait is how long a worker may hold a request without
	// acknowledging it or signalling progress.
	DefaultAckWait = 60 * time.Second
	// DefaultInProgressInterval is how often a worker should call InProgress
	// on a request it holds: a third of DefaultAckWait.
	DefaultInProgressInterval = DefaultAckWait / 3
	// DefaultMaxDeliver is how many times a request is delivered before the
	// server gives up on it and publishes a max deliveries advisory.
	DefaultMaxDeliver = 5
	// maxBackOffFactor caps the default back-off at this multiple of AckWait.
	maxBackOffFactor = 5
)

// PullHeartbeat is the idle heartbeat the long-running pulls of the stages
// ask for (jetstream.PullHeartbeat: the console's indexer, push's feeds,
// the archiver). A pull that reaches no consumer (answered "no responders"
// while a consumer's leader is not yet known in a cluster, or while the
// consumer is deleted and made again) or that is lost with its server is
// counted as waiting by the client until two heartbeats are missed, then
// made again: with the client's default (half the pull's 30-s expiry) a
// stage took nothing for 30 s (egress/console's
// TestIndexGoesOnAfterPullLost). One heartbeat a second per idle pull is
// what it costs.
const PullHeartbeat = time.Second

type consumerOptions struct {
	ackWait     time.Duration
	maxDeliver  int
	backOff     []time.Duration
	description string
}

// ConsumerOption configures AgentConsumerConfig. Options validate their
// argument and make AgentConsumerConfig return ErrInvalidOptions.
type ConsumerOption func(*consumerOptions) error

// WithAckWait sets the ack wait of the first delivery (default
// DefaultAckWait). It must be at least one second.
func WithAckWait(d time.Duration) ConsumerOption {
	return option.Check(ErrInvalidOptions, d >= time.Second,
		func(o *consumerOptions) { o.ackWait = d },
		"ack wait %v below 1s", d)
}

// WithMaxDeliver sets how many times a request is delivered, 1..100
// (default DefaultMaxDeliver).
func WithMaxDeliver(n int) ConsumerOption {
	return option.Check(ErrInvalidOptions, n >= 1 && n <= 100,
		func(o *consumerOptions) { o.maxDeliver = n },
		"max deliver %d not in 1..100", n)
}

// WithBackOff sets the ack wait of each delivery: d[i] for delivery i+1,
// the last one for any further delivery. The server uses d[0] as the ack
// wait, so it overrides WithAckWait. Each must be at least one second and
// there must be at most MaxDeliver of them. By default the ack wait doubles
// from AckWait up to 5 × AckWait, one entry per delivery.
func WithBackOff(d ...time.Duration) ConsumerOption {
	return func(o *consumerOptions) error {
		if len(d) == 0 {
			return fmt.Errorf("%w: empty back-off", ErrInvalidOptions)
		}
		for _, x := range d {
			if x < time.Second {
				return fmt.Errorf("%w: back-off %v below 1s", ErrInvalidOptions, x)
			}
		}
		o.backOff = append([]time.Duration(nil), d...)
		return nil
	}
}

// WithConsumerDescription sets the description of the consumer.
func WithConsumerDescription(s string) ConsumerOption {
	return func(o *consumerOptions) error {
		o.description = s
		return nil
	}
}

// AgentConsumerName returns agent-<pool>, the durable name of the consumer
// of agent pool pool.
//
// It returns subjects.ErrInvalidPool when pool is not a valid pool name.
func AgentConsumerName(pool string) (string, error) {
	if err := subjects.ValidatePool(pool); err != nil {
		return "", err
	}
	return "agent-" + pool, nil
}

// AgentConsumerConfig returns the durable pull consumer of agent pool pool
// on E2A_REQUESTS: durable agent-<pool>, filter e2a.req.<pool>.>, deliver
// all, explicit ack, MaxAckPending = concurrency (the pool's total number of
// requests in flight), MaxDeliver and BackOff from the options.
//
// It returns subjects.ErrInvalidPool when pool is not a valid pool name and
// ErrInvalidOptions when concurrency is below 1 or an option is invalid.
func AgentConsumerConfig(pool string, concurrency int, opts ...ConsumerOption) (jetstream.ConsumerConfig, error) {
	name, err := AgentConsumerName(pool)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	filter, err := subjects.RequestFilter(pool)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	if concurrency < 1 {
		return jetstream.ConsumerConfig{}, fmt.Errorf("%w: concurrency %d below 1", ErrInvalidOptions, concurrency)
	}
	o := consumerOptions{ackWait: DefaultAckWait, maxDeliver: DefaultMaxDeliver}
	if err := option.Apply(ErrInvalidOptions, &o, opts); err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	backOff := o.backOff
	if backOff == nil {
		d := o.ackWait
		for range o.maxDeliver {
			backOff = append(backOff, d)
			d = min(2*d, maxBackOffFactor*o.ackWait)
		}
	}
	if len(backOff) > o.maxDeliver {
		return jetstream.ConsumerConfig{}, fmt.Errorf("%w: %d back-off durations for max deliver %d", ErrInvalidOptions, len(backOff), o.maxDeliver)
	}
	desc := o.description
	if desc == "" {
		desc = "E2A agent pool " + pool
	}
	return jetstream.ConsumerConfig{
		Durable:       name,
		Description:   desc,
		FilterSubject: filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       backOff[0],
		MaxDeliver:    o.maxDeliver,
		BackOff:       backOff,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
		MaxAckPending: concurrency,
	}, nil
}

// IndexConsumerConfig returns the definition of a durable consumer that
// builds an index from a stream (the console's request index): pull,
// explicit acks (the consumer is shared by processes: an ack-all of one
// would acknowledge what another fetched), starting ttl before now the
// first time it is created, at most maxAckPending messages
// unacknowledged, and removed by the server after ttl without any reader.
func IndexConsumerConfig(name, filter, desc string, ttl time.Duration, now time.Time, maxAckPending int) jetstream.ConsumerConfig {
	start := now.Add(-ttl)
	return jetstream.ConsumerConfig{
		Durable:           name,
		Description:       desc,
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverByStartTimePolicy,
		OptStartTime:      &start,
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           30 * time.Second,
		MaxDeliver:        -1,
		MaxAckPending:     maxAckPending,
		ReplayPolicy:      jetstream.ReplayInstantPolicy,
		InactiveThreshold: ttl,
	}
}
