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

	// DefaultMaxHistoryTurns is the default bound on the earlier turns a
	// POST carries ([WithHistory]).
	DefaultMaxHistoryTurns = 16
	// maxHistoryBytes bounds the JSON of the history member: the newest
	// messages that fit are sent.
	maxHistoryBytes = 64 << 10

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
	pool          string
	convs         *bridge.Conversations
	maxTurns      int
}

// WithHistory gives every POST the earlier turns of the request's
// conversation (its A2A context, which holds its task's earlier turns,
// else its ACP session or E2A session_id, else its task; of the same
// principal only: bridge.Conversations), in the [HistoryMember] member:
// each turn's user message and the agent's answer as the pipeline stored
// it, so a stateless agent gets the answer to its input-required question
// with what it asked. Each request is recorded in the pool's conversation
// records c before it is POSTed. Without it the POST is the envelope
// alone.
func WithHistory(pool string, c *bridge.Conversations) Option {
	return bridge.HistoryOption(pool, c, func(cfg *config) { cfg.pool, cfg.convs = pool, c })
}

// WithMaxHistoryTurns bounds the earlier turns of [WithHistory]: the last
// n (0..bridge.MaxTurns, default DefaultMaxHistoryTurns; 0 sends none).
// Their messages are bounded to 64 KiB of JSON too, the newest kept.
func WithMaxHistoryTurns(n int) Option {
	return bridge.MaxHistoryTurnsOption(n, func(cfg *config) { cfg.maxTurns = n })
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
