package a2abridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// grpcIdle bounds the wait for a gRPC agent's answer by the client's idle
// timeout, as bridge.Client bounds an HTTP answer's headers (the gRPC
// transport does not go through it), with a bridge.IdleWatch: a unary
// call not answered within idle, or a stream whose first message does not
// come within idle, fails with bridge.ErrIdleTimeout (code
// upstream_timeout, retryable), bridge.ErrAwaitingAnswer once gRPC has
// written the call's message (sentMark; a call still connecting, or
// waiting for its token, was not sent). Once a stream has delivered, its
// silences are not bounded, as an A2A answer's body over HTTP is not: an
// agent may think for long between events.
func grpcIdle(idle time.Duration) []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		cctx, w := bridge.WatchIdle(ctx, idle)
		defer w.End()
		err := invoke(context.WithValue(cctx, watchKey{}, w), method, req, reply, cc, opts...)
		return idleError(ctx, w.Stop(), idle, err)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, open grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		sctx, w := bridge.WatchIdle(ctx, idle)
		cs, err := open(context.WithValue(sctx, watchKey{}, w), desc, cc, method, opts...)
		if err != nil {
			cause := w.Stop()
			w.End()
			return nil, idleError(ctx, cause, idle, err)
		}
		return &idleStream{ClientStream: cs, parent: ctx, idle: idle, w: w}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream),
		grpc.WithStatsHandler(sentMark{})}
}

// idleError is err as the watch's cause (bridge.ErrIdleTimeout or
// bridge.ErrAwaitingAnswer) when the watch ended the call (and the
// caller's ctx did not end).
func idleError(ctx context.Context, cause error, idle time.Duration, err error) error {
	if err != nil && cause != nil && ctx.Err() == nil {
		return fmt.Errorf("%w: nothing from the agent for %v (gRPC)", cause, idle)
	}
	return err
}

// watchKey is the context key of a gRPC call's bridge.IdleWatch.
type watchKey struct{}

// sentMark tells a call's IdleWatch its message is sent when gRPC has
// written it to the connection (the client's stats.OutPayload).
type sentMark struct{}

var _ stats.Handler = sentMark{}

func (sentMark) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (sentMark) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if p, ok := s.(*stats.OutPayload); ok && p.IsClient() {
		if w, ok := ctx.Value(watchKey{}).(*bridge.IdleWatch); ok {
			w.Sent()
		}
	}
}

func (sentMark) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (sentMark) HandleConn(context.Context, stats.ConnStats) {}

// idleStream is a client stream whose context ends when its first message
// does not arrive within the watch's time.
type idleStream struct {
	grpc.ClientStream
	parent context.Context
	idle   time.Duration
	w      *bridge.IdleWatch
}

func (s *idleStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.w.Stop() // answered: the stream's context lives until its end
		return nil
	}
	cause := s.w.Stop()
	s.w.End()
	if errors.Is(err, io.EOF) {
		return err
	}
	return idleError(s.parent, cause, s.idle, err)
}

// grpcRateLimited makes a gRPC agent's RESOURCE_EXHAUSTED the bridge's
// upstream_rate_limited (retryable), as an HTTP 429 is: a2a-go maps the
// code to no A2A error and reads it as an internal error (unavailable).
func grpcRateLimited() []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return rateLimited(invoke(ctx, method, req, reply, cc, opts...))
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, open grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := open(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, rateLimited(err)
		}
		return rateLimitedStream{cs}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// grpcRecvBound is the largest gRPC message the bridge takes from an
// agent: the bridge's default bound on one answer's bytes
// (bridge.DefaultMaxAnswerBytes), not grpc-go's 4 MiB, so that an answer
// the JSON-RPC and HTTP+JSON bindings deliver (an artifact of some MiB,
// split into frames that fit) is delivered on gRPC too.
const grpcRecvBound = bridge.DefaultMaxAnswerBytes

// grpcSizeRefusals start grpc-go's RESOURCE_EXHAUSTED messages for a
// message over a size bound: an agent's answer over grpcRecvBound (the
// client's refusal), or the bridge's message over the agent's own bound
// (the agent's). Neither is a rate limit: the same call fails the same
// way again.
var grpcSizeRefusals = []string{"grpc: received message larger than max",
	"grpc: received message after decompression larger than max", "grpc: trying to send message larger than max"}

// rateLimited is err as a *bridge.Error upstream_rate_limited when it is
// the gRPC status RESOURCE_EXHAUSTED, but for a message over a size bound
// (grpcSizeRefusals): upstream_protocol_error, not retryable.
func rateLimited(err error) error {
	if s, ok := status.FromError(err); ok && err != nil && s.Code() == codes.ResourceExhausted {
		for _, p := range grpcSizeRefusals {
			if strings.HasPrefix(s.Message(), p) {
				return &bridge.Error{Code: bridge.CodeProtocol, Retryable: false, Message: "a gRPC message over a size bound: " + s.Message()}
			}
		}
		// Not wrapping err: a2a-go reads a wrapped status as it reads
		// the status itself (status.FromError unwraps).
		return &bridge.Error{Code: bridge.CodeRateLimited, Retryable: true, Message: "the agent answered RESOURCE_EXHAUSTED: " + s.Message()}
	}
	return err
}

type rateLimitedStream struct{ grpc.ClientStream }

func (s rateLimitedStream) RecvMsg(m any) error { return rateLimited(s.ClientStream.RecvMsg(m)) }
