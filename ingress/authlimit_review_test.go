package ingress

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAuthLimiterExpiredForgottenBeforeLive: at the address bound, an
// address whose window has ended is forgotten, never one still throttled:
// A's window (from its first failure) ends before B's although A failed
// last, and a third address's failure drops A, while B stays throttled to
// the end of its own window.
func TestAuthLimiterExpiredForgottenBeforeLive(t *testing.T) {
	clk := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := limitAuth(t, 2, 2, prometheus.NewRegistry(), WithAuthClock(clk.Now))
	const wrong, addrA, addrB = "ak_wrong_0123456789abcdef", "192.0.2.1:1", "192.0.2.2:1"
	_ = keyFrom(a, wrong, addrA) // A's window: 0s..60s
	clk.Add(10 * time.Second)
	_ = keyFrom(a, wrong, addrB) // B's window: 10s..70s
	_ = keyFrom(a, wrong, addrB) // B throttled to 70s
	clk.Add(40 * time.Second)
	_ = keyFrom(a, wrong, addrA) // 50s: A's last failure, its window still from 0s
	clk.Add(15 * time.Second)
	_ = keyFrom(a, wrong, "192.0.2.3:1") // 65s: A's window has ended, B's has not
	err := keyFrom(a, limitGoodKey, addrB)
	var ae *AuthError
	if !errors.Is(err, ErrAuthThrottled) || !errors.As(err, &ae) || ae.RetryAfter != 5*time.Second {
		t.Errorf("B, throttled to 70s, at 65s: %v, want ErrAuthThrottled for 5s more", err)
	}
	if ev := testutil.ToFloat64(a.limiter.evicted); ev != 0 {
		t.Errorf("%v addresses evicted, want 0 (A's window had ended)", ev)
	}
}

// TestClientAddressZone: an IPv6 peer or hop with a zone (a link-local
// address as net/http gives it, "[fe80::1%eth0]:443") is the address
// without it: a trusted link-local proxy is trusted, so its clients are
// told apart rather than all counted as the proxy.
func TestClientAddressZone(t *testing.T) {
	trusted, err := ParseTrustedProxies([]string{"fe80::/10"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ peer, xff, want string }{
		{"[fe80::1%eth0]:443", "203.0.113.7", "203.0.113.7"},
		{"[fe80::1%eth0]:443", "203.0.113.7, fe80::2%eth0", "203.0.113.7"},
		{"[fe80::1%eth0]:443", "203.0.113.7, [fe80::2%eth0]:80", "203.0.113.7"},
		{"[2001:db8::1%eth0]:443", "203.0.113.7", "2001:db8::1"},
	} {
		h := http.Header{"X-Forwarded-For": {c.xff}}
		if got, ok := ClientAddress(c.peer, h, trusted); !ok || got.String() != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %v %v, want %s", c.peer, c.xff, got, ok, c.want)
		}
	}
}
