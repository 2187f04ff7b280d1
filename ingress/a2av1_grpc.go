package ingress

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// GRPCAgentMetadata is the gRPC metadata key naming the agent pool of an
// A2A v1.0 gRPC call (what ?agent= is over HTTP); absent, the routes and
// the default pool decide.
const GRPCAgentMetadata = "x-e2a-agent"

// A2AGRPC returns the A2A v1.0 gRPC binding, the third of the v1.0
// bindings: the SDK's gRPC service (a2agrpc) over the same handler as the
// JSON-RPC and HTTP+JSON bindings, with the gate in interceptors: the
// credentials of the call's metadata (x-api-key, authorization) are
// checked and the principal's rate limit charged before the SDK decodes
// anything; refusals are gRPC statuses (Unauthenticated, PermissionDenied,
// ResourceExhausted, Unavailable). Server reflection is on, without
// credentials (the schema is public, as the agent card is). Serve it on a listener of its own (the
// card lists it when WithA2AGRPCAddress is set).
func (s *Server) A2AGRPC(opts ...grpc.ServerOption) *grpc.Server {
	gs := grpc.NewServer(append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			ctx, err := s.grpcAdmit(ctx)
			if err != nil {
				return nil, err
			}
			return next(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
			if strings.HasPrefix(info.FullMethod, "/grpc.reflection.") {
				// The service's schema is public (a2a.proto), as the card is.
				return next(srv, ss)
			}
			ctx, err := s.grpcAdmit(ss.Context())
			if err != nil {
				return err
			}
			return next(srv, ctxStream{ServerStream: ss, ctx: ctx})
		}),
		grpc.MaxRecvMsgSize(int(s.opts.maxBody)),
	}, opts...)...)
	a2agrpc.NewHandler(&a2av1Handler{s: s}).RegisterWith(gs)
	// Server reflection: grpcurl and other tools list and call the service
	// without its proto files.
	reflection.Register(gs)
	return gs
}

// ctxStream is a server stream with the call's context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c ctxStream) Context() context.Context { return c.ctx }

// grpcAdmit is the gate of a gRPC call: its metadata read as headers,
// authenticated (credentials then removed), the principal's rate limit
// charged; the call context then carries what the handler reads.
func (s *Server) grpcAdmit(ctx context.Context) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	header := http.Header{}
	for k, vs := range md {
		if strings.HasPrefix(k, ":") || strings.HasSuffix(k, "-bin") {
			continue
		}
		for _, v := range vs {
			header.Add(k, v)
		}
	}
	p := Principal{UserID: "", IdentityOrigin: "user", Scheme: SchemeNone, Open: true}
	if s.opts.auth != nil {
		var err error
		p, err = s.opts.auth.AuthenticateHeader(header)
		StripCredentialHeaders(header)
		if err != nil {
			s.metrics.authFailures.WithLabelValues("a2a").Inc()
			s.metrics.requests.WithLabelValues("a2a", "grpc", "401").Inc()
			if errors.Is(err, ErrForbidden) {
				return nil, status.Error(codes.PermissionDenied, err.Error())
			}
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
	} else {
		StripCredentialHeaders(header)
	}
	if f, canceled := s.rateLimit(ctx, p, "a2a", 1, http.Header{}, false); canceled {
		return nil, status.FromContextError(ctx.Err()).Err()
	} else if f != nil {
		code := codes.ResourceExhausted
		if f.Status == http.StatusServiceUnavailable {
			code = codes.Unavailable
		}
		s.metrics.requests.WithLabelValues("a2a", "grpc", "429").Inc()
		return nil, status.Error(code, f.Message)
	}
	s.metrics.requests.WithLabelValues("a2a", "grpc", "200").Inc()
	return context.WithValue(ctx, a2av1Key{}, a2av1Call{header: header, agent: header.Get(GRPCAgentMetadata),
		version: strings.TrimSpace(header.Get(a2a.SvcParamVersion)), channel: "grpc", p: p}), nil
}
