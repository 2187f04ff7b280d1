package a2abridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestSilentInterfaceLeftOut: an agent's card lists first interfaces on a
// port nothing listens on (gRPC, and JSON-RPC v1.0: the Python SDK's
// samples list gRPC first, on a port of its own that a deployment may
// not expose), then its JSON-RPC interface: the bridge leaves the silent
// ones out (logged at start, by address) and answers through the one that
// answers. A card whose every interface is silent is kept whole: the
// bridge starts, and its calls fail unreachable.
func TestSilentInterfaceLeftOut(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	p := pipetest.Start(t)
	closed := testkit.ClosedAddr(t)
	agent := startKeyedAgent(t, "127.0.0.1")
	card := cardOf("http://"+closed+"/rpc", agent.rpc)
	card.SupportedInterfaces = append([]*a2a.AgentInterface{a2a.NewAgentInterface(closed, a2a.TransportProtocolGRPC)}, card.SupportedInterfaces...)
	agent.card.set(t, card)
	u, log := bridgeTo(ctx, t, "http://"+agent.addr, bridge.WithConnectTimeout(2*time.Second))
	askThrough(t, p, "silent", u)
	if l := log.String(); !strings.Contains(l, "take no connection") || !strings.Contains(l, closed+" (GRPC)") ||
		!strings.Contains(l, "http://"+closed+"/… (JSONRPC)") || !strings.Contains(l, agent.addr+"/… (JSONRPC)") {
		t.Errorf("the start's log does not name the silent interfaces and the one used:\n%s", l)
	}

	all := startKeyedAgent(t, "127.0.0.1")
	all.card.set(t, cardOf("http://"+closed+"/rpc", "http://"+testkit.ClosedAddr(t)+"/rpc"))
	_, log = bridgeTo(ctx, t, "http://"+all.addr, bridge.WithConnectTimeout(2*time.Second))
	if strings.Contains(log.String(), "take no connection") {
		t.Errorf("every interface silent, yet one was left out:\n%s", log.String())
	}
}
