package ingress

import (
	a2av2 "github.com/a2aproject/a2a-go/v2/a2a"
)

// poolGRPCTenant sets the tenant of card's gRPC interface to pool: the
// gRPC binding has no path to carry the pool, and A2A v1.0's tenant does
// (a client sends it in every request; protocols/a2av1 routes a request's
// tenant to that pool, pooltenant.go).
func poolGRPCTenant(card map[string]any, pool string) {
	ifaces, _ := card["supportedInterfaces"].([]*a2av2.AgentInterface)
	for _, i := range ifaces {
		if i.ProtocolBinding == a2av2.TransportProtocolGRPC {
			i.Tenant = pool
		}
	}
}
