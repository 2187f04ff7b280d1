package deploy

import (
	"syscall"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestFrozenServerLeft: a stage's connection (streams.Connect) leaves a
// NATS server that stops answering without closing its sockets (a frozen
// process or VM, a partition that drops packets: SIGSTOP here) for another
// server of the cluster within seconds. Its writes still go into the
// kernel's buffers, so nothing fails: only the client's pings tell, and
// nats.go's default (a ping every 2 min, stale after 2 unanswered) left
// the connection on the frozen server for 6 minutes, with every worker
// and replica on it stuck while the other two servers served (seen by
// hand: a 30-s SIGSTOP of one of 3 servers stopped every stream for the
// 30 s).
func TestFrozenServerLeft(t *testing.T) {
	c := startNATSCluster(t, 3)
	frozen := c.nodes[0]
	nc, _ := c.connectNode("ingress", frozen)
	if got := nc.ConnectedServerName(); got != frozen.name {
		t.Fatalf("connected to %s, want %s", got, frozen.name)
	}
	testkit.Eventually(t, 10*time.Second, "the other servers known to the client", func() bool {
		return len(nc.DiscoveredServers()) >= 2
	})
	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = frozen.cmd.Process.Signal(syscall.SIGCONT) })
	frozenAt := time.Now()
	testkit.Eventually(t, 15*time.Second, "the connection on another server", func() bool {
		return nc.IsConnected() && nc.ConnectedServerName() != frozen.name
	})
	t.Logf("on %s %v after the freeze", nc.ConnectedServerName(), time.Since(frozenAt).Round(time.Millisecond))
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatalf("flush on %s: %v", nc.ConnectedServerName(), err)
	}
}
