package a2abridge

import (
	"context"
	"errors"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// grpcToken sends a token of the client's token source (bridge.WithTokenSource)
// as each gRPC call's authorization metadata, asked for every call as
// Client.Authorize is on HTTP: a request that outlives a token (a long
// task followed again after a cut) sends the next one. None without a
// token source.
func grpcToken(c *bridge.Client) []grpc.DialOption {
	if !c.HasTokenSource() {
		return nil
	}
	return []grpc.DialOption{grpc.WithPerRPCCredentials(tokenCredentials{c})}
}

// refusedToken drops the client's token (bridge.Client.Refused) when the
// agent refuses a call as unauthenticated, on any binding (a JSON-RPC
// error in a 200 answer, HTTP+JSON's, gRPC's Unauthenticated), as a 401
// does on HTTP: the next call asks for another token.
type refusedToken struct{ c *bridge.Client }

var _ a2aclient.CallInterceptor = refusedToken{}

// Before gives the call a bridge.TokenSlot, which records the token the
// call carries (Authorize fills it on every binding).
func (refusedToken) Before(ctx context.Context, _ *a2aclient.Request) (context.Context, any, error) {
	ctx, _ = bridge.WithTokenSlot(ctx)
	return ctx, nil, nil
}

// After drops the token the refused call carried, if it is still the one
// kept: a refusal that comes after another call replaced it does not drop
// the new one (the call's token unknown: the one kept). A call that
// failed for want of a token fails with the token's error as Authorize
// gave it (its code, retryable, the token endpoint's Retry-After): gRPC
// made a status of it, which kept only its text.
func (r refusedToken) After(ctx context.Context, resp *a2aclient.Response) error {
	if resp == nil || resp.Err == nil {
		return nil
	}
	slot := bridge.TokenSlotOf(ctx)
	if err := slot.Err(); err != nil {
		return err
	}
	if errors.Is(resp.Err, a2a.ErrUnauthenticated) {
		r.c.Refused(slot.Header())
	}
	return nil
}

type tokenCredentials struct{ c *bridge.Client }

var _ credentials.PerRPCCredentials = tokenCredentials{}

// GetRequestMetadata is the call's authorization; no token is the call's
// status: Unauthenticated for a refused client, Unavailable for a token
// endpoint that may answer later (as the bridge reads those codes back).
func (t tokenCredentials) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	h := http.Header{}
	if err := t.c.Authorize(ctx, h); err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(err).Err()
		}
		code := codes.Unavailable
		if be := new(bridge.Error); errors.As(err, &be) && !be.Retryable {
			code = codes.Unauthenticated
		}
		return nil, status.Error(code, err.Error())
	}
	return map[string]string{"authorization": h.Get("Authorization")}, nil
}

// RequireTransportSecurity is false: an agent on plain gRPC (a loopback or
// in-cluster address the operator chose) gets its token as an HTTP one
// does.
func (tokenCredentials) RequireTransportSecurity() bool { return false }
