package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Accepted describes a request JetStream has acknowledged.
type Accepted struct {
	RequestID string
	Pool      string
	// StreamSeq is the request's sequence in E2A_REQUESTS.
	StreamSeq uint64
	// Duplicate is true when the same request_id was already accepted
	// (within the dedupe window, for Publisher.Publish; while E2A_REQUESTS
	// keeps it, for a front door's request of a chosen id): nothing new
	// was published.
	Duplicate bool
	// Warning is set when the request was accepted for a pool with no live
	// worker (the pool check): it waits until one starts.
	Warning string
	// size is the stored message's size, headers included (what the
	// principal's budget of request bytes is charged); 0 when nothing was
	// stored.
	size int64
}

// Publisher publishes normalized envelopes durably. It is safe for
// concurrent use.
type Publisher struct {
	js      jetstream.JetStream
	timeout time.Duration
}

// NewPublisher returns a Publisher that waits at most timeout for each
// PubAck.
func NewPublisher(js jetstream.JetStream, timeout time.Duration) *Publisher {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Publisher{js: js, timeout: timeout}
}

// Publish writes env on e2a.req.<pool>.<request_id> with Nats-Msg-Id set to
// the request_id, and returns once JetStream acknowledged it. The same
// request_id published twice within the dedupe window is one request
// (Accepted.Duplicate). It returns ErrInvalidPool for a bad pool name, an
// error wrapping ErrTooLarge when the encoded envelope and its headers exceed
// the connected server's max_payload (checked before publishing) or when a
// server or the stream refuses the message for its size, and an error wrapping ErrBackpressure when JetStream
// did not take the message (stream full, timeout, no responders); nothing
// is half-accepted.
//
// With tracing on, the publish is a producer span (child of the span in ctx,
// else of the trace context env carries) and env.Trace becomes that span's
// context, so that the agent's spans are its children.
func (p *Publisher) Publish(ctx context.Context, pool string, env *e2a.Envelope) (acc Accepted, err error) {
	return p.PublishAfter(ctx, pool, env, "")
}

// PublishAfter is Publish for a turn that runs after the request after (the
// previous turn of its task or session; none when ""): the message carries
// it in subjects.HeaderAfterRequest, and the agent runtime starts the turn
// once after's final frame is stored. A duplicate's Accepted.Pool is the
// pool the stored request is queued in, which may not be pool (the dedupe
// window is the stream's, whatever the pool), when the stream's leader
// answers its lookup; else pool.
func (p *Publisher) PublishAfter(ctx context.Context, pool string, env *e2a.Envelope, after string) (acc Accepted, err error) {
	var turns []string
	if after != "" {
		turns = []string{after}
	}
	acc, err = p.publishAfter(ctx, pool, env, turns, checkWindow)
	if err == nil && acc.Duplicate {
		if stored := p.storedPool(ctx, env.RequestID); stored != "" {
			acc.Pool = stored
		}
	}
	return acc, err
}

// storedPool returns the pool of the request of requestID stored in
// E2A_REQUESTS, as its leader holds it: "" when none is, or the lookup
// fails.
func (p *Publisher) storedPool(ctx context.Context, requestID string) string {
	any, err := subjects.RequestAnyPool(requestID)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	m, err := streams.LeaderLastBySubject(ctx, p.js.Conn(), streams.RequestsStream, any)
	if err != nil {
		return ""
	}
	pool, _, err := subjects.ParseRequest(m.Subject)
	if err != nil {
		return ""
	}
	return pool
}

// idCheck is how a request's publish keeps its id to one request.
type idCheck int

const (
	// checkWindow: Nats-Msg-Id = the request id, so that JetStream's dedupe
	// window (E2A_DEDUPE_WINDOW) finds a second publish of it
	// (Publisher.Publish's contract, a direct publisher's way).
	checkWindow idCheck = iota
	// checkStored: the publish expects no message on e2a.req.*.<id>
	// (expected last subject sequence 0, checked by the server as it
	// stores), for an id a client chose: a request of the id is found for
	// as long as E2A_REQUESTS keeps it, not only within the window. No
	// Nats-Msg-Id: the window would find nothing this check does not, and
	// each entry is server heap for the window's length (docs/capacity.md).
	checkStored
	// checkNone: an id the pipeline made for the call (a UUIDv7 never
	// given out), which nothing can hold. No Nats-Msg-Id either: the
	// publish is sent again only when no stream answered it
	// (publishRetry), so it was stored nowhere.
	checkNone
)

