package a2abridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// grpcIdle bounds the wait for a gRPC agent's answer by the client's idle
// timeout, as bridge.Client's ResponseHeaderTimeout bounds an HTTP answer's
// (the gRPC transport does not go through it): a unary call not answered
// within idle, or a stream whose first message does not come within idle,
// fails with bridge.ErrIdleTimeout (code upstream_timeout, retryable).
// Once a stream has delivered, its silences are not bounded, as an A2A
// answer's body over HTTP is not: an agent may think for long between
// events.
func grpcIdle(idle time.Duration) []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		cctx, cancel := context.WithTimeoutCause(ctx, idle, bridge.ErrIdleTimeout)
		defer cancel()
		return idleError(ctx, cctx, idle, invoke(cctx, method, req, reply, cc, opts...))
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, open grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		sctx, cancel := context.WithCancelCause(ctx)
		s := &idleStream{parent: ctx, ctx: sctx, idle: idle, cancel: cancel}
		s.timer = time.AfterFunc(idle, func() { cancel(bridge.ErrIdleTimeout) })
		cs, err := open(sctx, desc, cc, method, opts...)
		if err != nil {
			s.stop()
			return nil, idleError(ctx, sctx, idle, err)
		}
		s.ClientStream = cs
		return s, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// idleError is err as bridge.ErrIdleTimeout when the call's context cctx
// ended for idleness (and the caller's ctx did not end).
func idleError(ctx, cctx context.Context, idle time.Duration, err error) error {
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), bridge.ErrIdleTimeout) {
		return fmt.Errorf("%w: nothing from the agent for %v (gRPC)", bridge.ErrIdleTimeout, idle)
	}
	return err
}

// idleStream is a client stream whose context ends when its first message
// does not arrive within idle.
type idleStream struct {
	grpc.ClientStream
	parent, ctx context.Context
	idle        time.Duration
	timer       *time.Timer
	cancel      context.CancelCauseFunc
}

func (s *idleStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.timer.Stop() // answered: the stream's context stays the caller's
		return nil
	}
	s.stop()
	if errors.Is(err, io.EOF) {
		return err
	}
	return idleError(s.parent, s.ctx, s.idle, err)
}

// stop ends the stream's idle watch.
func (s *idleStream) stop() {
	s.timer.Stop()
	s.cancel(nil)
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

// rateLimited is err as a *bridge.Error upstream_rate_limited when it is
// the gRPC status RESOURCE_EXHAUSTED.
func rateLimited(err error) error {
	if s, ok := status.FromError(err); ok && err != nil && s.Code() == codes.ResourceExhausted {
		// Not wrapping err: a2a-go reads a wrapped status as it reads
		// the status itself (status.FromError unwraps).
		return &bridge.Error{Code: bridge.CodeRateLimited, Retryable: true, Message: "the agent answered RESOURCE_EXHAUSTED: " + s.Message()}
	}
	return err
}

type rateLimitedStream struct{ grpc.ClientStream }

func (s rateLimitedStream) RecvMsg(m any) error { return rateLimited(s.ClientStream.RecvMsg(m)) }
