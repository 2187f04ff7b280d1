package push_test

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestSwitchingProtocolsAnswerTimesOut: a webhook that answers its first
// POST "101 Switching Protocols" and then sends nothing has that POST cut
// at the POST timeout like any other (net/http ends a 101's body, the raw
// connection, with neither the request's context nor its deadline), and
// the update is retried and delivered. The stage read that body for ever:
// the config's lane never posted again, its messages stayed unacked and
// Run never returned.
func TestSwitchingProtocolsAnswerTimesOut(t *testing.T) {
	e := newEnv(t)
	e.startStage(push.WithTimeout(200 * time.Millisecond))
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	r := newReceiver(t, func(n int, w http.ResponseWriter) int {
		if n > 0 {
			return http.StatusOK
		}
		c, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return http.StatusInternalServerError
		}
		_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: hold\r\n\r\n")
		_ = buf.Flush()
		mu.Lock()
		held = append(held, c) // open and silent until the test ends
		mu.Unlock()
		return http.StatusSwitchingProtocols
	})
	e.create("alice", push.Config{TaskID: "t1", URL: r.srv.URL})
	e.turn("alice", "t1", "", "", 3)
	testkit.Eventually(t, 20*time.Second, "delivered after the 101", func() bool {
		return completedCount(t, push.V1, r.accepted()) == 1
	})
	ordered(t, push.V1, r.accepted(), []string{""}, expectText([]string{""}, 3))
}
