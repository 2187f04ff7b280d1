package a2abridge

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// TestReachedAt: an interface naming where the agent listens, on a card
// read from another host, is called at that host: an HTTP one at the
// configured scheme, host and port with its own path (an https upstream
// keeps https), a gRPC one at the configured host on its own port; an
// interface on another real host, or any interface of an upstream on the
// bridge's machine, is not moved.
func TestReachedAt(t *testing.T) {
	for _, c := range []struct {
		upstream, url string
		binding       a2a.TransportProtocol
		want          string // "" = not moved
	}{
		{"http://weather:10000", "http://0.0.0.0:10000/", a2a.TransportProtocolJSONRPC, "http://weather:10000/"},
		{"http://weather:10000", "http://localhost:10000/a2a/v1", a2a.TransportProtocolHTTPJSON, "http://weather:10000/a2a/v1"},
		{"https://agent.example/team/card.json", "http://[::]:8000/rpc", a2a.TransportProtocolJSONRPC, "https://agent.example/rpc"},
		{"http://weather:10000", "0.0.0.0:50051", a2a.TransportProtocolGRPC, "weather:50051"},
		{"http://[fd00::5]:10000", "[::1]:50051", a2a.TransportProtocolGRPC, "[fd00::5]:50051"},
		{"http://weather:10000", "http://127.0.0.2:10000/", a2a.TransportProtocolJSONRPC, ""},
		{"http://weather:10000", "http://evil.example:10000/", a2a.TransportProtocolJSONRPC, ""},
		{"http://127.0.0.1:10000", "http://0.0.0.0:10000/", a2a.TransportProtocolJSONRPC, ""},
		{"http://localhost:10000", "[::1]:50051", a2a.TransportProtocolGRPC, ""},
	} {
		client, err := bridge.NewClient(c.upstream)
		if err != nil {
			t.Fatal(err)
		}
		got := originOf(client, nil).reachedAt(a2a.NewAgentInterface(c.url, c.binding))
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s on a card of %s: moved to %s, want it left", c.url, c.upstream, got.URL)
		case c.want != "" && (got == nil || got.URL != c.want || got.ProtocolBinding != c.binding):
			t.Errorf("%s on a card of %s: %+v, want %s", c.url, c.upstream, got, c.want)
		}
	}
}

