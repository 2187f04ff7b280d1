package audit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// PublishOptions configure Publish.
type PublishOptions struct {
	// Pool is the agent pool; empty: Routes decide (normalizer rule).
	Pool string
	// Routes route envelopes that name no pool (Routes.Default for all).
	Routes normalizer.Routes
	// RequestID is used when the envelope has none (default: a UUIDv7).
	RequestID string
	// Traceparent and Tracestate, when Traceparent is a valid W3C
	// traceparent, replace the envelope's trace context.
	Traceparent string
	Tracestate  string
	// Timeout bounds the wait for the PubAck (default 5 s).
	Timeout time.Duration
}

// Publish normalizes body (an E2A envelope or a legacy AgentRequest, with
// every compatibility rule), strips its secrets, and publishes it on
// e2a.req.<pool>.<request_id> with ingress.Publisher.Publish, as a direct
// publisher does (headers Nats-Msg-Id, E2A-Request-Id, traceparent,
// tracestate; a front door's requests carry no Nats-Msg-Id), straight onto
// the stream without HTTP. It returns the KindAccepted record once JetStream
// acknowledged the write. The same request_id published twice within the
// deduplication window is one request (Record.Duplicate).
func Publish(ctx context.Context, nc *nats.Conn, body []byte, o PublishOptions) (Record, error) {
	if o.Pool != "" {
		if err := subjects.ValidatePool(o.Pool); err != nil {
			return Record{}, err
		}
	}
	var hdr http.Header
	if o.Traceparent != "" {
		hdr = http.Header{}
		hdr.Set(subjects.HeaderTraceparent, o.Traceparent)
		if o.Tracestate != "" {
			hdr.Set(subjects.HeaderTracestate, o.Tracestate)
		}
	}
	n := normalizer.New(normalizer.Config{Routes: o.Routes})
	res, err := n.FromE2A(normalizer.Input{Body: body, Header: hdr, Channel: "cli", RequestID: o.RequestID, Agent: o.Pool})
	if err != nil {
		return Record{}, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return Record{}, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	acc, err := ingress.NewPublisher(js, timeout).Publish(ctx, res.Pool, res.Envelope)
	if err != nil {
		return Record{}, err
	}
	subj, _ := subjects.Request(acc.Pool, acc.RequestID)
	return Record{
		Kind: KindAccepted, RequestID: acc.RequestID, Pool: acc.Pool,
		Stream: streams.RequestsStream, StreamSeq: acc.StreamSeq, Subject: subj,
		Duplicate: acc.Duplicate, Time: formatTime(time.Now()),
	}, nil
}

// Follow streams the frames of requestID with the egress replay engine
// (history, then live) until its final frame, calls emit with each
// (KindFrame: the frames of a burst share its StreamSeq, without
// Record.Burst) and ends with a KindSummary record. wait bounds the wait for
// the first frame and between frames (0: egress defaults). It returns the
// summary, the error of emit, or egress errors (egress.ErrNotFound,
// egress.ErrWaitTimeout, the context's).
func Follow(ctx context.Context, nc *nats.Conn, requestID string, wait time.Duration, emit func(Record) error) (*Summary, error) {
	c := newChecker(requestID)
	pool := ""
	opts := []egress.ReplayOption{}
	if wait > 0 {
		opts = append(opts, egress.WithMaxWait(wait, wait))
	}
	err := egress.Replay(ctx, nc, requestID, 0, func(f render.Frame) error {
		subj, _ := subjects.Response(requestID)
		sm := &storedMsg{stream: streams.ResponsesStream, seq: f.StreamSeq, subject: subj, data: f.Raw, header: nats.Header{}}
		// egress.Replay delivers frames one by one, those of a burst too
		// (Raw is one frame, without the message's headers): each is
		// checked and shown as a frame stored alone.
		var err error
		for _, fr := range c.add(sm) {
			if err = emit(frameRecord(sm, requestID, pool, fr)); err != nil {
				break
			}
		}
		return err
	}, opts...)
	sum := c.summary(true)
	if err != nil && !errors.Is(err, context.Canceled) {
		return sum, fmt.Errorf("audit: follow %q: %w", requestID, err)
	}
	if err != nil {
		return sum, err
	}
	return sum, emit(Record{Kind: KindSummary, RequestID: requestID, Summary: sum})
}
