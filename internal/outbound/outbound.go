package outbound

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Resolver resolves host names; *net.Resolver implements it. Tests plug a
// fixed table in.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Check decides whether a connection may go to ip, reached through host
// (the URL's host name or literal); a nil Check accepts every address.
type Check func(host string, ip netip.Addr) error

// Config is what a Transport needs.
type Config struct {
	// Resolver resolves host names (net.DefaultResolver when nil); an IP
	// literal is not resolved.
	Resolver Resolver
	// CheckFor returns the check of a connection to host and port (host
	// in lower case, without a trailing dot): a nil CheckFor, or a nil
	// Check, accepts every address (an operator's allow-list).
	CheckFor func(host, port string) Check
	// DialTimeout bounds a connection's dial and TLS handshake (10 s when
	// zero).
	DialTimeout time.Duration
	// MaxIdleConns, MaxIdleConnsPerHost and MaxResponseHeaderBytes are
	// http.Transport's (its defaults when zero).
	MaxIdleConns, MaxIdleConnsPerHost int
	MaxResponseHeaderBytes            int64
}

// Transport returns the HTTP transport of calls to addresses that clients
// or workflows named (push webhooks, workflow API calls): no proxy from
// the environment, and a dialer that resolves the host itself, checks
// every address and connects only to an address that passed, dialing
// that address: DNS cannot change it between the check and the
// connection. TLS still verifies the certificate against the URL's host
// name.
func Transport(c Config) *http.Transport {
	if c.DialTimeout == 0 {
		c.DialTimeout = 10 * time.Second
	}
	dialer := &net.Dialer{Timeout: c.DialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			host = strings.TrimSuffix(strings.ToLower(host), ".")
			ips, err := Resolve(ctx, c.Resolver, host)
			if err != nil {
				return nil, err
			}
			var check Check
			if c.CheckFor != nil {
				check = c.CheckFor(host, port)
			}
			return Dial(ctx, dialer, network, host, port, ips, check)
		},
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           c.MaxIdleConns,
		MaxIdleConnsPerHost:    c.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    c.DialTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: c.MaxResponseHeaderBytes,
	}
}

// Resolve returns host's addresses: the address itself for an IP literal
// (brackets allowed), the loopback addresses 127.0.0.1 and ::1 for
// "localhost" and a name under it (LocalhostName), else what r
// (net.DefaultResolver when nil) answers; no address at all is a
// not-found DNS error.
func Resolve(ctx context.Context, r Resolver, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip}, nil
	}
	if LocalhostName(host) {
		// Not asked of the resolver (RFC 6761 §6.3: localhost names are
		// the loopback address): a workflow trusts "localhost" by its
		// name (a credential over plain http), and a resolver or hosts
		// file answering another address for it sent that call, in
		// clear, wherever it said.
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}, nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ips, err := r.LookupNetIP(ctx, "ip", host)
	if err == nil && len(ips) == 0 {
		err = &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return ips, err
}

// LocalhostName reports whether host (in lower case, without a trailing
// dot) is "localhost" or a name under it ("api.localhost"), which
// Resolve answers with the loopback addresses only.
func LocalhostName(host string) bool {
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// Dial connects to the first of host's addresses ips that check accepts
// (every address when check is nil), dialing the checked address itself.
// It returns the last refusal or dial error, a not-found DNS error when
// ips is empty.
func Dial(ctx context.Context, d *net.Dialer, network, host, port string, ips []netip.Addr, check Check) (net.Conn, error) {
	var lastErr error
	for _, ip := range ips {
		if check != nil {
			if err := check(host, ip); err != nil {
				lastErr = err
				continue
			}
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return nil, lastErr
}

// Special reports whether ip is an address no call to a host that others
// named may reach unless an operator allows it: private, loopback,
// link-local, unspecified, multicast, shared, documentation, benchmark
// and other reserved ranges (IPv4 and IPv6, IPv4-mapped addresses as
// their IPv4), and every IPv6 address outside global unicast (2000::/3):
// the IPv4-compatible (::a.b.c.d) and IPv4-translated (::ffff:0:a.b.c.d)
// forms, which a host may route to the IPv4 address they carry, NAT64's
// 64:ff9b::/96, site-local and unassigned space. Within 2000::/3, 6to4
// (2002::/16), Teredo and the other IETF ranges (2001::/23) and the
// documentation ranges are special too. (A workflow's AllowedNets still
// admits any of them.)
func Special(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	if ip.Is6() && !globalUnicast.Contains(ip) {
		return true
	}
	for _, n := range specialNets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

var specialNets = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/3",
		// IPv6 outside 2000::/3 is special as a whole (globalUnicast); the
		// ranges of it listed here name what they are.
		"::/96", "::ffff:0:0:0/96", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "fc00::/7",
		"fec0::/10", "fe80::/10", "ff00::/8",
		"2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// globalUnicast is IPv6's global unicast space (RFC 4291, IANA): every
// public IPv6 address is in it.
var globalUnicast = netip.MustParsePrefix("2000::/3")