// requestHeader is the header of env's request message (after: the
// earlier turns it follows; check: how its id is kept to one request).
// Each value is a slice of one string, as nats.Header.Set makes it, the
// slices cut from one array: a slice per header was 4 to 8 allocations
// per request.
func requestHeader(env *e2a.Envelope, after []string, check idCheck) (nats.Header, error) {
	var earlier, any string
	if len(after) > 1 {
		list, err := json.Marshal(after[1:])
		if err != nil {
			return nil, fmt.Errorf("ingress: encode earlier turns: %w", err)
		}
		earlier = string(list)
	}
	if check == checkStored {
		var err error
		if any, err = subjects.RequestAnyPool(env.RequestID); err != nil {
			return nil, invalidPool(err)
		}
	}
	vals := make([]string, 0, 8)
	h := make(nats.Header, 8)
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if check == checkWindow {
		set(subjects.HeaderMsgID, env.RequestID)
	}
	set(subjects.HeaderRequestID, env.RequestID)
	if len(after) > 0 {
		set(subjects.HeaderAfterRequest, after[0])
	}
	if len(after) > 1 {
		set(subjects.HeaderEarlierRequests, earlier)
	}
	if check == checkStored {
		set(jetstream.ExpectedLastSubjSeqHeader, "0")
		set(jetstream.ExpectedLastSubjSeqSubjHeader, any)
	}
	if env.Trace != nil {
		if env.Trace.Traceparent != "" {
			set(subjects.HeaderTraceparent, env.Trace.Traceparent)
		}
		if env.Trace.Tracestate != "" {
			set(subjects.HeaderTracestate, env.Trace.Tracestate)
		}
	}
	return h, nil
}

// publishAfter is PublishAfter for a turn that runs after the turns
// before it (after, the nearest first: the first in
// subjects.HeaderAfterRequest, the others in
// subjects.HeaderEarlierRequests), its id kept to one request as check
// says; with checkStored the request is published only when no request
// of its id is stored in any pool, and one stored answers as a duplicate
// does (Accepted.Duplicate, StreamSeq 0), whatever the dedupe window.
func (p *Publisher) publishAfter(ctx context.Context, pool string, env *e2a.Envelope, after []string, check idCheck) (acc Accepted, err error) {
	subj, err := subjects.Request(pool, env.RequestID)
	if err != nil {
		return Accepted{}, invalidPool(err)
	}
	if tracing.Enabled() {
		var span trace.Span
		ctx, span = startPublishSpan(ctx, pool, subj, env)
		defer func() { endSpan(span, acc, err) }()
	}
	data, err := e2a.MarshalEnvelope(env)
	if err != nil {
		return Accepted{}, fmt.Errorf("ingress: encode envelope: %w", err)
	}
	h, err := requestHeader(env, after, check)
	if err != nil {
		return Accepted{}, err
	}
	msg := &nats.Msg{Subject: subj, Data: data, Header: h}
	// The connected server's max_payload (learnt again at each reconnect;
	// every server of a cluster must have the same): a larger message can
	// never be published, whatever the retries.
	size := streams.MessageSize(msg)
	if limit := p.js.Conn().MaxPayload(); limit > 0 && size > limit {
		return Accepted{}, fmt.Errorf("%w: the envelope is %d bytes with its headers; the NATS server takes at most %d (max_payload)", ErrTooLarge, size, limit)
	}
	ack, err := publishRetry(ctx, p.js.Conn(), msg, p.timeout)
	if err != nil {
		var apiErr *jetstream.APIError
		switch {
		case check == checkStored && errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant):
			// The subject holds the request already (10164 while another
			// publish on the subject is proposed, in a cluster).
			return Accepted{RequestID: env.RequestID, Pool: pool, Duplicate: true}, nil
		case errors.Is(err, nats.ErrMaxPayload),
			errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
			// A server of the cluster (the stream's leader) or the stream
			// itself (max_msg_size) has a smaller limit than the connected
			// server's.
			return Accepted{}, fmt.Errorf("%w: %v", ErrTooLarge, err)
		}
		return Accepted{}, fmt.Errorf("%w: %v", ErrBackpressure, err)
	}
	acc = Accepted{RequestID: env.RequestID, Pool: pool, StreamSeq: ack.Seq, Duplicate: ack.Duplicate}
	if !ack.Duplicate {
		acc.size = int64(size)
	}
	return acc, nil
}

