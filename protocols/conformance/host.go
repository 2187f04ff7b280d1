package conformance

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// Host is a fake pipeline (a host.Host) for a protocol package's tests of
// its front door without ingress or NATS: it admits every request (or
// refuses it with Refusal), accepts every submission (or fails it with
// PublishErr), gives stream slots (none with NoSlot), and answers an
// accepted request by running the renderer over the request's Frames
// (Start, each frame, End(nil): none, Start then End). What it was asked
// is recorded: [Host.Published], [Host.Served], [Host.Slots]. Its zero
// value is ready; it is safe for concurrent use.
type Host struct {
	// Refusal, when set, refuses every request with it.
	Refusal *host.Refusal
	// PublishErr, when set, fails every publish with it.
	PublishErr error
	// RecordErr, when set, fails every read of a task's record with it.
	RecordErr error
	// Warning is the warning of every accepted request.
	Warning string
	// NoSlot refuses every stream slot (429, too_many_streams).
	NoSlot bool
	// ChargeLimit, when > 0, refuses a caller's Charge (429,
	// rate_limited) once more than that many requests were charged beyond
	// the gate's first of each request (counted in Charged).
	ChargeLimit int
	// Norm decodes requests; nil: a normalizer routing to pool "echo".
	Norm *normalizer.Normalizer
	// BodyLimit bounds a body; 0: 1 MiB.
	BodyLimit int64
	// Frames are what Serve renders for a request id.
	Frames map[string][]*e2a.Response
	// FramesFor, when set, gives the frames of a request that Frames does
	// not hold (a request whose id the package made up).
	FramesFor func(requestID string) []*e2a.Response
	// OnServe, when set, is called as Serve or ServeE2A starts (the slot
	// of a streamed answer is held then).
	OnServe func(requestID, format string)

	mu        sync.Mutex
	charged   int
	published []*e2a.Envelope
	pools     []string
	served    []string
	slots     int
}

var _ host.Host = (*Host)(nil)

// Admit admits r as a caller of the host, unless Refusal is set.
func (h *Host) Admit(w http.ResponseWriter, r *http.Request, protocol string, refuse host.Refuse) (host.Caller, bool) {
	if h.Refusal != nil {
		refuse(w, *h.Refusal)
		return nil, false
	}
	return caller{h}, true
}

// Serve records the request and format, then renders the request's Frames
// with the renderer newRenderer builds.
func (h *Host) Serve(w http.ResponseWriter, r *http.Request, requestID, format string, newRenderer render.NewRenderer) {
	h.serveFrom(w, requestID, format, 0, newRenderer)
}

// serveFrom records the request and format, then renders the request's
// Frames after sequence from with the renderer newRenderer builds.
func (h *Host) serveFrom(w http.ResponseWriter, requestID, format string, from int64, newRenderer render.NewRenderer) {
	h.serving(requestID, format)
	o := render.NewOutput(w, 0)
	rend := newRenderer(o)
	if err := rend.Start(); err != nil {
		return
	}
	err := h.eachFrame(requestID, func(f render.Frame) error {
		if int64(f.StreamSeq) <= from {
			return nil
		}
		return rend.Frame(&f)
	})
	_ = rend.End(err)
	_ = o.Flush()
}

// eachFrame calls fn with each of the request's Frames, its stream
// sequence its place (from 1), until fn fails.
func (h *Host) eachFrame(requestID string, fn func(render.Frame) error) error {
	for i, f := range h.framesOf(requestID) {
		raw, err := json.Marshal(f)
		if err != nil {
			return err
		}
		if err := fn(render.Frame{Response: f, Raw: raw, StreamSeq: uint64(i + 1)}); err != nil {
			return err
		}
	}
	return nil
}

// WriteTimeout is egress's default, 10 s.
func (h *Host) WriteTimeout() time.Duration { return 10 * time.Second }

// ServeE2A records the request (format e2a) and answers its Frames as
// egress's NDJSON stream does: one frame per line.
func (h *Host) ServeE2A(w http.ResponseWriter, r *http.Request, requestID string) {
	h.Serve(w, r, requestID, egress.FormatE2ANDJSON, egress.NewE2ANDJSON)
}

// Normalizer is Norm, or one routing every request to pool "echo".
func (h *Host) Normalizer() *normalizer.Normalizer {
	if h.Norm != nil {
		return h.Norm
	}
	return normalizer.New(normalizer.Config{Routes: normalizer.Routes{Default: "echo"}})
}

// MaxBody is BodyLimit, or 1 MiB.
func (h *Host) MaxBody() int64 {
	if h.BodyLimit > 0 {
		return h.BodyLimit
	}
	return 1 << 20
}

// Version is "test".
func (h *Host) Version() string { return "test" }

// Published returns the envelopes published so far, in order.
func (h *Host) Published() []*e2a.Envelope {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*e2a.Envelope(nil), h.published...)
}

// Pools returns the pool of each published envelope, in order.
func (h *Host) Pools() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.pools...)
}

