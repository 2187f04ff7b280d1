package push

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// lookups is a Resolver that counts its lookups and resolves nothing.
type lookups struct{ n atomic.Int32 }

func (r *lookups) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.n.Add(1)
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestDeliveryChecksTheScheme: a config stored while the allow-list named
// its host (http allowed) is posted only while it still does: the stage,
// or a redelivery, with an allow-list that no longer names the host
// refuses its http URL for good (permanent, dead-lettered at once)
// without resolving or connecting, as a create would refuse it. The
// connection's address check alone let it through to any public address,
// the token and credentials in clear.
func TestDeliveryChecksTheScheme(t *testing.T) {
	r := &lookups{}
	o, err := buildOptions([]Option{WithResolver(r), WithTimeout(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{URL: "http://hook.example:8080/a2a", Token: "tok", Version: V1}
	a := postUpdate(context.Background(), o.httpClient(), o, cfg, "e1", []byte(`{}`))
	if !a.permanent || a.ok || !strings.Contains(a.reason, "http to hook.example") {
		t.Errorf("attempt %+v, want a permanent refusal of http to hook.example", a)
	}
	if n := r.n.Load(); n != 0 {
		t.Errorf("the host was resolved %d times: the POST went as far as the dialer", n)
	}
	allowed, err := buildOptions([]Option{WithResolver(r), WithTimeout(time.Second), WithAllowHosts("hook.example:8080")})
	if err != nil {
		t.Fatal(err)
	}
	if a := postUpdate(context.Background(), allowed.httpClient(), allowed, cfg, "e1", []byte(`{}`)); a.permanent || r.n.Load() == 0 {
		t.Errorf("allow-listed: attempt %+v after %d lookups, want a transient failure to resolve", a, r.n.Load())
	}
}
