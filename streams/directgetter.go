package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// DirectGetter is the reply side of batched direct gets, shared by every
// call on one connection: one wildcard inbox subscription, replies routed to the waiting call by the
// last token of the reply subject. A batched direct get is answered message
// by message and closed by an empty status message (204 EOB), or by one
// status message (404 when nothing matches), so nats.go's request helpers,
// which take the first reply only, cannot carry it; a subscription per call
// would cost a SUB and an UNSUB per read.
type DirectGetter struct {
	nc     *nats.Conn
	prefix string
	sub    *nats.Subscription
	next   atomic.Uint64

	mu    sync.Mutex
	calls map[string]chan *nats.Msg

	// timers are the stopped timers of calls that ended, for the bound of
	// the next ones (bound): a context with a timeout per call was 4 to 7
	// allocations per read (an ingress check of a request id, every
	// stream read of egress).
	timers sync.Pool
	// chans are the channels of calls that ended, emptied, for the next
	// ones (a channel per read, sized for its batch, was the reader's
	// largest allocation): route sends under mu, so none gets a late reply
	// once release has taken it out of calls.
	chans sync.Pool
}

// NewDirectGetter subscribes the shared reply inbox on nc. It is safe for
// concurrent use; Close unsubscribes it.
func NewDirectGetter(nc *nats.Conn) (*DirectGetter, error) {
	m := &DirectGetter{nc: nc, prefix: nc.NewInbox() + ".", calls: make(map[string]chan *nats.Msg)}
	sub, err := nc.Subscribe(m.prefix+"*", m.route)
	if err != nil {
		return nil, fmt.Errorf("streams: direct get inbox: %w", err)
	}
	// Replies are never dropped by the client library: a call's channel is
	// sized for its whole batch, so the pending queue stays short.
	_ = sub.SetPendingLimits(-1, -1)
	m.sub = sub
	return m, nil
}

// Close unsubscribes the reply inbox; calls in flight then end with their
// context.
func (m *DirectGetter) Close() {
	if m != nil && m.sub != nil {
		_ = m.sub.Unsubscribe()
	}
}

func (m *DirectGetter) route(msg *nats.Msg) {
	tok := msg.Subject[len(m.prefix):]
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := m.calls[tok]
	if ch == nil {
		return // a call that gave up
	}
	select {
	case ch <- msg:
	default: // cannot happen: the channel holds the whole batch
	}
}

// channel is an empty channel with room for n replies, a pooled one when
// one is large enough.
func (m *DirectGetter) channel(n int) chan *nats.Msg {
	if ch, ok := m.chans.Get().(chan *nats.Msg); ok && cap(ch) >= n {
		return ch
	}
	return make(chan *nats.Msg, n)
}

// send publishes the direct get request body to stream with a reply
// token of its own: the returned channel, with room for n replies, gets
// them until release(tok).
func (m *DirectGetter) send(stream string, body []byte, n int) (tok string, ch chan *nats.Msg, err error) {
	return m.sendTo(stream, subjects.DirectGet(stream), body, n)
}

// sendTo is send on the API subject subj of stream.
func (m *DirectGetter) sendTo(stream, subj string, body []byte, n int) (tok string, ch chan *nats.Msg, err error) {
	tok = strconv.FormatUint(m.next.Add(1), 36)
	ch = m.channel(n)
	m.mu.Lock()
	m.calls[tok] = ch
	m.mu.Unlock()
	if err := m.nc.PublishRequest(subj, m.prefix+tok, body); err != nil {
		m.release(tok)
		return "", nil, fmt.Errorf("streams: direct get %s: %w", stream, err)
	}
	return tok, ch, nil
}

// release forgets the call of tok: later replies to it are dropped. Its
// channel, emptied, goes back to the pool for another call.
func (m *DirectGetter) release(tok string) {
	m.mu.Lock()
	ch := m.calls[tok]
	delete(m.calls, tok)
	m.mu.Unlock()
	if ch == nil {
		return
	}
	for {
		select {
		case <-ch:
		default:
			m.chans.Put(ch)
			return
		}
	}
}

