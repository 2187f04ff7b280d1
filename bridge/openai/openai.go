package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/option"
)

// Defaults and bounds of the options.
const (
	// DefaultMaxEventBytes bounds one line, and one event, of the
	// upstream's stream.
	DefaultMaxEventBytes = 1 << 20
	// MaxSystemBytes bounds the system prompt.
	MaxSystemBytes = 256 << 10
	// updateTimeout bounds recording a turn in the conversation.
	updateTimeout = 5 * time.Second
	// finishGrace bounds the wait, after the finish reason, for the usage
	// chunk and [DONE] (or the end of the body): the answer is complete
	// then. It is at most half the client's idle timeout.
	finishGrace = 2 * time.Second
)

// Option configures New.
type Option func(*Upstream) error

// WithSystem sets the system prompt sent first in every conversation
// (valid UTF-8, 1 byte .. MaxSystemBytes). It takes precedence over the
// request's own (params.system), which is used only when no system prompt
// is configured.
func WithSystem(prompt string) Option {
	return option.Check(bridge.ErrInvalidOption, prompt != "" && len(prompt) <= MaxSystemBytes && utf8.ValidString(prompt),
		func(u *Upstream) { u.system = prompt },
		"system prompt must be valid UTF-8 of 1..%d bytes", MaxSystemBytes)
}

// WithThinkOpen says the model's chat template opens its <think> block in
// the prompt (DeepSeek-R1's distilled models, Qwen3's Thinking-2507
// models): a server that does not separate reasoning streams the block's
// text, then </think>, then the answer, with no opening tag. The content
// is then reasoning until </think> (a content that never closes the block
// is reasoning whole); without it, the reasoning reached clients as the
// answer's text, closing tag and all. A content that opens <think> itself
// is read so without the option, and with it that <think> is the opened
// block's tag (llama.cpp's deepseek-legacy writes it back), not reasoning
// text; a server that sends the reasoning apart
// (reasoning_content, reasoning, thinking parts) before any content has
// its content read as the answer, the option notwithstanding.
func WithThinkOpen() Option {
	return func(u *Upstream) error { u.thinkOpen = true; return nil }
}

// WithHistory makes the upstream multi-turn: the earlier turns of a
// request's conversation (its A2A context, ACP session or E2A session_id,
// of the same principal only) are read from the pipeline's durable history
// of pool through c and sent before the request's own message, and each
// turn is recorded in c before its final frame. Without it every request
// is a conversation of one turn.
func WithHistory(pool string, c *bridge.Conversations) Option {
	return bridge.HistoryOption(pool, c, func(u *Upstream) { u.pool, u.convs = pool, c })
}

// WithMaxHistoryTurns bounds the earlier turns sent upstream: the last n
// (0..bridge.MaxTurns, default bridge.MaxTurns; 0 sends none).
func WithMaxHistoryTurns(n int) Option {
	return bridge.MaxHistoryTurnsOption(n, func(u *Upstream) { u.maxTurns = n })
}

// WithMaxHistoryBytes bounds the stored bytes of the earlier turns read
// for the history (0..bridge.MaxHistoryBytesLimit, default
// bridge.DefaultMaxHistoryBytes, 4 MiB): the newest turns whose stored
// envelopes and final frames fit in n bytes; the turn that would pass it
// and every older one are neither read further nor sent, and nor is a
// tool exchange the cut would split (see the package doc). It bounds the
// memory one request's history takes, and what it sends upstream.
func WithMaxHistoryBytes(n int) Option {
	return bridge.MaxHistoryBytesOption(n, func(u *Upstream) { u.maxBytes = n })
}

// WithMaxEventBytes bounds one line, and the data of one event, of the
// upstream's stream (1 KiB .. 64 MiB, default DefaultMaxEventBytes); a
// longer one fails the call with upstream_protocol_error.
func WithMaxEventBytes(n int) Option {
	return option.Check(bridge.ErrInvalidOption, n >= 1<<10 && n <= 64<<20,
		func(u *Upstream) { u.maxEvent = n },
		"max event bytes %d (want 1 KiB..64 MiB)", n)
}

