package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// grpcServerErrors are the status codes that make a gRPC server span an
// error (OpenTelemetry's RPC conventions: the server's failures, not the
// caller's).
var grpcServerErrors = map[codes.Code]bool{codes.Unknown: true, codes.DeadlineExceeded: true, codes.Unimplemented: true,
	codes.Internal: true, codes.Unavailable: true, codes.DataLoss: true}

// GRPCServerOptions are the options that give a gRPC server's calls a
// server span each, as Handler gives HTTP requests: named by the full
// method ("a2a.v1.A2AService/SendMessage"), whose parent is the call's
// traceparent metadata with its tracestate, checked as Handler checks the
// headers (Extract, [e2a.CleanTrace]); attributes rpc.system (grpc),
// rpc.service, rpc.method and rpc.grpc.status_code, an error status for
// the server's failures (UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED,
// INTERNAL, UNAVAILABLE, DATA_LOSS). The handler's context holds the
// span, so what the call publishes is its child. None when tracing is
// off.
func GRPCServerOptions() []grpc.ServerOption {
	if !Enabled() {
		return nil
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		ctx, span := startGRPCSpan(ctx, info.FullMethod)
		res, err := next(ctx, req)
		endGRPCSpan(span, err)
		return res, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
		ctx, span := startGRPCSpan(ss.Context(), info.FullMethod)
		err := next(srv, tracedStream{ServerStream: ss, ctx: ctx})
		endGRPCSpan(span, err)
		return err
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}

// tracedStream is a server stream whose context holds the call's span.
type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s tracedStream) Context() context.Context { return s.ctx }

func startGRPCSpan(ctx context.Context, fullMethod string) (context.Context, trace.Span) {
	md, _ := metadata.FromIncomingContext(ctx)
	var tp string
	if v := md.Get("traceparent"); len(v) > 0 {
		tp = v[0]
	}
	ctx = Extract(ctx, &e2a.TraceContext{Traceparent: tp, Tracestate: strings.Join(md.Get("tracestate"), ",")})
	name := strings.TrimPrefix(fullMethod, "/")
	service, method, _ := strings.Cut(name, "/")
	return Tracer("github.com/e2a-pipeline/pipeline/internal/tracing").Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.service", service),
			attribute.String("rpc.method", method)))
}

func endGRPCSpan(span trace.Span, err error) {
	code := status.Code(err)
	span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
	if grpcServerErrors[code] {
		span.SetStatus(otelcodes.Error, code.String())
	}
	span.End()
}
