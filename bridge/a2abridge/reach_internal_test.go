package a2abridge

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestSilentAddressListedTwiceLeftOut: a card naming one silent address
// for several interfaces (gRPC and JSON-RPC on the same port nothing
// listens on) has each of them left out. The check dials an address once
// and marked it unchecked again at each later listing of it, so a dial
// that had already failed by then counted as answered and the silent
// interface was kept, called first (TestSilentInterfaceLeftOut failed so
// under -race on a loaded machine, 2 runs in 100). The more listings, the
// likelier a dial ends before the last of them: without the fix this test
// failed 7 runs in 10.
func TestSilentAddressListedTwiceLeftOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	closed := testkit.ClosedAddr(t)
	var usable []*a2a.AgentInterface
	const listings = 100000
	for range listings {
		usable = append(usable, a2a.NewAgentInterface("http://"+closed+"/rpc", a2a.TransportProtocolJSONRPC))
	}
	usable = append(usable, a2a.NewAgentInterface("http://"+ln.Addr().String()+"/rpc", a2a.TransportProtocolJSONRPC))
	kept, left := answering(context.Background(), usable, 5*time.Second)
	if len(kept) != 1 || kept[0].URL != usable[listings].URL || len(left) != listings {
		t.Fatalf("kept %d interfaces, left out %d; want the listening one kept, the %d silent ones left out", len(kept), len(left), listings)
	}
}