// Served returns "<request id> <format>" for each answer served so far.
func (h *Host) Served() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.served...)
}

// Slots returns the stream slots held now.
func (h *Host) Slots() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.slots
}

func (h *Host) serving(requestID, format string) {
	h.mu.Lock()
	h.served = append(h.served, requestID+" "+format)
	h.mu.Unlock()
	if h.OnServe != nil {
		h.OnServe(requestID, format)
	}
}

func (h *Host) framesOf(requestID string) []*e2a.Response {
	h.mu.Lock()
	frames, ok := h.Frames[requestID]
	h.mu.Unlock()
	if !ok && h.FramesFor != nil {
		return h.FramesFor(requestID)
	}
	return frames
}

// caller is the principal the fake host admitted.
type caller struct{ h *Host }

var _ host.Caller = caller{}

// Input is the normalizer's view of the call: its body and headers over
// HTTP, its Idempotency-Key as the request id.
func (c caller) Input(r *http.Request, body []byte, agent string) normalizer.Input {
	return normalizer.Input{Body: body, Header: r.Header, Channel: "http", Agent: agent, RequestID: r.Header.Get("Idempotency-Key")}
}

// Record is no record: the fake host keeps no task or session records
// (BindingHost does), so a task_id names a new task of the caller's.
func (c caller) Record(context.Context, string, bool) (*host.Task, error) { return nil, c.h.RecordErr }

// CheckTaskOpen is nil: without records no task has finished.
func (c caller) CheckTaskOpen(context.Context, *host.Task) error { return nil }

// Submit takes a stream slot when s asks for one (none with NoSlot:
// host.ErrTooManyStreams), runs s.Before, then records the envelope, or
// fails with PublishErr; the slot is held until Done.
func (c caller) Submit(ctx context.Context, s host.Submission) (*host.Submitted, error) {
	return c.submit(ctx, s, submitHooks{})
}

// submitHooks are what a fake host does around a submission beyond
// [Host]'s, in the host's order: claim after the stream slot is taken and
// before s.Before (a context claimed), record after s.Before and before
// the publish (a turn appended to its record, undone when the publish
// fails). An error of either ends the submission with nothing published.
type submitHooks struct {
	claim  func() error
	record func() (undo func(), err error)
}

// submit is Submit with the hooks.
func (c caller) submit(ctx context.Context, s host.Submission, hooks submitHooks) (*host.Submitted, error) {
	release := func() {}
	if s.Slot {
		r, ok := c.slot()
		if !ok {
			return nil, host.ErrTooManyStreams
		}
		release = r
	}
	if hooks.claim != nil {
		if err := hooks.claim(); err != nil {
			release()
			return nil, err
		}
	}
	undoBefore := func() {}
	if s.Before != nil {
		u, err := s.Before(ctx)
		if err != nil {
			release()
			return nil, err
		}
		if u != nil {
			undoBefore = func() { _ = u(context.WithoutCancel(ctx)) }
		}
	}
	undo := func() {}
	if hooks.record != nil {
		u, err := hooks.record()
		if err != nil {
			undoBefore()
			release()
			return nil, err
		}
		undo = u
	}
	if c.h.PublishErr != nil {
		undo()
		undoBefore()
		release()
		return nil, c.h.PublishErr
	}
	c.h.mu.Lock()
	c.h.published = append(c.h.published, s.Envelope)
	c.h.pools = append(c.h.pools, s.Pool)
	c.h.mu.Unlock()
	return host.NewSubmitted(host.Accepted{RequestID: s.Envelope.RequestID, Pool: s.Pool, Warning: c.h.Warning}, ctx, release), nil
}

// Charge counts n more requests charged (Charged); it refuses with 429
// rate_limited once they pass ChargeLimit (0: no limit).
func (c caller) Charge(_ context.Context, _ string, n int) *host.Refusal {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	c.h.charged += n
	if c.h.ChargeLimit > 0 && c.h.charged > c.h.ChargeLimit {
		return &host.Refusal{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: "rate limit exceeded", Retryable: true}
	}
	return nil
}

// StreamSlot takes a slot, or refuses with 429 too_many_streams when
// NoSlot is set.
func (c caller) StreamSlot(w http.ResponseWriter, refuse host.Refuse) (func(), bool) {
	release, ok := c.slot()
	if !ok {
		refuse(w, host.Refusal{Status: http.StatusTooManyRequests, Code: "too_many_streams", Message: "too many concurrent streams", Retryable: true})
	}
	return release, ok
}

// slot takes a stream slot, none when NoSlot is set.
func (c caller) slot() (func(), bool) {
	if c.h.NoSlot {
		return nil, false
	}
	c.h.mu.Lock()
	c.h.slots++
	c.h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.h.mu.Lock()
			c.h.slots--
			c.h.mu.Unlock()
		})
	}, true
}

// Charged is how many requests callers charged beyond the gate's first of
// each request.
func (h *Host) Charged() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.charged
}
