package streams

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/option"
)

// InMemory is an embedded JetStream server holding the pipeline's streams
// and buckets in memory, with a connection to it: what a test or an
// example of an agent, a stage or a front door runs on (StartInMemory).
type InMemory struct {
	// Server is the embedded server, on a free loopback port and a
	// temporary store directory.
	Server *Embedded
	// Conn is an in-process connection to Server.
	Conn *nats.Conn
	// JetStream is Conn's JetStream context.
	JetStream jetstream.JetStream
	// Config is the Config applied, for what provisions more of the
	// layout from it (bridge.OpenConversations, console's index, …).
	Config Config
}

type inMemoryOptions struct {
	adjust []func(*Config)
}

// InMemoryOption configures StartInMemory. Options validate their argument
// and make StartInMemory return ErrInvalidOptions.
type InMemoryOption func(*inMemoryOptions) error

// WithConfigChange makes StartInMemory apply the Config that f leaves:
// f is given the in-memory Config (see StartInMemory) and may change any
// field. Changes apply in the order of the options. A nil f is refused.
func WithConfigChange(f func(*Config)) InMemoryOption {
	return option.Check(ErrInvalidOptions, f != nil,
		func(o *inMemoryOptions) { o.adjust = append(o.adjust, f) },
		"nil config change")
}

// inMemoryMaxBytes bounds each stream of StartInMemory.
const inMemoryMaxBytes = 64 * MiB

// StartInMemory starts an embedded JetStream server (StartEmbedded with
// default options: a free loopback port, a temporary store directory),
// connects to it in process and applies DefaultConfig's streams and
// buckets to it in memory storage, each stream bounded to 64 MiB, then the
// changes of the options (WithConfigChange). ctx bounds Apply. Close stops
// it all.
//
// Nothing is allocated up front, but JetStream reserves each memory
// stream's MaxBytes against its memory limit (75 % of the machine's
// memory by default): 320 MiB with these sizes, so that any machine
// starts it; a test that fills a stream can raise its bound with
// WithConfigChange.
//
// It returns ErrInvalidOptions for an invalid option and ErrInvalidConfig
// for a Config an option made invalid, before starting anything. When the
// server does not start (ErrServerNotReady, see StartEmbedded), the
// connection fails or Apply does (the server refusing a stream, such as
// one whose MaxBytes exceeds its memory limit), it shuts down what it
// started and returns the error wrapped with the step that failed.
func StartInMemory(ctx context.Context, opts ...InMemoryOption) (*InMemory, error) {
	var o inMemoryOptions
	if err := option.Apply(ErrInvalidOptions, &o, opts); err != nil {
		return nil, err
	}
	cfg := DefaultConfig()
	cfg.Storage = jetstream.MemoryStorage
	cfg.RequestsMaxBytes, cfg.ResponsesMaxBytes, cfg.ControlMaxBytes = inMemoryMaxBytes, inMemoryMaxBytes, inMemoryMaxBytes
	cfg.AuditMaxBytes, cfg.ArchiveMaxBytes = inMemoryMaxBytes, inMemoryMaxBytes
	cfg.IndexMaxBytes, cfg.KeyValueMaxBytes = inMemoryMaxBytes, inMemoryMaxBytes
	for _, f := range o.adjust {
		f(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	srv, err := StartEmbedded(EmbeddedOptions{})
	if err != nil {
		return nil, fmt.Errorf("in-memory streams: start the server: %w", err)
	}
	m := &InMemory{Server: srv, Config: cfg}
	if m.Conn, err = srv.Connect(); err != nil {
		m.Close()
		return nil, fmt.Errorf("in-memory streams: connect: %w", err)
	}
	if m.JetStream, err = jetstream.New(m.Conn); err != nil {
		m.Close()
		return nil, fmt.Errorf("in-memory streams: %w", err)
	}
	if _, err := Apply(ctx, m.JetStream, cfg); err != nil {
		m.Close()
		return nil, fmt.Errorf("in-memory streams: apply: %w", err)
	}
	return m, nil
}

// Close closes the connection and shuts the server down (its temporary
// store directory removed). It may be called more than once.
func (m *InMemory) Close() {
	if m.Conn != nil {
		m.Conn.Close()
	}
	m.Server.Shutdown()
}
