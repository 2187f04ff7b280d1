package ingress

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// GRPCAgentMetadata is the gRPC metadata key naming the agent pool of an
// A2A v1.0 gRPC call (what ?agent= is over HTTP); absent, the routes and
// the default pool decide.
const GRPCAgentMetadata = a2av1.GRPCAgentMetadata

// grpcMinClientPing is the shortest interval between a gRPC client's
// keepalive pings the server accepts: half grpc-go's shortest client
// interval (10 s), so that network jitter does not strike a client
// pinging at it.
const grpcMinClientPing = 5 * time.Second

// A2AGRPC returns the A2A v1.0 gRPC binding, the third of the v1.0
// bindings: the SDK's gRPC service (a2agrpc) over the same handler as the
// JSON-RPC and HTTP+JSON bindings (package protocols/a2av1), each call
// through the gate (protocolHost.AdmitHeader) before the SDK decodes
// anything: the credentials of the call's metadata (x-api-key,
// authorization) are checked and the principal's rate limit charged;
// refusals are gRPC statuses (Unauthenticated, PermissionDenied,
// ResourceExhausted, Unavailable). With tracing on each call is a server
// span (tracing.GRPCServerOptions), child of its traceparent metadata.
// The interceptors of opts run before the gate. Server reflection is on, without credentials (the schema is
// public, as the agent card is). Serve it on a listener of its own (the
// card lists it when WithA2AGRPCAddress is set).
//
// Keepalive: the server pings a connection idle for a stream heartbeat
// interval (what the HTTP bindings' keep-alive comments are), so that a
// stream on a task whose agent thinks for long outlives proxies' and
// NATs' idle timeouts and a vanished client's stream, and its stream
// slot, end within that and a ping timeout (grpc-go's default: 2 hours);
// clients may ping every grpcMinClientPing, streams open or not (grpc-go
// refuses more than one ping per 5 minutes with GOAWAY too_many_pings,
// which ended a held stream of a client pinging every 10 s, grpc-go's
// minimum). No maximum connection age: it would end long streams.
// The binding servers' own server options follow (A2A v1.0's codec,
// which answers a stream's undecodable request INVALID_ARGUMENT:
// host.Bindings.GRPCServerOptions); opts come after these and may
// override them.
func (s *Server) A2AGRPC(opts ...grpc.ServerOption) *grpc.Server {
	// A request message over the body bound is grpc-go's own
	// RESOURCE_EXHAUSTED, refused by its length before the service runs:
	// it cannot carry the binding's ErrorInfo (docs/protocols.md).
	base := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(int(s.opts.maxBody)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: s.egress.Heartbeat()}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: grpcMinClientPing, PermitWithoutStream: true}),
	}, tracing.GRPCServerOptions()...)
	var register []func(grpc.ServiceRegistrar)
	for _, p := range s.opts.protocols.All() {
		if b, ok := s.bound[p.Name]; ok && b.GRPC != nil && slices.Contains(p.Paths, "grpc") {
			// The gRPC services of the registry's binding servers, and what
			// they need of the server (A2A v1.0's codec).
			base = append(base, b.GRPCServerOptions...)
			register = append(register, b.GRPC)
		}
	}
	gs := grpc.NewServer(append(base, opts...)...)
	for _, r := range register {
		r(gs)
	}
	// Server reflection: grpcurl and other tools list and call the service
	// without its proto files.
	reflection.Register(gs)
	return gs
}

// AdmitHeader is the gate of a call with headers and no HTTP request (a
// gRPC call's metadata): authenticated (credentials then removed), the
// principal's rate limit charged, counted under protocol and route (401
// refused by authentication, 429 by the rate limit, 200 admitted).
func (h protocolHost) AdmitHeader(ctx context.Context, header http.Header, protocol, route string) (host.BindingCaller, *host.Refusal, error) {
	s := h.s
	code := "200"
	defer func() {
		// The gRPC call's Debug line, as an HTTP request's (logRequest):
		// at its admission, the call's answer being the SDK's.
		s.opts.log.LogAttrs(ctx, slog.LevelDebug, "grpc", slog.String("protocol", protocol),
			slog.String("method", route), slog.String("admission", code))
	}()
	p := Principal{UserID: "", IdentityOrigin: "user", Scheme: SchemeNone, Open: true}
	if s.opts.auth != nil {
		var err error
		p, err = s.opts.auth.AuthenticateFrom(header, peerAddr(ctx))
		StripCredentialHeaders(header)
		if err != nil {
			s.metrics.authFailures.WithLabelValues(protocol).Inc()
			code = strconv.Itoa(AuthStatus(err))
			s.metrics.requests.WithLabelValues(protocol, route, code).Inc()
			if f, ok := ThrottledRefusal(http.Header{}, err); ok {
				return nil, &f, nil
			}
			code := "unauthenticated"
			if errors.Is(err, ErrForbidden) {
				code = "forbidden"
			}
			return nil, &host.Refusal{Status: AuthStatus(err), Code: code, Message: egress.ClientMessage(err)}, nil
		}
	} else {
		StripCredentialHeaders(header)
	}
	rh := http.Header{}
	if f, canceled := s.rateLimit(ctx, p, protocol, 1, rh, false, host.CancelTest(ctx)); canceled {
		code = "canceled"
		return nil, nil, cmp.Or(ctx.Err(), context.Canceled)
	} else if f != nil {
		code = "429"
		s.metrics.requests.WithLabelValues(protocol, route, code).Inc()
		if secs, err := strconv.Atoi(rh.Get("Retry-After")); err == nil && secs > 0 {
			f.RetryAfter = time.Duration(secs) * time.Second
		}
		return nil, f, nil
	}
	s.metrics.requests.WithLabelValues(protocol, route, "200").Inc()
	return caller{s: s, p: p, fresh: &freshIDs{}}, nil, nil
}
