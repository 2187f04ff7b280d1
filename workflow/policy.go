package workflow

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/outbound"
)

// APIRule is one entry of the API knowledge base: which hosts, methods and
// paths a set of principals may call.
type APIRule struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	// BaseURL is informative (capabilities); Hosts decide.
	BaseURL string `json:"baseUrl,omitempty"`
	// Hosts are host[:port] patterns: "api.example.com" (any port),
	// "api.example.com:8443", "*.example.com" (subdomains only),
	// "127.0.0.1", "[::1]:8080", or "*" (any host; addresses still pass
	// the private-address check). A port is a number of 1..65535 ("0443"
	// is 443, as in a URL) or "*"; a name must have no empty label
	// ("*..", "a..b" are refused).
	Hosts []string `json:"hosts"`
	// Methods allowed; empty means all of [Methods].
	Methods []string `json:"methods,omitempty"`
	// Paths allowed: exact ("/count"), prefix ("/users*") or a path.Match
	// pattern ("/users/*/orders"); empty means every path.
	Paths []string `json:"paths,omitempty"`
	// Principals allowed; empty means everyone.
	Principals []string `json:"principals,omitempty"`
	// Operations (optional, informative) lists endpoints for capabilities.
	Endpoints []map[string]any `json:"endpoints,omitempty"`

	hosts []hostPattern
}

// PrincipalPolicy restricts one principal.
type PrincipalPolicy struct {
	// Operations the principal may use; empty means the whole catalog.
	Operations []string `json:"operations,omitempty"`
	// MaxOperations and MaxExecutionTimeMs override the global limits
	// (0: the global value).
	MaxOperations      int   `json:"maxOperations,omitempty"`
	MaxExecutionTimeMs int64 `json:"maxExecutionTime,omitempty"`
}

// KnowledgeBase describes a knowledge base listed in capabilities.
type KnowledgeBase struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
}

// Policy is the API knowledge base and the permissions of principals. The
// zero value allows no API call and every operation type.
type Policy struct {
	APIs []APIRule `json:"apis,omitempty"`
	// Principals by id; the entry "*" applies to principals without one.
	Principals map[string]PrincipalPolicy `json:"principals,omitempty"`
	// AllowedNets lists networks (CIDR) that private, loopback or
	// link-local destinations may be in. Without them such addresses are
	// refused, except an IP literal named exactly by a host pattern.
	AllowedNets    []string        `json:"allowedNets,omitempty"`
	KnowledgeBases []KnowledgeBase `json:"knowledgeBases,omitempty"`

	nets []netip.Prefix
}

// LoadPolicy reads a policy from a JSON file (see [Policy]).
func LoadPolicy(file string) (*Policy, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("workflow: policy: %w", err)
	}
	var p Policy
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("workflow: policy %s: %w", file, err)
	}
	return &p, p.compile()
}

// AllowHosts adds a rule letting everyone call the given host[:port]
// patterns with any method and path (E2A_WORKFLOW_ALLOWED_HOSTS).
func (p *Policy) AllowHosts(patterns ...string) error {
	var hs []string
	for _, s := range patterns {
		if s = strings.TrimSpace(s); s != "" {
			hs = append(hs, s)
		}
	}
	if len(hs) == 0 {
		return nil
	}
	p.APIs = append(p.APIs, APIRule{ID: "allowed-hosts", Description: "hosts allowed for everyone by configuration", Hosts: hs})
	return p.compile()
}

// AllowNets adds networks (CIDR) private destinations may be in.
func (p *Policy) AllowNets(cidrs ...string) error {
	for _, s := range cidrs {
		if s = strings.TrimSpace(s); s != "" {
			p.AllowedNets = append(p.AllowedNets, s)
		}
	}
	return p.compile()
}

func (p *Policy) compile() error {
	for i := range p.APIs {
		r := &p.APIs[i]
		r.hosts = r.hosts[:0]
		if len(r.Hosts) == 0 {
			return fmt.Errorf("workflow: policy: api %q has no hosts", r.ID)
		}
		for _, h := range r.Hosts {
			hp, err := parseHostPattern(h)
			if err != nil {
				return fmt.Errorf("workflow: policy: api %q: %w", r.ID, err)
			}
			r.hosts = append(r.hosts, hp)
		}
		for j, m := range r.Methods {
			r.Methods[j] = strings.ToUpper(m)
		}
	}
	p.nets = p.nets[:0]
	for _, s := range p.AllowedNets {
		pr, err := netip.ParsePrefix(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil {
				return fmt.Errorf("workflow: policy: allowed net %q: %w", s, err)
			}
			pr = netip.PrefixFrom(a, a.BitLen())
		}
		p.nets = append(p.nets, pr.Masked())
	}
	return nil
}

