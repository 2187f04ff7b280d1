package egress

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// A front door that publishes a request and then streams its frames in the
// same call can subscribe to the live frames before the publish. The server
// handles a connection's protocol in order, so when the request is new (not
// a duplicate) every frame of it is stored after the subscription exists
// and reaches it: the stream open reads nothing from E2A_RESPONSES (one
// batched direct get less per request). A duplicate, or a publish on
// another connection than egress's, reads the stream at open as always.
//
// The flow: ctx, end := ExpectStream(ctx) (defer end()); the host's publish
// calls Service.Prepare(ctx, id) before publishing and Prepared.Published
// after the PubAck; Service.Stream (and the renderers' serve functions)
// called with ctx take the subscription.

type prepareKey struct{}

// liveSlot carries a subscription from the publish to the stream open of
// one call.
type liveSlot struct {
	p *Prepared
}

// ExpectStream returns a context telling the publish of a request in ctx's
// call that its frames will be streamed in the same call (see
// Service.Prepare), and the function that releases a subscription the call
// made and did not use. Call it once per call, on the call's goroutine.
func ExpectStream(ctx context.Context) (context.Context, func()) {
	slot := &liveSlot{}
	return context.WithValue(ctx, prepareKey{}, slot), func() {
		if slot.p != nil {
			slot.p.Close()
			slot.p = nil
		}
	}
}

// Prepared is a live subscription to a request's frames made before the
// request is published.
type Prepared struct {
	slot      *liveSlot
	requestID string
	sub       *nats.Subscription
	live      chan *nats.Msg
	// fresh: the publish stored the request (not a duplicate) on the
	// subscription's connection, so no frame of it predates the
	// subscription.
	fresh bool
	ready bool // Published was called
}

// Prepare subscribes to requestID's live frames when ctx expects a stream
// (ExpectStream) and returns the subscription, or nil (nothing to do: no
// stream expected, or already prepared). Publish the request on the
// service's connection after it, then call Published; on a failed publish,
// Close.
func (s *Service) Prepare(ctx context.Context, requestID string) (*Prepared, error) {
	slot, _ := ctx.Value(prepareKey{}).(*liveSlot)
	if slot == nil || slot.p != nil {
		return nil, nil
	}
	liveSubj, err := subjects.Live(requestID)
	if err != nil {
		return nil, nil // Open refuses the id
	}
	p := &Prepared{slot: slot, requestID: requestID, live: make(chan *nats.Msg, s.live.liveCapacity(s.nc.MaxPayload()))}
	if p.sub, err = s.nc.ChanSubscribe(liveSubj, p.live); err != nil {
		return nil, fmt.Errorf("egress: subscribe %s: %w", liveSubj, err)
	}
	slot.p = p
	return p, nil
}

// Conn returns the connection Prepare subscribes on: a request published on
// it after Prepare is fresh.
func (s *Service) Conn() *nats.Conn { return s.nc }

// Published tells that the request was published after the subscription:
// fresh when the server stored it (not a duplicate) and the publish used the
// service's connection (or flushed it first).
func (p *Prepared) Published(fresh bool) {
	if p == nil {
		return
	}
	p.fresh, p.ready = fresh, true
}

// Close drops the subscription (a failed publish). It is safe to call more
// than once.
func (p *Prepared) Close() {
	if p == nil || p.sub == nil {
		return
	}
	_ = p.sub.Unsubscribe()
	p.sub = nil
	if p.slot != nil && p.slot.p == p {
		p.slot.p = nil
	}
}

// takePrepared returns the subscription prepared in ctx for requestID and
// hands it over to the caller (the reader), or nil.
func takePrepared(ctx context.Context, requestID string) *Prepared {
	slot, _ := ctx.Value(prepareKey{}).(*liveSlot)
	if slot == nil || slot.p == nil || !slot.p.ready || slot.p.requestID != requestID || slot.p.sub == nil {
		return nil
	}
	p := slot.p
	slot.p = nil
	return p
}

// withPrepared makes Open use p's subscription; when p is fresh, the first
// read of the stream is skipped.
func withPrepared(p *Prepared) ReplayOption {
	return func(c *replayConfig) error { c.prepared = p; return nil }
}

// OpenReader is [Open] on the service's connection with its replay
// options (its wait limits, then opts), for a protocol's answers that are
// values or events rather than a rendered stream (package protocols/a2a's).
func (s *Service) OpenReader(ctx context.Context, requestID string, from int64, opts ...ReplayOption) (*Reader, error) {
	ac := s.newAnswerCount(ctx, requestID, from)
	opts = append(append(s.replayOptions(nil), opts...), ac.option)
	return ac.opened(Open(ctx, s.nc, requestID, from, opts...))
}

// OpenPrepared is [Service.OpenReader] taking over the live subscription
// prepared in ctx for requestID ([ExpectStream], [Service.Prepare]) when
// there is one, as the service's own streams do.
func (s *Service) OpenPrepared(ctx context.Context, requestID string, from int64, opts ...ReplayOption) (*Reader, error) {
	ac := s.newAnswerCount(ctx, requestID, from)
	opts = append(append(s.replayOptions(nil), opts...), ac.option)
	return ac.opened(s.open(ctx, requestID, from, opts...))
}

// open is Open on the service's connection, with the subscription prepared
// in ctx for requestID when there is one.
func (s *Service) open(ctx context.Context, requestID string, from int64, opts ...ReplayOption) (*Reader, error) {
	if p := takePrepared(ctx, requestID); p != nil {
		defer p.Close() // when Open did not take it
		opts = append(opts, withPrepared(p))
	}
	return Open(ctx, s.nc, requestID, from, opts...)
}
