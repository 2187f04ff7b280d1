package httpagent

import (
	"log/slog"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/option"
)

// Bounds of the options.
const (
	// DefaultMaxFrameBytes is the default bound on a line, an event's data
	// or a JSON answer: the NATS server's default max_payload.
	DefaultMaxFrameBytes = 1 << 20
	// DefaultMaxFrames is the default bound on the frames of one answer.
	DefaultMaxFrames = 100_000

	minFrameBytes = 1 << 10
	maxFrameBytes = 64 << 20
	maxFrames     = 10_000_000
)

// Option configures New.
type Option func(*config) error

type config struct {
	maxFrameBytes int
	maxFrames     int
	log           *slog.Logger
}

// WithMaxFrameBytes bounds a line of NDJSON, the data of an SSE event and a
// JSON answer (1 KiB..64 MiB, default DefaultMaxFrameBytes). A frame that
// fits here but not in the NATS server's max_payload with its headers ends
// the request with the runtime's frame_too_large.
func WithMaxFrameBytes(n int) Option {
	return option.Check(bridge.ErrInvalidOption, n >= minFrameBytes && n <= maxFrameBytes,
		func(c *config) { c.maxFrameBytes = n },
		"max frame bytes %d (want %d..%d)", n, minFrameBytes, maxFrameBytes)
}

// WithMaxFrames bounds the frames of one answer (1..10,000,000, default
// DefaultMaxFrames).
func WithMaxFrames(n int) Option {
	return option.Check(bridge.ErrInvalidOption, n >= 1 && n <= maxFrames,
		func(c *config) { c.maxFrames = n },
		"max frames %d (want 1..%d)", n, maxFrames)
}

// WithLogger sets the logger (default slog.Default()). It logs no frame
// content and no credential.
func WithLogger(l *slog.Logger) Option {
	return option.NotNil(bridge.ErrInvalidOption, "logger", l, func(c *config) { c.log = l })
}