// WithLogger sets the logger (default slog.Default()); it logs only what
// fails around the call (recording a turn), never a credential.
func WithLogger(l *slog.Logger) Option {
	return option.NotNil(bridge.ErrInvalidOption, "logger", l, func(u *Upstream) { u.log = l })
}

// Upstream is an OpenAI-compatible chat completions endpoint, called with
// stream: true. It is safe for concurrent use.
type Upstream struct {
	client   *bridge.Client
	endpoint string
	model    string
	system   string
	pool     string
	convs    *bridge.Conversations
	maxTurns int
	maxBytes int // WithMaxHistoryBytes
	maxEvent int
	log      *slog.Logger
	params   map[string]json.RawMessage // WithParams
	// thinkOpen: the content starts inside a <think> block (WithThinkOpen).
	thinkOpen bool
	// noStreamUsage: the upstream refused stream_options (usageRefused)
	// and answered the call made without it; calls go without it from
	// then on.
	noStreamUsage atomic.Bool
}

var (
	_ bridge.Upstream = (*Upstream)(nil)
	_ bridge.Scrubber = (*Upstream)(nil)
)

// New returns the upstream serving model at client's base URL (e.g.
// http://localhost:8000/v1: requests go to {base}/chat/completions).
// Errors wrap bridge.ErrInvalidOption.
func New(client *bridge.Client, model string, opts ...Option) (*Upstream, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", bridge.ErrInvalidOption)
	}
	if strings.TrimSpace(model) == "" || len(model) > 256 || !utf8.ValidString(model) {
		return nil, fmt.Errorf("%w: model %q (want a name of 1..256 bytes)", bridge.ErrInvalidOption, model)
	}
	base := client.Base()
	base.Path = strings.TrimSuffix(base.Path, "/") + "/chat/completions"
	base.RawPath = ""
	u := &Upstream{client: client, endpoint: base.String(), model: model, maxTurns: bridge.MaxTurns,
		maxBytes: bridge.DefaultMaxHistoryBytes, maxEvent: DefaultMaxEventBytes, log: slog.Default()}
	if err := option.Apply(bridge.ErrInvalidOption, u, opts); err != nil {
		return nil, err
	}
	return u, nil
}

// Name is "openai" and the upstream's scheme and host.
func (u *Upstream) Name() string { return "openai " + u.client.Name() }

// Scrub takes the client's credentials out of s (bridge.Scrubber).
func (u *Upstream) Scrub(s string) string { return u.client.Scrub(s) }

// Model is the model the upstream is asked for.
func (u *Upstream) Model() string { return u.model }

