package archive

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/option"
)

// Defaults of the options.
const (
	// DefaultBatchBytes closes a batch once its records take this much
	// before compression: large enough to compress well (the zstd window
	// spans the batch), small enough to be read back in a millisecond or two.
	DefaultBatchBytes = 1 << 20
	// DefaultFlushInterval closes a batch this long after its first record
	// was read, however small: at low rates a batch holds what arrived in
	// that time.
	DefaultFlushInterval = 10 * time.Second
)

// The bounds of WithBatchBytes and WithFlushInterval, for a configuration
// that checks its values when it is read (e2a's E2A_ARCHIVE_* variables).
const (
	BatchBytesMin    = 4 << 10
	BatchBytesMax    = 8 << 20
	FlushIntervalMin = 10 * time.Millisecond
	FlushIntervalMax = time.Hour
)

// Option configures Run and NewReader; each reads the options that concern
// it. Every option validates its value and returns an error wrapping
// ErrInvalidOption.
type Option func(*options) error

type options struct {
	batchBytes    int
	flushInterval time.Duration
	log           *slog.Logger
	registerer    prometheus.Registerer
	cacheBatches  int
	health        *Health
	stallAfter    time.Duration
}

// buildOptions applies opts over the defaults, for a Run or a Reader on
// nc; a nil connection or a bad option is an error wrapping
// ErrInvalidOption.
func buildOptions(nc *nats.Conn, opts []Option) (options, error) {
	if nc == nil {
		return options{}, fmt.Errorf("%w: nil connection", ErrInvalidOption)
	}
	o := options{
		batchBytes:    DefaultBatchBytes,
		flushInterval: DefaultFlushInterval,
		log:           slog.New(slog.DiscardHandler),
		cacheBatches:  8,
		stallAfter:    DefaultStallAfter,
	}
	if err := option.Apply(ErrInvalidOption, &o, opts); err != nil {
		return o, err
	}
	return o, nil
}

// WithBatchBytes sets the size before compression at which the archiver
// closes a batch: 4 KiB to 8 MiB (default DefaultBatchBytes). A batch is
// also split when its compressed form would not fit the connection's
// max_payload. The compression window is DefaultBatchBytes: a larger
// batch finds no match further back than that.
func WithBatchBytes(n int) Option {
	return option.Check(ErrInvalidOption, n >= BatchBytesMin && n <= BatchBytesMax,
		func(o *options) { o.batchBytes = n },
		"batch bytes %d not in 4 KiB..8 MiB", n)
}

// WithFlushInterval sets how long after its first record a batch is closed
// however small: 10 ms to 1 h (default DefaultFlushInterval).
func WithFlushInterval(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d >= FlushIntervalMin && d <= FlushIntervalMax,
		func(o *options) { o.flushInterval = d },
		"flush interval %v not in 10ms..1h", d)
}

// WithCacheBatches sets how many decompressed batches a Reader keeps:
// 1 to 1024 (default 8).
func WithCacheBatches(n int) Option {
	return option.Check(ErrInvalidOption, n >= 1 && n <= 1024,
		func(o *options) { o.cacheBatches = n },
		"cache batches %d not in 1..1024", n)
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return option.NotNil(ErrInvalidOption, "logger", l, func(o *options) { o.log = l })
}

// WithRegisterer registers the archiver's metrics (e2a_archive_*) on r.
func WithRegisterer(r prometheus.Registerer) Option {
	return option.NotNil(ErrInvalidOption, "registerer", r, func(o *options) { o.registerer = r })
}

// WithHealth has Run report on h whether it is stalled (Health.Check).
func WithHealth(h *Health) Option {
	return option.NotNil(ErrInvalidOption, "health", h, func(o *options) { o.health = h })
}

// WithStallAfter sets how long the archiver fails without progress before
// it reports itself stalled: 10 ms to 1 h (default DefaultStallAfter).
func WithStallAfter(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d >= FlushIntervalMin && d <= FlushIntervalMax,
		func(o *options) { o.stallAfter = d },
		"stall after %v not in 10ms..1h", d)
}