// directGetBatchRequest is the body of a $JS.API.DIRECT.GET.<stream> request.
type directGetBatchRequest struct {
	Seq      uint64 `json:"seq,omitempty"`
	NextFor  string `json:"next_by_subj,omitempty"`
	LastFor  string `json:"last_by_subj,omitempty"`
	Batch    int    `json:"batch,omitempty"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// GetBatch reads up to batch messages stored under subject in stream,
// starting at stream sequence start, and calls fn with each in order. It
// returns how many matching messages remain after the last one delivered
// (from the EOB status). A subject with no message at or after start is
// not an error: fn is not called and pending is 0.
func (m *DirectGetter) GetBatch(ctx context.Context, stream, subject string, start uint64, batch, maxBytes int, fn func(seq uint64, h nats.Header, data []byte) error) (pending uint64, err error) {
	bound := m.bound(ctx)
	defer m.unbound(bound)
	if batch < 1 {
		batch = 1
	}
	if start == 0 {
		start = 1
	}
	if err := ctx.Err(); err != nil { // sends nothing (see DirectGetBatch)
		return 0, err
	}
	body, _ := json.Marshal(directGetBatchRequest{Seq: start, NextFor: subject, Batch: batch, MaxBytes: maxBytes})
	tok, ch, err := m.send(stream, body, batch+2)
	if err != nil {
		return 0, err
	}
	defer m.release(tok)
	for {
		var msg *nats.Msg
		select {
		case msg = <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timerC(bound):
			return 0, context.DeadlineExceeded
		}
		if len(msg.Data) == 0 && msg.Header != nil {
			if st := ReplyStatus(msg); st != "" {
				switch st {
				case "204": // end of batch
					n, _ := strconv.ParseUint(msg.Header.Get(subjects.HeaderNumPending), 10, 64)
					return n, nil
				case "404":
					return 0, nil
				case "503":
					return 0, fmt.Errorf("streams: direct get %s: %w", stream, nats.ErrNoResponders)
				default:
					return 0, fmt.Errorf("streams: direct get %s: status %s %s", stream, st, msg.Header.Get("Description"))
				}
			}
		}
		if err := fn(msgHeaderUint(msg, subjects.HeaderStreamSequence), msg.Header, msg.Data); err != nil {
			return 0, err
		}
	}
}

// ConfirmLast is GetLast's confirmation from the stream's leader
// ([LeaderLastBySubject]): the last message stored under subject, nil when
// there is none. Call it when GetLast found none and the absence matters:
// a replica answering a direct get may lag the leader.
func (m *DirectGetter) ConfirmLast(ctx context.Context, stream, subject string) (*nats.Msg, error) {
	rm, err := LeaderLastBySubject(ctx, m.nc, stream, subject)
	if errors.Is(err, ErrNoMessages) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: rm.Subject, Header: rm.Header, Data: rm.Data}, nil
}

// GetLast reads the last message stored under subject (which may hold
// wildcards) in stream; it returns nil when there is none.
func (m *DirectGetter) GetLast(ctx context.Context, stream, subject string) (*nats.Msg, error) {
	bound := m.bound(ctx)
	defer m.unbound(bound)
	if err := ctx.Err(); err != nil { // sends nothing (see DirectGetBatch)
		return nil, err
	}
	// A subject without wildcards goes in the API subject itself, with no
	// body to encode and decode ($JS.API.DIRECT.GET.<stream>.<subject>);
	// one with wildcards cannot be published on.
	var (
		tok string
		ch  chan *nats.Msg
		err error
	)
	if strings.ContainsAny(subject, "*>") {
		body, _ := json.Marshal(directGetBatchRequest{LastFor: subject})
		tok, ch, err = m.send(stream, body, 2)
	} else {
		tok, ch, err = m.sendTo(stream, subjects.DirectGetLast(stream, subject), nil, 2)
	}
	if err != nil {
		return nil, err
	}
	defer m.release(tok)
	select {
	case msg := <-ch:
		if len(msg.Data) == 0 && msg.Header != nil {
			switch st := ReplyStatus(msg); st {
			case "":
			case "404":
				return nil, nil
			case "503":
				return nil, fmt.Errorf("streams: direct get %s: %w", stream, nats.ErrNoResponders)
			default:
				return nil, fmt.Errorf("streams: direct get %s: status %s %s", stream, st, msg.Header.Get("Description"))
			}
		}
		return msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timerC(bound):
		return nil, context.DeadlineExceeded
	}
}

// bound is the timer that ends a call with ctx after
// DefaultDirectGetTimeout (the error a context bounded so would give,
// context.DeadlineExceeded), when ctx has no deadline of its own: a reply
// lost with a dying server would otherwise never end it. Nil when ctx has
// one. A timer of a call that ended is reused (since Go 1.23 a Reset
// timer never delivers a value from before the Reset); unbound gives it
// back.
func (m *DirectGetter) bound(ctx context.Context) *time.Timer {
	if _, ok := ctx.Deadline(); ok {
		return nil
	}
	if t, ok := m.timers.Get().(*time.Timer); ok {
		t.Reset(DefaultDirectGetTimeout)
		return t
	}
	return time.NewTimer(DefaultDirectGetTimeout)
}

// unbound stops t (bound's) and keeps it for a later call.
func (m *DirectGetter) unbound(t *time.Timer) {
	if t != nil {
		t.Stop()
		m.timers.Put(t)
	}
}

// timerC is t's channel, nil (a wait without it) for no timer.
func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

func msgHeaderUint(m *nats.Msg, key string) uint64 {
	if m.Header == nil {
		return 0
	}
	n, _ := strconv.ParseUint(m.Header.Get(key), 10, 64)
	return n
}

// boundContext bounds a call whose context has no deadline by
// DefaultDirectGetTimeout: a reply lost with a dying server would otherwise
// never end it.
func boundContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultDirectGetTimeout)
}