// publishRetry is streams.PublishWithin with the retries
// jetstream.PublishMsg makes by default when no stream answers (a leader
// election's blip): DefaultPubRetryAttempts more attempts,
// DefaultPubRetryWait apart, all within timeout (nats.ErrTimeout past
// it). Each attempt waits on a timer of nats.go's pool, not a context
// of its own (a context and timer per request); ctx, the caller's, ends
// the waits between attempts only: an attempt under way is awaited, so a
// request stored as its client left is reported stored.
func publishRetry(ctx context.Context, nc *nats.Conn, m *nats.Msg, timeout time.Duration) (streams.PubAck, error) {
	deadline := time.Now().Add(timeout)
	for attempt := 0; ; attempt++ {
		ack, err := streams.PublishWithin(nc, m, time.Until(deadline))
		if !errors.Is(err, jetstream.ErrNoStreamResponse) || attempt == jetstream.DefaultPubRetryAttempts {
			return ack, err
		}
		if time.Until(deadline) <= jetstream.DefaultPubRetryWait {
			return ack, err
		}
		select {
		case <-ctx.Done():
			return ack, err
		case <-time.After(jetstream.DefaultPubRetryWait):
		}
	}
}

const tracerName = "github.com/e2a-pipeline/pipeline/ingress"

// startPublishSpan starts the producer span of a request's publish and
// writes its context into env.Trace. Its parent is the span in ctx (the
// door's server span, child of the call's traceparent header), else the
// trace context env carries; and env's when it names another trace than
// ctx's span: the request's own trace context came in its body (an ACP
// prompt's params._meta, an E2A envelope's trace) without a header, and
// the server span, started before the body was read, is a root of its
// own. The request then joins the client's trace, as over stdio, and its
// publish span links that server span (OpenTelemetry's way to relate a
// span to a context that is not its parent). A header and a body's
// context both sent: the door kept the header's (normalizer), the server
// span's trace.
func startPublishSpan(ctx context.Context, pool, subj string, env *e2a.Envelope) (context.Context, trace.Span) {
	var opts []trace.SpanStartOption
	switch sc := trace.SpanContextFromContext(ctx); {
	case !sc.IsValid():
		ctx = tracing.Extract(ctx, env.Trace)
	case env.Trace != nil:
		if own := tracing.Extract(ctx, env.Trace); trace.SpanContextFromContext(own).TraceID() != sc.TraceID() {
			ctx = own
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	attrs := []attribute.KeyValue{tracing.MessagingSystem, tracing.Destination(subj),
		tracing.AttrRequestID.String(env.RequestID), tracing.AttrPool.String(pool)}
	if env.Provenance != nil && env.Provenance.SourceProtocol != "" {
		attrs = append(attrs, tracing.AttrProtocol.String(env.Provenance.SourceProtocol))
	}
	ctx, span := tracing.Tracer(tracerName).Start(ctx, "publish e2a.req", append(opts, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrs...))...)
	if t := tracing.Inject(ctx); t != nil {
		env.Trace = t
	}
	return ctx, span
}

func endSpan(span trace.Span, acc Accepted, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	} else if acc.Duplicate {
		span.SetAttributes(attribute.Bool("e2a.duplicate", true))
	}
	span.End()
}
