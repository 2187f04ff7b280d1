package push

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/outbound"
)

// Resolver resolves webhook host names (net.DefaultResolver by default;
// the workflow executor's interface too).
type Resolver = outbound.Resolver

var _ Resolver = (*net.Resolver)(nil)

// hostRule is one allow-list entry: host[:port], "*.example.com" for its
// subdomains, an IP literal, or "[::1]:8443".
type hostRule struct {
	host string // lower case, "*.x" for subdomains of x
	port string // "" any
}

// parseAllowHosts parses E2A_PUSH_ALLOW_HOSTS: comma or space separated
// host[:port] patterns.
func parseAllowHosts(list []string) ([]hostRule, error) {
	var out []hostRule
	for _, item := range list {
		for _, s := range strings.FieldsFunc(item, func(r rune) bool { return r == ',' || r == ' ' }) {
			s = strings.ToLower(strings.TrimSpace(s))
			if strings.Contains(s, "/") {
				return nil, fmt.Errorf("%w: allow-list entry %q: give a host[:port] or *.domain, not a URL or a path", ErrInvalidOption, s)
			}
			host, port := s, ""
			if h, p, err := net.SplitHostPort(s); err == nil {
				host, port = h, p
				n, err := strconv.Atoi(p)
				if err != nil || n < 1 || n > 65535 || strings.Trim(p, "0123456789") != "" {
					return nil, fmt.Errorf("%w: allow-list entry %q: the port must be 1..65535", ErrInvalidOption, s)
				}
				port = strconv.Itoa(n) // "0443" is 443, as the dialer reads it
			} else if strings.HasPrefix(s, "[") {
				host = strings.Trim(s, "[]")
			}
			host = strings.TrimSuffix(host, ".")
			if host == "" || strings.Contains(host, "/") ||
				(strings.Contains(host, "*") && (!strings.HasPrefix(host, "*.") || strings.Count(host, "*") > 1)) {
				return nil, fmt.Errorf("%w: allow-list entry %q (host[:port], *.domain)", ErrInvalidOption, s)
			}
			if _, err := netip.ParseAddr(host); err != nil && slices.Contains(strings.Split(strings.TrimPrefix(host, "*."), "."), "") {
				// "*..", "a..b": no host a URL reaches has one.
				return nil, fmt.Errorf("%w: allow-list entry %q: a name with an empty label", ErrInvalidOption, s)
			}
			out = append(out, hostRule{host: host, port: port})
		}
	}
	return out, nil
}

func (r hostRule) match(host, port string) bool {
	if r.port != "" && r.port != port {
		return false
	}
	if strings.HasPrefix(r.host, "*.") {
		return strings.HasSuffix(host, r.host[1:]) && len(host) > len(r.host)-1
	}
	if a, err := netip.ParseAddr(r.host); err == nil {
		b, err := netip.ParseAddr(host)
		return err == nil && a.Unmap() == b.Unmap()
	}
	return host == r.host
}

// urlPolicy holds the URL rules of creation and delivery.
type urlPolicy struct {
	allow    []hostRule
	resolver Resolver
}

// allowed reports whether the allow-list allows host at port: of a URL
// (check) or a connection (transport), either as written ("0443" is
// 443, as the dialer reads it; an entry's port is kept so).
func (p *urlPolicy) allowed(host, port string) bool {
	if n, err := strconv.Atoi(port); err == nil && len(port) > 1 && port[0] == '0' {
		port = strconv.Itoa(n)
	}
	for _, r := range p.allow {
		if r.match(host, port) {
			return true
		}
	}
	return false
}

func hostPort(u *url.URL) (string, string) {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return host, port
}

// check applies the URL rules to raw (ErrURLRefused): https, or http to
// an allow-listed host; no user information; a port, when given, of
// 1..65535; every address the host resolves to passes the workflow
// executor's address check, unless the host is allow-listed. A host that does not resolve and one that
// resolves to a forbidden address get the same answer (refusedHost),
// which names neither the address nor whether the host resolved: a
// client must not learn what an internal name resolves to. log gets the
// detail, at debug level (the host and the address, never the URL).
func (p *urlPolicy) check(ctx context.Context, raw string, log *slog.Logger) error {
	host, allowed, err := p.rules(raw)
	if err != nil || allowed {
		return err
	}
	ips, err := outbound.Resolve(ctx, p.resolver, host)
	if err != nil {
		log.Debug("push: webhook URL refused: its host does not resolve", "host", host, "err", err)
		return refusedHost(host)
	}
	for _, ip := range ips {
		if err := checkAddr(host, ip); err != nil {
			log.Debug("push: webhook URL refused: its host resolves to a special address", "host", host, "address", ip.Unmap())
			return refusedHost(host)
		}
	}
	return nil
}

// rules applies the rules of check that need no resolver to raw (the
// scheme, user information, host and port), returning the URL's host and
// whether the allow-list names it: check's first part, and each POST's
// (postUpdate), so that a config stored while the allow-list named its
// host is not posted over http, or to a private address, once it does
// not.
func (p *urlPolicy) rules(raw string) (string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return "", false, fmt.Errorf("%w: not an absolute URL", ErrURLRefused)
	}
	if u.User != nil {
		return "", false, fmt.Errorf("%w: user information in the URL (use authentication)", ErrURLRefused)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", false, fmt.Errorf("%w: no host", ErrURLRefused)
	}
	host, port := hostPort(u)
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		// url.Parse takes any digits for a port: 0 or 99999 was stored,
		// and every POST of the config failed to dial for the retry window.
		return "", false, fmt.Errorf("%w: port %s (want 1..65535)", ErrURLRefused, port)
	}
	allowed := p.allowed(host, port)
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowed:
	case u.Scheme == "http":
		return "", false, fmt.Errorf("%w: http to %s (https is required unless E2A_PUSH_ALLOW_HOSTS lists the host)", ErrURLRefused, host)
	default:
		return "", false, fmt.Errorf("%w: scheme %q", ErrURLRefused, u.Scheme)
	}
	return host, allowed, nil
}

// refusedHost is the refusal of a webhook host that does not resolve or
// resolves to a special address.
func refusedHost(host string) error {
	return fmt.Errorf("%w: host %s is not an allowed destination (private, loopback, link-local, reserved or unresolvable)",
		ErrURLRefused, host)
}

// checkAddr refuses every special address (outbound.Special): a webhook
// reaches one only when the allow-list names its host.
func checkAddr(host string, ip netip.Addr) error {
	if outbound.Special(ip) {
		return fmt.Errorf("destination address %s of %s is private, loopback, link-local or reserved", ip.Unmap(), host)
	}
	return nil
}

// transport is the HTTP transport of deliveries: no proxy, no redirects
// (the client's CheckRedirect), and a dialer that resolves the host
// itself, checks every address as check does and connects to a checked
// address only (the address is pinned for the connection: DNS cannot
// change it between check and use).
func (p *urlPolicy) transport(dialTimeout time.Duration) *http.Transport {
	return outbound.Transport(outbound.Config{
		Resolver: p.resolver,
		CheckFor: func(host, port string) outbound.Check {
			if p.allowed(host, port) {
				return nil
			}
			return checkAddr
		},
		DialTimeout:            dialTimeout,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    8,
		MaxResponseHeaderBytes: 16 << 10,
	})
}
