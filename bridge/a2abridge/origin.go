package a2abridge

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"golang.org/x/net/idna"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/redact"
)

// The interfaces the bridge calls.
//
// The bridge sends its credentials (E2A_UPSTREAM_API_KEY,
// E2A_UPSTREAM_HEADERS) on every call, to the interface of the agent's
// card it chose: the card, not the operator, names where that is. Only the
// interfaces on the configured upstream's host (its hostname, on any
// port: a gRPC interface is host:port beside the card's HTTP port; for an
// upstream on the bridge's machine, any of that machine's names:
// thisMachine; on a card read from another host, an interface naming
// such an address is called at the configured host: reachedAt) are used,
// and those of the hosts the operator allows (WithAllowedHosts); an
// https upstream's interface over plain http never is (its credentials
// would go in clear). A card read again (ReadCard) that names other hosts
// leaves the client where it is, with a warning.

// WithAllowedHosts allows the interfaces of the agent's card on the
// hosts of list (E2A_UPSTREAM_ALLOWED_HOSTS): comma-separated hostnames
// (any port) or host:port (that port alone, 1..65535, its number: "0443"
// is 443 in an entry and in a card's URL, as the dialer reads it; a
// bracketed IPv6 address with a port). The configured upstream's host is always allowed; "" allows no
// other.
func WithAllowedHosts(list string) Option {
	hosts, err := parseAllowedHosts(list)
	return func(o *config) error {
		if err != nil {
			return fmt.Errorf("%w: %w", bridge.ErrInvalidOption, err)
		}
		o.allowed = hosts
		return nil
	}
}

// allowedHost is an allowed host, on port (any when "").
type allowedHost struct{ host, port string }