// request is the body of a chat completions call.
type request struct {
	Model         string         `json:"model"`
	Messages      []message      `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	// Params are the other members (WithParams, the request's own:
	// paramsFor), written after these (MarshalJSON).
	Params map[string]json.RawMessage `json:"-"`
}

// streamOptions are a request's stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// includeUsage asks for the usage chunk (shared by every call: never
// changed).
var includeUsage = &streamOptions{IncludeUsage: true}

// Call sends env's conversation to the model and writes its streamed
// answer as env's frames (see the package documentation).
func (u *Upstream) Call(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	msgs, err := u.messages(ctx, env)
	if err != nil {
		return err
	}
	params, err := u.paramsFor(env)
	if err != nil {
		return err
	}
	r := request{Model: u.model, Messages: msgs, Stream: true, Params: params}
	if !u.noStreamUsage.Load() {
		r.StreamOptions = includeUsage
	}
	resp, err := u.post(ctx, env, r)
	if r.StreamOptions != nil && usageRefused(err) {
		// Mistral's API (422, extra_forbidden) and Azure OpenAI's older
		// API versions (400, "Unrecognized request argument supplied:
		// stream_options") refuse it: nothing was answered, so the call
		// is made again without it, and once that call is answered every
		// later call goes without. A refusal of something else may quote
		// the request, stream_options and all (FastAPI's validation
		// errors echo it): refused again, later calls still ask for usage.
		r.StreamOptions = nil
		resp, err = u.post(ctx, env, r)
		if err == nil && u.noStreamUsage.CompareAndSwap(false, true) {
			u.log.Warn("openai bridge: the upstream refuses stream_options.include_usage; calling it without (its final frames carry no token usage)",
				"pool", u.pool, "upstream", u.Name())
		}
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	stream, err := streamBody(ctx, resp, min(u.maxEvent, sseBufferSize), u.maxEvent, u.Scrub)
	if err != nil {
		return err
	}
	// The call is ended at the grace after the finish reason (turn.read),
	// which unblocks a read the server's pings would hold: its body's
	// cancel, not a context of Call's own around the client's (2
	// allocations a call).
	// The model is the server's when a chunk names it (a dated version of
	// the one asked for, often), else the one asked for.
	t := &turn{w: w, maxEvent: u.maxEvent, scrub: u.Scrub, callPrefix: "call_" + env.RequestID + "_", model: u.model,
		endCall: bridge.BodyCancel(resp.Body), grace: min(finishGrace, u.client.IdleTimeout()/2), maxContent: agent.MaxFrameBytes(w)}
	if u.thinkOpen {
		t.think.open()
	}
	if err := t.read(ctx, stream); err != nil {
		return err
	}
	if err := t.endText(); err != nil {
		return err
	}
	if err := t.flushCalls(); err != nil {
		return err
	}
	u.record(ctx, env)
	res := t.result()
	err = agent.ErrFrameTooLarge // the content, larger than a frame, was not kept (turn.keepContent)
	if !t.omitted {
		err = w.Complete(res)
	}
	if errors.Is(err, agent.ErrFrameTooLarge) {
		// The text was streamed in frames that fit; the final frame holds
		// everything else.
		err = w.Complete(res.withoutContent())
	}
	return err
}

// post sends r for env and returns the upstream's answer (its headers).
func (u *Upstream) post(ctx context.Context, env *e2a.Envelope, r request) (*http.Response, error) {
	body, err := r.encode() // not json.Marshal(r): r boxed, its body compacted and copied again
	if err != nil {
		return nil, agent.Errorf(e2a.ErrCodeInvalidRequest, false, "request does not encode: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	// The values are shared by every call (read only, of capacity 1: an
	// Add would copy them): Header.Set made a slice for each.
	req.Header["Content-Type"] = contentTypeJSON
	req.Header["Accept"] = acceptSSE
	return u.client.Do(req, env)
}

// The values of a call's Content-Type and Accept headers.
var (
	contentTypeJSON = []string{"application/json"}[:1:1]
	acceptSSE       = []string{"text/event-stream"}[:1:1]
)

// usageRefused reports the upstream's refusal of a call for its
// stream_options: a 400 or 422 whose words name it.
func usageRefused(err error) bool {
	if err == nil {
		return false // be below escapes: no allocation on the common path
	}
	var be *bridge.Error
	return errors.As(err, &be) && (be.Status == http.StatusBadRequest || be.Status == http.StatusUnprocessableEntity) &&
		strings.Contains(be.Message, "stream_options")
}

// record adds env to its conversation, before the final frame so that a
// next turn sent as soon as the client sees it finds this one. A failure
// is logged: the answer is still given, the next turn lacks this one.
func (u *Upstream) record(ctx context.Context, env *e2a.Envelope) {
	if u.convs == nil || !bridge.InConversation(env) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), updateTimeout)
	defer cancel()
	if err := u.convs.Update(ctx, u.pool, env, func(*bridge.Conversation) {}); err != nil {
		u.log.Warn("openai bridge: turn not recorded in its conversation", "pool", u.pool,
			"request_id", env.RequestID, "err", err)
	}
}
