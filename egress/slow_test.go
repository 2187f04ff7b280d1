package egress

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetWriteBuffer(4096)
		}
	}
	return c, err
}

// TestHTTPSlowClient: a client that stops reading is disconnected after the
// write timeout, counted, and its reader stops.
func TestHTTPSlowClient(t *testing.T) {
	e := startEnv(t)
	reg := prometheus.NewRegistry()
	svc, err := New(e.nc, WithRegisterer(reg), WithWriteTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	mux := http.NewServeMux()
	svc.Register(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener = smallBufListener{srv.Listener}
	srv.Start()
	defer srv.Close()

	env := newEnvelope("req_big")
	e.submit(t, env)
	w := e.writer(t, env)
	big := strings.Repeat("x", 32<<10)
	for i := 0; i < 120; i++ {
		w.text(big)
	}
	w.complete("done")

	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/requests/req_big/stream", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := bufio.NewReaderSize(resp.Body, 16).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	// Stop reading.
	testkit.Eventually(t, 10*time.Second, "the slow client's disconnection", func() bool {
		return testutil.ToFloat64(svc.m.slow.WithLabelValues(FormatE2ASSE)) == 1
	})
	testkit.Eventually(t, 10*time.Second, "the stream to close", func() bool {
		return testutil.ToFloat64(svc.m.open.WithLabelValues(FormatE2ASSE)) == 0
	})
	if v := testutil.ToFloat64(svc.m.outcomes.WithLabelValues(FormatE2ASSE, "slow_client")); v != 1 {
		t.Fatalf("outcome slow_client = %v", v)
	}
}