// hostPattern is one host[:port] pattern.
type hostPattern struct {
	host     string // lower case; "*" any; "*.x" subdomains of x
	port     string // "" any
	literal  netip.Addr
	isIPAddr bool
}

func parseHostPattern(s string) (hostPattern, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return hostPattern{}, fmt.Errorf("empty host pattern")
	}
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		h, pt, err := net.SplitHostPort(s)
		if err != nil {
			h = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		}
		host, port = h, pt
	case strings.Count(s, ":") == 1:
		h, pt, err := net.SplitHostPort(s)
		if err != nil {
			return hostPattern{}, fmt.Errorf("host pattern %q: %v", s, err)
		}
		host, port = h, pt
	}
	if port == "*" {
		port = ""
	} else if port != "" {
		// "0443" is 443, as the dialer reads it (and normHost a URL's).
		n, err := strconv.Atoi(port)
		if err != nil || strings.Trim(port, "0123456789") != "" || n < 1 || n > 65535 {
			return hostPattern{}, fmt.Errorf("host pattern %q: the port must be 1..65535 or *", s)
		}
		port = strconv.Itoa(n)
	}
	host = strings.TrimSuffix(host, ".")
	hp := hostPattern{host: host, port: port}
	if a, err := netip.ParseAddr(host); err == nil {
		hp.literal, hp.isIPAddr = a.Unmap(), true
	} else if host != "*" && (strings.Contains(host, "*") && !strings.HasPrefix(host, "*.") || strings.Count(host, "*") > 1) {
		return hostPattern{}, fmt.Errorf("host pattern %q: only a leading *. is supported", s)
	} else if host != "*" && slices.Contains(strings.Split(strings.TrimPrefix(host, "*."), "."), "") {
		// "*..", "a..b": no host a URL reaches has one.
		return hostPattern{}, fmt.Errorf("host pattern %q: a name with an empty label", s)
	}
	return hp, nil
}

func (hp hostPattern) match(host, port string) bool {
	if hp.port != "" && hp.port != port {
		return false
	}
	switch {
	case hp.host == "*":
		return true
	case hp.isIPAddr:
		a, err := netip.ParseAddr(host)
		return err == nil && a.Unmap() == hp.literal
	case strings.HasPrefix(hp.host, "*."):
		return strings.HasSuffix(host, hp.host[1:]) && len(host) > len(hp.host)-1
	}
	return host == hp.host
}

// normHost is the host u names, lower case without a final dot, and its
// port: as written, but without leading zeros ("0443" is 443, as the
// dialer reads it; a host pattern's is kept so), or the scheme's.
func normHost(u *url.URL) (host, port string) {
	host = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	port = u.Port()
	if n, err := strconv.Atoi(port); err == nil && len(port) > 1 && port[0] == '0' {
		port = strconv.Itoa(n)
	} else if port == "" {
		if u.Scheme == "https" {
			port = "443"
		} else {
			port = "80"
		}
	}
	return host, port
}

func principalIn(list []string, principal string) bool {
	return len(list) == 0 || in(list, principal) || in(list, "*")
}

// dotSegment reports whether the escaped path p has a "." or ".." segment,
// plain or percent-encoded (RFC 3986 §5.2.4 removes both, and a server may
// decode %2E first), also one that an encoded slash or backslash delimits
// once decoded: a server or proxy decoding %2F (or reading \ as / as
// Windows servers do) before it resolves dot segments serves
// /public/..%2Fadmin, a referenced "../admin", as /admin.
func dotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		d, err := url.PathUnescape(seg)
		if err != nil {
			continue
		}
		for part := range strings.FieldsFuncSeq(d, func(r rune) bool { return r == '/' || r == '\\' }) {
			if part == "." || part == ".." {
				return true
			}
		}
	}
	return false
}

func pathAllowed(patterns []string, p string) bool {
	if len(patterns) == 0 {
		return true
	}
	if p == "" {
		p = "/"
	}
	for _, pt := range patterns {
		if strings.HasSuffix(pt, "*") && !strings.Contains(pt[:len(pt)-1], "*") {
			if strings.HasPrefix(p, pt[:len(pt)-1]) {
				return true
			}
			continue
		}
		if ok, _ := path.Match(pt, p); ok {
			return true
		}
	}
	return false
}

