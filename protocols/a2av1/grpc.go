package a2av1

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// registerGRPC registers the SDK's gRPC service (a2agrpc) over hd on s,
// each of its methods admitted by admit before the SDK decodes anything
// of the call: the gate belongs to the service, not to the server, so the
// server's other services (reflection: the schema is public, as the card
// is) take no credentials.
func registerGRPC(s grpc.ServiceRegistrar, hd *handler, admit func(context.Context) (context.Context, error)) {
	a2apb.RegisterA2AServiceServer(gatedRegistrar{ServiceRegistrar: s, admit: admit}, a2agrpc.NewHandler(hd))
}

// gatedRegistrar registers services whose method handlers admit each call
// first.
type gatedRegistrar struct {
	grpc.ServiceRegistrar
	admit func(context.Context) (context.Context, error)
}

func (g gatedRegistrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = slices.Clone(desc.Methods)
	for i := range d.Methods {
		next := d.Methods[i].Handler
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
			ctx, err := g.admit(ctx)
			if err != nil {
				return nil, err
			}
			return next(srv, ctx, dec, intercept)
		}
	}
	d.Streams = slices.Clone(desc.Streams)
	for i := range d.Streams {
		next := d.Streams[i].Handler
		d.Streams[i].Handler = func(srv any, ss grpc.ServerStream) error {
			ctx, err := g.admit(ss.Context())
			if err != nil {
				return err
			}
			return next(srv, ctxStream{ServerStream: ss, ctx: ctx})
		}
	}
	g.ServiceRegistrar.RegisterService(&d, impl)
}

// ctxStream is a server stream with the call's context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c ctxStream) Context() context.Context { return c.ctx }

// admitGRPC is the gate of a gRPC call: its metadata read as headers and
// admitted by the host (credentials then removed, the rate limit
// charged), refusals answered as gRPC statuses (Unauthenticated,
// PermissionDenied, ResourceExhausted, Unavailable); the call context
// then carries what the handler reads.
func (b *bindings) admitGRPC(ctx context.Context) (context.Context, error) {
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
	c, f, err := b.h.AdmitHeader(ctx, header, gateProtocol, "grpc")
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if f != nil {
		return nil, status.Error(grpcCode(f.Code), f.Message)
	}
	return withCall(ctx, call{header: header, agent: header.Get(GRPCAgentMetadata),
		version: strings.TrimSpace(header.Get(a2a.SvcParamVersion)), channel: "grpc", c: c}), nil
}

// grpcCode is the gRPC status of a refusal of the gate, by its code.
func grpcCode(code string) codes.Code {
	switch code {
	case "unauthenticated":
		return codes.Unauthenticated
	case "forbidden":
		return codes.PermissionDenied
	case "unavailable":
		return codes.Unavailable
	}
	return codes.ResourceExhausted
}
