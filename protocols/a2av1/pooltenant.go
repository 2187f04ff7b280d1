package a2av1

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// A2A v1.0's `tenant` (AgentInterface.tenant, and the field of every
// request message) routes a request to one of the agents behind one
// endpoint: a client MUST send in every request the tenant of the
// interface it chose (§8.3.2). Here the tenant is the agent pool. A
// pool's card lists the gRPC binding, which has no path to carry the
// pool, with `tenant: <pool>`; a request's tenant is its pool on every
// binding, as the pool's path (/pools/<pool>/), ?agent=<pool> or the
// x-e2a-agent gRPC metadata are. So every check of a named pool applies
// to it (an invalid name, a pool no worker ever served with the pool
// check on: InvalidParams in each binding's shape), and a tenant naming
// another pool than the call's path or metadata is InvalidParams.

// callFor is call, with the request's tenant as the call's pool.
func (h *handler) callFor(ctx context.Context, tenant string) (call, error) {
	c, err := h.call(ctx)
	if err != nil || tenant == "" {
		return c, err
	}
	if c.agent != "" && c.agent != tenant {
		return c, fmt.Errorf("%w: tenant %q names another agent pool than this interface's (%q)", a2a.ErrInvalidParams, tenant, c.agent)
	}
	c.agent = tenant
	return c, nil
}

// sendTenant is req's tenant ("" for no request).
func sendTenant(req *a2a.SendMessageRequest) string {
	if req == nil {
		return ""
	}
	return req.Tenant
}