// checkRequest decides whether principal may send method to u. checkPath
// false skips the path (used before references are resolved).
func (p *Policy) checkRequest(principal, method string, u *url.URL, checkPath bool) *Error {
	if p == nil {
		return permissionError("no API is allowed (empty knowledge base)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return permissionError("scheme %q is not allowed", u.Scheme)
	}
	if checkPath && dotSegment(u.EscapedPath()) {
		// A server or proxy resolving it would serve another path than
		// the one the rules allowed (/public/../admin).
		return permissionError("%s has a \".\" or \"..\" path segment (plain or percent-encoded), which is not allowed", redactURL(u))
	}
	host, port := normHost(u)
	// A private, loopback or other special IP literal outside AllowedNets
	// is allowed only by a rule of this principal that names it (and its
	// port, when the pattern has one): "*" or a name pattern does not open
	// it, nor does another principal's rule naming it.
	lit, err := netip.ParseAddr(host)
	explicitOnly := err == nil && outbound.Special(lit.Unmap()) && !p.inNets(lit.Unmap())
	hostKnown, special := false, false
	for _, r := range p.APIs {
		if !principalIn(r.Principals, principal) {
			continue
		}
		hm := false
		for _, hp := range r.hosts {
			if hp.match(host, port) {
				if explicitOnly && !hp.isIPAddr {
					special = true
					continue
				}
				hm = true
				break
			}
		}
		if !hm {
			continue
		}
		hostKnown = true
		if len(r.Methods) > 0 && !in(r.Methods, method) {
			continue
		}
		if checkPath && !pathAllowed(r.Paths, u.EscapedPath()) {
			continue
		}
		return nil
	}
	if hostKnown {
		return permissionError("%s %s is not allowed by the API knowledge base", method, redactURL(u))
	}
	if special {
		return permissionError("destination address %s is private, loopback, link-local or reserved, and no rule of this principal names it", u.Host)
	}
	return permissionError("host %s is not in the API knowledge base", u.Host)
}

// explicitIP reports whether some rule names ip exactly (an IP literal
// pattern), which allows it even when it is private.
func (p *Policy) explicitIP(ip netip.Addr) bool {
	for _, r := range p.APIs {
		for _, hp := range r.hosts {
			if hp.isIPAddr && hp.literal == ip {
				return true
			}
		}
	}
	return false
}

// CheckAddr decides whether a connection may go to ip, reached through
// host (the URL's host name or literal). Public addresses are allowed;
// private, loopback, link-local, unspecified, multicast and other special
// addresses only when they are in AllowedNets or when host is the IP
// literal itself and a rule names that literal.
func (p *Policy) CheckAddr(host string, ip netip.Addr) error {
	if err := p.checkAddr(host, ip); err != nil {
		return err
	}
	return nil
}

func (p *Policy) checkAddr(host string, ip netip.Addr) *Error {
	ip = ip.Unmap()
	if !outbound.Special(ip) {
		return nil
	}
	if p != nil {
		if p.inNets(ip) {
			return nil
		}
		if h, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && h.Unmap() == ip && p.explicitIP(ip) {
			return nil
		}
	}
	return permissionError("destination address %s of %s is private, loopback, link-local or reserved", ip, host)
}

// inNets reports whether ip is in AllowedNets.
func (p *Policy) inNets(ip netip.Addr) bool {
	for _, n := range p.nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// allowedOperation reports whether principal may use operation type typ.
func (p *Policy) allowedOperation(principal, typ string) bool {
	pp, ok := p.principal(principal)
	if !ok || len(pp.Operations) == 0 {
		return true
	}
	return in(pp.Operations, typ)
}

func (p *Policy) principal(id string) (PrincipalPolicy, bool) {
	if p == nil || p.Principals == nil {
		return PrincipalPolicy{}, false
	}
	if pp, ok := p.Principals[id]; ok {
		return pp, true
	}
	pp, ok := p.Principals["*"]
	return pp, ok
}

// maxExecutionTime is principal's maxExecutionTime: its own
// (PrincipalPolicy.MaxExecutionTimeMs), else l's.
func (p *Policy) maxExecutionTime(principal string, l Limits) time.Duration {
	if pp, ok := p.principal(principal); ok && pp.MaxExecutionTimeMs > 0 {
		return time.Duration(pp.MaxExecutionTimeMs) * time.Millisecond
	}
	return l.MaxExecutionTime
}

// apisFor lists the rules a principal may use.
func (p *Policy) apisFor(principal string) []APIRule {
	if p == nil {
		return nil
	}
	var out []APIRule
	for _, r := range p.APIs {
		if principalIn(r.Principals, principal) {
			out = append(out, r)
		}
	}
	return out
}

// redactURL writes a URL without user information or query values (a
// query may hold tokens a server echoed into a redirect).
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		q := c.Query()
		for k := range q {
			q[k] = []string{"…"}
		}
		c.RawQuery = q.Encode()
	}
	c.Fragment = ""
	return c.String()
}