// TestKeyHeaderOfV03Card: a v0.3 card's API key scheme (the form the
// Python SDK's 0.3 releases write: "type": "apiKey", "in": "header")
// gives its header, read through the v0.3 parser; its bearer scheme gives
// none.
func TestKeyHeaderOfV03Card(t *testing.T) {
	for _, c := range []struct{ schemes, want string }{
		{`"securitySchemes":{"key":{"type":"apiKey","in":"header","name":"X-API-Key"}},"security":[{"key":[]}]`, "X-API-Key"},
		{`"securitySchemes":{"key":{"type":"apiKey","in":"header","name":"X-API-Key"},"jwt":{"type":"http","scheme":"bearer"}},"security":[{"key":[]},{"jwt":[]}]`, ""},
		{`"securitySchemes":{"key":{"type":"apiKey","in":"cookie","name":"session"}},"security":[{"key":[]}]`, ""},
	} {
		card, err := parseEitherCard([]byte(`{"name":"v03","description":"d","version":"1","protocolVersion":"0.3.0",` +
			`"url":"http://127.0.0.1:9999/","preferredTransport":"JSONRPC","capabilities":{},"defaultInputModes":["text/plain"],` +
			`"defaultOutputModes":["text/plain"],"skills":[],` + c.schemes + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := keyHeader(card); got != c.want {
			t.Errorf("%s: key header %q, want %q", c.schemes, got, c.want)
		}
	}
}

// TestSplitNilInterface: a card listing a null interface (a malformed or
// hostile card's "supportedInterfaces":[null, …]) has it refused, the
// others split as usual, read from another host too (where an interface
// naming a local address is moved): it panicked there.
func TestSplitNilInterface(t *testing.T) {
	client, err := bridge.NewClient("http://weather:10000")
	if err != nil {
		t.Fatal(err)
	}
	card := &a2a.AgentCard{SupportedInterfaces: []*a2a.AgentInterface{nil,
		a2a.NewAgentInterface("http://0.0.0.0:10000/", a2a.TransportProtocolJSONRPC)}}
	usable, moved, refused := originOf(client, nil).split(card)
	if len(usable) != 1 || usable[0].URL != "http://weather:10000/" || len(moved) != 1 || len(refused) != 1 || refused[0] != "(none): no interface" {
		t.Errorf("split: usable %v, moved %q, refused %q", usable, moved, refused)
	}
}

// TestRefusalUnicodeHost: an interface whose host is not ASCII is the
// upstream's only when its IDNA form (the one dialed) is: a card's
// "İcorp.example" interface is not icorp.example's, though it lowers to
// it, on HTTP and gRPC; "bücher.example" is xn--bcher-kva.example's.
func TestRefusalUnicodeHost(t *testing.T) {
	for _, c := range []struct {
		upstream, iface string
		binding         a2a.TransportProtocol
		used            bool
	}{
		{"https://icorp.example", "https://\u0130corp.example/a2a", a2a.TransportProtocolJSONRPC, false},
		{"https://icorp.example", "\u0130corp.example:443", a2a.TransportProtocolGRPC, false},
		{"https://xn--bcher-kva.example", "https://b\u00fccher.example/a2a", a2a.TransportProtocolJSONRPC, true},
		{"https://icorp.example", "https://ICORP.example./a2a", a2a.TransportProtocolJSONRPC, true},
	} {
		client, err := bridge.NewClient(c.upstream)
		if err != nil {
			t.Fatal(err)
		}
		why := originOf(client, nil).refusal(&a2a.AgentInterface{URL: c.iface, ProtocolBinding: c.binding})
		if (why == "") != c.used {
			t.Errorf("upstream %s, interface %s: refusal %q, want used %v", c.upstream, c.iface, why, c.used)
		}
	}
}

// TestRefusalDNSAuthority: a gRPC interface dns://server/host:port names
// the DNS server gRPC asks where host is: the card's server may answer
// any address, so the bridge's credentials would go wherever it says,
// the host being the upstream's. Such an interface is refused; one
// without a server (dns:///host:port, the system's resolver) is used.
func TestRefusalDNSAuthority(t *testing.T) {
	client, err := bridge.NewClient("http://agent.example:10000")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		iface string
		used  bool
	}{
		{"dns:///agent.example:50051", true},
		{"passthrough:///agent.example:50051", true},
		{"dns://203.0.113.9:53/agent.example:50051", false},
		{"dns://127.0.0.1/agent.example:50051", false},
		{"DNS://evil.example/agent.example:50051", false},
	} {
		why := originOf(client, nil).refusal(&a2a.AgentInterface{URL: c.iface, ProtocolBinding: a2a.TransportProtocolGRPC})
		if (why == "") != c.used {
			t.Errorf("interface %s: refusal %q, want used %v", c.iface, why, c.used)
		}
	}
}

// TestAllowedHostPortLeadingZeros: a port with leading zeros is its
// number, in an E2A_UPSTREAM_ALLOWED_HOSTS entry and in a card's URL or
// gRPC target, as the dialer reads it (the push and workflow allow-lists'
// rule): "other.example:0443" was kept as written and matched no
// interface, nor the entry "other.example:443" https://other.example:0443/.
// A port that is not digits ("+443", which strconv.Atoi takes) is refused.
func TestAllowedHostPortLeadingZeros(t *testing.T) {
	client, err := bridge.NewClient("https://agent.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		allow, iface string
		binding      a2a.TransportProtocol
		used         bool
	}{
		{"other.example:0443", "https://other.example/a2a", a2a.TransportProtocolJSONRPC, true},
		{"other.example:00443", "https://other.example:443/a2a", a2a.TransportProtocolJSONRPC, true},
		{"other.example:443", "https://other.example:0443/a2a", a2a.TransportProtocolJSONRPC, true},
		{"other.example:050051", "other.example:50051", a2a.TransportProtocolGRPC, true},
		{"other.example:50051", "other.example:050051", a2a.TransportProtocolGRPC, true},
		{"other.example:0443", "https://other.example:0444/a2a", a2a.TransportProtocolJSONRPC, false},
		{"other.example:0443", "https://other.example:4430/a2a", a2a.TransportProtocolJSONRPC, false},
	} {
		allowed, err := parseAllowedHosts(c.allow)
		if err != nil {
			t.Fatalf("%s: %v", c.allow, err)
		}
		why := originOf(client, allowed).refusal(&a2a.AgentInterface{URL: c.iface, ProtocolBinding: c.binding})
		if (why == "") != c.used {
			t.Errorf("allowed %s, interface %s: refusal %q, want used %v", c.allow, c.iface, why, c.used)
		}
		token := ClientCredentials{TokenURL: strings.Replace(c.iface, "/a2a", "/token", 1)}
		if c.binding == a2a.TransportProtocolJSONRPC {
			if err := token.Allowed(client, c.allow); (err == nil) != c.used {
				t.Errorf("allowed %s, token URL %s: %v, want allowed %v", c.allow, token.TokenURL, err, c.used)
			}
		}
	}
	for _, bad := range []string{"other.example:+443", "other.example:00", "other.example:065536"} {
		if _, err := parseAllowedHosts(bad); err == nil {
			t.Errorf("%s taken", bad)
		}
	}
}
