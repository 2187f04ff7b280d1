package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"
)

func TestSpecial(t *testing.T) {
	for _, s := range []string{
		"0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "127.0.0.1", "169.254.169.254", "172.16.0.1", "192.0.0.8",
		"192.0.2.1", "192.88.99.1", "192.168.1.1", "198.18.0.1", "198.51.100.7", "203.0.113.9", "224.0.0.1",
		"255.255.255.255", "::", "::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "100::1",
		"2001:db8::1", "2002::1", "fc00::1", "fd12::1", "fe80::1", "ff02::1",
	} {
		if !Special(netip.MustParseAddr(s)) {
			t.Errorf("%s is not special", s)
		}
	}
	for _, s := range []string{"1.1.1.1", "8.8.8.8", "93.184.216.34", "::ffff:8.8.8.8", "2606:4700::1111", "2a00:1450::1"} {
		if Special(netip.MustParseAddr(s)) {
			t.Errorf("%s is special", s)
		}
	}
	if !Special(netip.Addr{}) {
		t.Error("the zero address is not special")
	}
}

// table is a Resolver answering from a map.
type table map[string][]netip.Addr

func (r table) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ips, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return ips, nil
}

func TestResolve(t *testing.T) {
	r := table{"two.test": {netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}, "none.test": nil,
		"localhost": {netip.MustParseAddr("203.0.113.5")}, "api.localhost": {netip.MustParseAddr("203.0.113.5")}}
	for _, c := range []struct {
		host string
		want string
		err  bool
	}{
		{"10.0.0.1", "[10.0.0.1]", false},
		{"[::1]", "[::1]", false},
		{"two.test", "[192.0.2.1 2001:db8::1]", false},
		{"none.test", "", true},
		{"unknown.test", "", true},
		// localhost names are the loopback addresses, whatever the
		// resolver says (it said 203.0.113.5 for both here).
		{"localhost", "[127.0.0.1 ::1]", false},
		{"api.localhost", "[127.0.0.1 ::1]", false},
	} {
		ips, err := Resolve(context.Background(), r, c.host)
		if (err != nil) != c.err || (err == nil && fmt.Sprint(ips) != c.want) {
			t.Errorf("Resolve(%s) = %v, %v; want %s (error %v)", c.host, ips, err, c.want, c.err)
		}
	}
}

func TestDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	loop := netip.MustParseAddr("127.0.0.1")
	refuse := errors.New("refused")
	var checked []string
	check := func(host string, ip netip.Addr) error {
		checked = append(checked, host+"/"+ip.String())
		if Special(ip) && ip != loop {
			return refuse
		}
		return nil
	}
	// The first address is refused, the second is dialled.
	c, err := Dial(context.Background(), &net.Dialer{}, "tcp", "h.test", port, []netip.Addr{netip.MustParseAddr("10.0.0.1"), loop}, check)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if fmt.Sprint(checked) != "[h.test/10.0.0.1 h.test/127.0.0.1]" {
		t.Errorf("checked %v", checked)
	}
	if _, err := Dial(context.Background(), &net.Dialer{}, "tcp", "h.test", port, []netip.Addr{netip.MustParseAddr("10.0.0.1")}, check); !errors.Is(err, refuse) {
		t.Errorf("every address refused: %v, want the refusal", err)
	}
	var dnsErr *net.DNSError
	if _, err := Dial(context.Background(), &net.Dialer{}, "tcp", "h.test", port, nil, nil); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("no address: %v, want a not-found DNS error", err)
	}
}

// TestTransport: the transport dials the address the resolver gave for
// the name, after the check: a loopback server is refused when the check
// refuses special addresses and reached when CheckFor returns no check
// (an allow-listed host), and the host reaches CheckFor in lower case
// without its trailing dot.
func TestTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	_, port, _ := net.SplitHostPort(u.Host)
	r := table{"hook.test": {netip.MustParseAddr("127.0.0.1")}}
	var asked []string
	tr := func(allow bool) *http.Client {
		return &http.Client{Transport: Transport(Config{Resolver: r, CheckFor: func(host, p string) Check {
			asked = append(asked, host+":"+p)
			if allow {
				return nil
			}
			return func(host string, ip netip.Addr) error {
				if Special(ip) {
					return fmt.Errorf("%s of %s is special", ip, host)
				}
				return nil
			}
		}})}
	}
	if _, err := tr(false).Get("http://HOOK.test.:" + port + "/"); err == nil {
		t.Error("a name resolving to loopback was dialled")
	}
	resp, err := tr(true).Get("http://hook.test:" + port + "/")
	if err != nil {
		t.Fatalf("allowed host: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(b) != "ok" {
		t.Errorf("answer %q", b)
	}
	if fmt.Sprint(asked) != "[hook.test:"+port+" hook.test:"+port+"]" {
		t.Errorf("CheckFor asked for %v", asked)
	}
}