func parseAllowedHosts(list string) ([]allowedHost, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var hosts []allowedHost
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		h, err := parseAllowedHost(e)
		if err != nil {
			return nil, fmt.Errorf("allowed host %q: %w (want host or host:port, comma-separated)", e, err)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

func parseAllowedHost(e string) (allowedHost, error) {
	if e == "" {
		return allowedHost{}, fmt.Errorf("empty")
	}
	if strings.ContainsAny(e, "/@?#% \t") {
		return allowedHost{}, fmt.Errorf("not a host name")
	}
	host, port := e, ""
	if strings.HasPrefix(e, "[") && strings.HasSuffix(e, "]") {
		e = e[1 : len(e)-1] // an IPv6 address without a port
		host = e
	} else if h, p, err := net.SplitHostPort(e); err == nil {
		host, port = h, normPort(p)
		if n, err := strconv.Atoi(port); err != nil || port != strconv.Itoa(n) || n < 1 || n > 65535 {
			return allowedHost{}, fmt.Errorf("port %q", p)
		}
	} else if strings.Count(e, ":") == 1 || strings.ContainsAny(e, "[]") {
		return allowedHost{}, err
	}
	host = strings.Trim(host, "[]")
	if host == "" || strings.ContainsAny(host, "[]") {
		return allowedHost{}, fmt.Errorf("not a host name")
	}
	if host = normHost(host); host == "" {
		return allowedHost{}, fmt.Errorf("not a host name")
	}
	return allowedHost{host: host, port: port}, nil
}

// normPort is a port as compared: its number when it is digits with
// leading zeros ("0443" is 443, as the dialer reads it), else as written.
func normPort(p string) string {
	if len(p) > 1 && p[0] == '0' && strings.Trim(p, "0123456789") == "" {
		if n, err := strconv.Atoi(p); err == nil {
			return strconv.Itoa(n)
		}
	}
	return p
}

// normHost is a host name as compared: lower case, without a trailing
// dot, and a name that is not ASCII in the IDNA form net/http and gRPC
// dial (idna.Lookup, as net/http's own): Unicode's lower case is not that
// form ("İcorp" lowers to "icorp", which is not where the call goes), so
// a card could name another host that compared as the upstream's. A name
// with no IDNA form is "" (no host the bridge can check).
func normHost(h string) string {
	for i := 0; i < len(h); i++ {
		if h[i] >= utf8.RuneSelf {
			a, err := idna.Lookup.ToASCII(h)
			if err != nil {
				return ""
			}
			h = a
			break
		}
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// endpoint is where an interface of a card points.
type endpoint struct {
	scheme     string // http, https; "" for a gRPC target
	host, port string // port: the one the call goes to (a scheme's default when the URL names none)
}

// where is the location of an endpoint as logs and errors show it:
// scheme and host, never the path (Client.Location's rule).
func where(iface *a2a.AgentInterface) string {
	if strings.Contains(iface.URL, "://") {
		return redact.URL(iface.URL)
	}
	if h, p, err := net.SplitHostPort(iface.URL); err == nil {
		return net.JoinHostPort(h, p) // a gRPC target: host:port
	}
	return "(a target that is not host:port)"
}

// grpcResolvers are gRPC target schemes that name no host (or not as a
// host): an interface of them is never used.
var grpcResolvers = map[string]bool{"unix": true, "unix-abstract": true, "xds": true, "dns": true, "passthrough": true}

// endpointOf reads where iface points; ok is false for a URL that names
// no host the bridge can check.
func endpointOf(iface *a2a.AgentInterface) (endpoint, bool) {
	raw := strings.TrimSpace(iface.URL)
	if !strings.Contains(raw, "://") {
		if iface.ProtocolBinding != a2a.TransportProtocolGRPC {
			return endpoint{}, false
		}
		return grpcTarget(raw)
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil {
		return endpoint{}, false
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case iface.ProtocolBinding == a2a.TransportProtocolGRPC && scheme == "dns" && u.Host != "":
		// dns://resolver/host:port: gRPC asks that DNS server, which the
		// card names, where the host is: it may answer any address.
		return endpoint{}, false
	case iface.ProtocolBinding == a2a.TransportProtocolGRPC && (scheme == "dns" || scheme == "passthrough"):
		// dns:///host:port: the host is the path's.
		return grpcTarget(strings.TrimPrefix(u.Path, "/"))
	case scheme != "http" && scheme != "https":
		return endpoint{}, false
	}
	port := normPort(u.Port())
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	host := normHost(u.Hostname())
	if host == "" {
		return endpoint{}, false
	}
	return endpoint{scheme: scheme, host: host, port: port}, true
}

// grpcTarget reads a gRPC target host[:port] (port 443 when none).
func grpcTarget(s string) (endpoint, bool) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = s, "443"
		if strings.Contains(s, ":") && !strings.HasPrefix(s, "[") {
			return endpoint{}, false
		}
	}
	if _, err := strconv.Atoi(port); err != nil || host == "" || grpcResolvers[strings.ToLower(host)] || strings.ContainsAny(host, "/@") {
		return endpoint{}, false
	}
	if host = normHost(strings.Trim(host, "[]")); host == "" {
		return endpoint{}, false
	}
	return endpoint{host: host, port: normPort(port)}, true
}

// origin is what the interfaces the bridge uses must match: the
// configured upstream's scheme and host, and the hosts allowed.
type origin struct {
	scheme, host string
	hostPort     string // the configured URL's host[:port], as given
	allowed      []allowedHost
}

func originOf(c *bridge.Client, allowed []allowedHost) origin {
	b := c.Base()
	return origin{scheme: strings.ToLower(b.Scheme), host: normHost(b.Hostname()), hostPort: b.Host, allowed: allowed}
}

// refusal says why iface is not used ("" when it is).
func (o origin) refusal(iface *a2a.AgentInterface) string {
	if iface == nil {
		return "no interface"
	}
	e, ok := endpointOf(iface)
	switch {
	case !ok:
		return "names no host the bridge can check"
	case o.scheme == "https" && e.scheme == "http":
		return "plain http, the upstream being https: the credentials would go in clear"
	case e.host == o.host, thisMachine(e.host) && thisMachine(o.host):
		return ""
	}
	for _, a := range o.allowed {
		if a.host == e.host && (a.port == "" || a.port == e.port) {
			return ""
		}
	}
	return "another host than the configured upstream's " + o.host
}

// reachedAt is iface moved to the configured upstream's host when it names
// where the agent listens (thisMachine: localhost, 0.0.0.0 …) and the card
// was read from another host (nil otherwise): an agent built from the
// SDKs' samples advertises the address it binds, which is not where the
// bridge reaches it (a container's name, a load balancer's), so its card's
// interface is called where its card was read: an HTTP interface at the
// configured scheme, host and port (its path kept), a gRPC one at the
// configured host on its own port. The credentials go to the configured
// host only.
func (o origin) reachedAt(iface *a2a.AgentInterface) *a2a.AgentInterface {
	if iface == nil {
		return nil
	}
	e, ok := endpointOf(iface)
	if !ok || !thisMachine(e.host) || thisMachine(o.host) {
		return nil
	}
	moved := *iface
	if iface.ProtocolBinding == a2a.TransportProtocolGRPC {
		moved.URL = net.JoinHostPort(o.host, e.port)
		return &moved
	}
	u, err := url.Parse(strings.TrimSpace(iface.URL))
	if err != nil {
		return nil
	}
	u.Scheme, u.Host = o.scheme, o.hostPort
	moved.URL = u.String()
	return &moved
}

// thisMachine reports whether host is one of the names a card gives for
// the machine the agent runs on: localhost, 127.0.0.1, ::1, or the
// unspecified address it listens on (0.0.0.0, ::), as agents built from
// the SDKs' samples advertise. An upstream configured by one of them is on
// the bridge's machine, and so is an interface naming another of them:
// that is the same host, on any port, as the configured one. (Other
// addresses of 127/8 stay hosts of their own.)
func thisMachine(host string) bool {
	switch host {
	case "localhost", "127.0.0.1", "::1", "0.0.0.0", "::":
		return true
	}
	return false
}

// split returns the interfaces of card the bridge may call, in the
// card's order, those of them moved to the configured host (reachedAt) as
// logs show them (from → to), and the refused ones (where: why).
func (o origin) split(card *a2a.AgentCard) (usable []*a2a.AgentInterface, moved, refused []string) {
	for _, iface := range card.SupportedInterfaces {
		if why := o.refusal(iface); why != "" {
			if to := o.reachedAt(iface); to != nil {
				usable = append(usable, to)
				moved = append(moved, where(iface)+" → "+where(to))
				continue
			}
			loc := "(none)"
			if iface != nil {
				loc = where(iface)
			}
			refused = append(refused, loc+": "+why)
			continue
		}
		usable = append(usable, iface)
	}
	return usable, moved, refused
}

// noInterface is the error of a card none of whose interfaces may be
// called.
func (o origin) noInterface(c *bridge.Client, refused []string) error {
	return fmt.Errorf("a2abridge: the agent card at %s names no interface the bridge may send its credentials to (%s); "+
		"the bridge calls the configured upstream's host %s, and another host only when E2A_UPSTREAM_ALLOWED_HOSTS names it "+
		"(an https upstream's interface over http never)", c.Location(), strings.Join(refused, "; "), o.host)
}

// maxCard bounds the agent card read (a2a-go's resolver reads it whole:
// a 30 MB card took an agent to 220 MB on every refresh).
const maxCard = 1 << 20

// errCardTooLarge is the error of a card over maxCard.
var errCardTooLarge = fmt.Errorf("the agent card is larger than 1 MiB (%d bytes), the most the bridge reads", maxCard)

// cardLimit is a transport whose answers' bodies fail past maxCard (one
// that says it is larger fails at once).
type cardLimit struct{ rt http.RoundTripper }

func (l cardLimit) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > maxCard {
		_ = resp.Body.Close()
		return nil, errCardTooLarge
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body}
	return resp, nil
}

// limitedBody fails once more than maxCard bytes were read.
type limitedBody struct {
	io.ReadCloser
	n int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.n += int64(n); b.n > maxCard {
		return 0, errCardTooLarge
	}
	return n, err
}

// cardHTTP is the client the card is read with: c's (credentials,
// redirects not followed), bounded by maxCard.
func cardHTTP(c *bridge.Client) *http.Client {
	h := c.HTTP()
	h.Transport = cardLimit{h.Transport}
	return h
}
