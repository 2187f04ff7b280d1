package ingress

import (
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// FuzzClientAddress feeds any trusted-proxy list (E2A_AUTH_TRUSTED_PROXIES),
// connection peer and X-Forwarded-For values (one header value a line, as
// a client writes them) to ParseTrustedProxies and ClientAddress, and the
// address a trusted proxy appends for the client it saw (hop: 4 or 16
// bytes, written as an address, ip:port or [ipv6]:port by port). Checked
// against rules written apart from the code:
//   - a list is refused with ErrAuthConfig only, and every address it
//     names as one is trusted;
//   - the client is an address without zone nor IPv4 mapping;
//   - an untrusted peer is the client, whatever the header says;
//   - the client is the peer or an address of the header;
//   - behind a trusted peer, an untrusted hop the proxy appended is the
//     client, whatever the client wrote before it (no spoofing).
func FuzzClientAddress(f *testing.F) {
	f.Add("10.0.0.0/8, 192.168.1.1,::1", "10.1.2.3:1234", "1.2.3.4, 5.6.7.8", []byte{203, 0, 113, 5}, uint16(0))
	f.Add("fe80::/10", "[fe80::1%eth0]:443", "203.0.113.7, fe80::2%eth0\n[fe80::2%eth0]:80", []byte{198, 51, 100, 1}, uint16(443))
	f.Add("::ffff:10.0.0.0/104", "[::ffff:10.0.0.1]:1", "junk,, 10.9.9.9", []byte{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, uint16(8080))
	f.Add("0.0.0.0/0", "bufconn", "", []byte{1, 2, 3}, uint16(1))
	f.Fuzz(func(t *testing.T, list, peer, xff string, hop []byte, port uint16) {
		trusted, err := ParseTrustedProxies([]string{list})
		if err != nil {
			if !errors.Is(err, ErrAuthConfig) {
				t.Fatalf("list %q: error %v is not ErrAuthConfig", list, err)
			}
			return
		}
		for _, e := range strings.Split(list, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(e)); err == nil && !isTrusted(a.Unmap().WithZone(""), trusted) {
				t.Fatalf("list %q: %v is not trusted", list, a)
			}
		}
		h := http.Header{}
		if xff != "" {
			h["X-Forwarded-For"] = strings.Split(xff, "\n")
		}
		got, ok := ClientAddress(peer, h, trusted)
		if !ok {
			return
		}
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("peer %q, X-Forwarded-For %q: client %v", peer, xff, got)
		}
		p, pok := referenceAddr(peer)
		if pok && !referenceTrusted(p, trusted) && got != p {
			t.Fatalf("untrusted peer %q: client %v from X-Forwarded-For %q", peer, got, xff)
		}
		if got != p && !headerNames(h, got) {
			t.Fatalf("peer %q, X-Forwarded-For %q: client %v is neither", peer, xff, got)
		}
		x, written := hopAddr(hop, port)
		if !x.IsValid() || !pok || !referenceTrusted(p, trusted) || referenceTrusted(x, trusted) {
			return
		}
		if xff == "" {
			h["X-Forwarded-For"] = []string{written}
		} else {
			h["X-Forwarded-For"][len(h["X-Forwarded-For"])-1] += ", " + written
		}
		if got, _ := ClientAddress(peer, h, trusted); got != x {
			t.Fatalf("trusted peer %q appended %q to X-Forwarded-For %q: client %v, want %v", peer, written, xff, got, x)
		}
	})
}

// referenceAddr reads a peer or hop as net/http and proxies write one: an
// address, or ip:port with [ ] around an IPv6 address, a zone dropped and
// an IPv4-mapped address unmapped.
func referenceAddr(s string) (netip.Addr, bool) {
	if i := strings.LastIndexByte(s, ':'); i > 0 && s[0] == '[' && s[i-1] == ']' {
		if _, err := strconv.ParseUint(s[i+1:], 10, 16); err == nil {
			s = s[1 : i-1]
		}
	} else if strings.Count(s, ":") == 1 {
		if _, err := strconv.ParseUint(s[i+1:], 10, 16); err == nil {
			s = s[:i]
		}
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

func referenceTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// headerNames reports whether a hop of the X-Forwarded-For values of h is
// a.
func headerNames(h http.Header, a netip.Addr) bool {
	for _, v := range h.Values("X-Forwarded-For") {
		for _, e := range strings.Split(v, ",") {
			if b, ok := referenceAddr(strings.TrimSpace(e)); ok && b == a {
				return true
			}
		}
	}
	return false
}

// hopAddr is the address of 4 or 16 bytes of b (none otherwise), unmapped,
// and how a proxy writes it: alone for port 0, else with the port.
func hopAddr(b []byte, port uint16) (netip.Addr, string) {
	var a netip.Addr
	switch len(b) {
	case 4:
		a = netip.AddrFrom4([4]byte(b))
	case 16:
		a = netip.AddrFrom16([16]byte(b))
	default:
		return a, ""
	}
	if port == 0 {
		return a.Unmap(), a.String()
	}
	return a.Unmap(), netip.AddrPortFrom(a, port).String()
}
