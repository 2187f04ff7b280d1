package a2abridge_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
)

// TestClientCredentialsOf: the client-credentials flow a card offers, in
// v1.0's JSON and v0.3's: the oauth2 scheme its security requirements name
// first (not the first by name), with that requirement's scopes; by name
// when no requirement names one; none (ErrNoClientCredentials) for a card
// of other schemes, or whose oauth2 scheme has only other flows, or no
// token URL.
func TestClientCredentialsOf(t *testing.T) {
	const iface = `"supportedInterfaces":[{"url":"https://agent.example/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]`
	cc := func(url string) string {
		return `{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"` + url + `","scopes":{"a":"","b":""}}}}}`
	}
	for _, c := range []struct {
		name, card, scheme, url string
		scopes                  []string
	}{
		{"v1.0, the required one", `{"name":"x",` + iface + `,"securitySchemes":{"a-first":` + cc("https://idp.example/a") +
			`,"main":` + cc("https://idp.example/token") + `,"key":{"apiKeySecurityScheme":{"location":"header","name":"X-Key"}}},` +
			`"securityRequirements":[{"schemes":{"key":{"list":[]}}},{"schemes":{"main":{"list":["agents","read"]}}}]}`,
			"main", "https://idp.example/token", []string{"agents", "read"}},
		{"v1.0, no requirement", `{"name":"x",` + iface + `,"securitySchemes":{"z":` + cc("https://idp.example/z") +
			`,"b":` + cc("https://idp.example/b") + `}}`, "b", "https://idp.example/b", nil},
		{"v0.3", `{"name":"x","url":"https://agent.example/a2a","preferredTransport":"JSONRPC","protocolVersion":"0.3.0",` +
			`"securitySchemes":{"oauth":{"type":"oauth2","flows":{"clientCredentials":{"tokenUrl":"https://idp.example/v03","scopes":{}}}}},` +
			`"security":[{"oauth":["agents"]}]}`, "oauth", "https://idp.example/v03", []string{"agents"}},
		{"bearer only", `{"name":"x",` + iface + `,"securitySchemes":{"bearer":{"httpAuthSecurityScheme":{"scheme":"Bearer"}}}}`, "", "", nil},
		{"authorization code only", `{"name":"x",` + iface + `,"securitySchemes":{"o":{"oauth2SecurityScheme":{"flows":` +
			`{"authorizationCode":{"authorizationUrl":"https://idp.example/auth","tokenUrl":"https://idp.example/t","scopes":{}}}}}}}`, "", "", nil},
		{"no token URL", `{"name":"x",` + iface + `,"securitySchemes":{"o":` + cc("") + `}}`, "", "", nil},
		{"no schemes", `{"name":"x",` + iface + `}`, "", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			card, err := a2abridge.ParseCard([]byte(c.card))
			if err != nil {
				t.Fatal(err)
			}
			got, err := a2abridge.ClientCredentialsOf(card)
			if c.scheme == "" {
				if !errors.Is(err, a2abridge.ErrNoClientCredentials) {
					t.Errorf("got %+v, %v; want ErrNoClientCredentials", got, err)
				}
				return
			}
			if err != nil || got.Scheme != c.scheme || got.TokenURL != c.url || !slices.Equal(got.Scopes, c.scopes) {
				t.Errorf("got %+v, %v; want scheme %s, token URL %s, scopes %v", got, err, c.scheme, c.url, c.scopes)
			}
		})
	}
}

// TestClientCredentialsAllowed: the token endpoint a card names gets the
// client secret only on the agent's host (any port; any of this machine's
// names for an agent on it) or an allowed one (its port, if the entry
// names one), never over http for an https agent. Hosts are compared as
// dialed: a Unicode name by its IDNA form (a lower-cased "İcorp" passed
// for icorp, and the call went to xn--icorp-7fd).
func TestClientCredentialsAllowed(t *testing.T) {
	for _, c := range []struct {
		agent, token, allowed string
		ok, otherHost         bool // otherHost: refused for its host alone (ErrTokenHostNotAllowed)
	}{
		{"https://agent.example.com", "https://agent.example.com:8443/oauth/token", "", true, false},
		{"https://agent.example.com", "https://idp.example.com/token", "", false, true},
		{"https://agent.example.com", "https://idp.example.com/token", "idp.example.com", true, false},
		{"https://agent.example.com", "https://idp.example.com/token", "idp.example.com:8443", false, true},
		{"https://agent.example.com", "https://IDP.example.com.:8443/token", "idp.example.com:8443", true, false},
		{"https://agent.example.com", "http://agent.example.com/token", "", false, false},
		{"http://127.0.0.1:9999", "http://localhost:8080/token", "", true, false},
		{"http://127.0.0.1:9999", "http://127.0.0.2:8080/token", "", false, true},
		{"https://agent.example.com", "https://user@agent.example.com/token", "", false, false},
		{"https://agent.example.com", "/token", "", false, false},
		// A name that is not ASCII is compared in the form dialed (IDNA):
		// "İcorp" lowers to "icorp" but is dialed at xn--icorp-7fd.
		{"https://icorp.example", "https://\u0130corp.example/token", "", false, true},
		{"https://icorp.example", "https://idp.example/token", "\u0130dp.example", false, true},
		{"https://bücher.example", "https://xn--bcher-kva.example/token", "", true, false},
		{"https://agent.example", "https://xn--bcher-kva.example/token", "Bücher.example", true, false},
	} {
		client, err := bridge.NewClient(c.agent)
		if err != nil {
			t.Fatal(err)
		}
		err = a2abridge.ClientCredentials{TokenURL: c.token}.Allowed(client, c.allowed)
		if ok := err == nil; ok != c.ok || (!ok && !errors.Is(err, a2abridge.ErrTokenURLRefused)) ||
			errors.Is(err, a2abridge.ErrTokenHostNotAllowed) != c.otherHost {
			t.Errorf("agent %s, token endpoint %s, allowed %q: %v; want allowed %v, for its host %v", c.agent, c.token, c.allowed, err, c.ok, c.otherHost)
		}
	}
	client, _ := bridge.NewClient("https://agent.example.com")
	if err := (a2abridge.ClientCredentials{TokenURL: "https://idp.example.com/t"}).Allowed(client, "idp/x"); !errors.Is(err, bridge.ErrInvalidOption) {
		t.Errorf("an allowed list it cannot read: %v, want ErrInvalidOption", err)
	}
}

// TestClientCredentialsOfSeveralFlows: an oauth2 scheme with more than one
// flow (OpenAPI's flows object, as v0.3 cards write it; in v1.0's form
// too) is read with its client-credentials flow: a2a-go refused the whole
// card, so the bridge could not start in front of such an agent.
func TestClientCredentialsOfSeveralFlows(t *testing.T) {
	const flows = `"flows":{"authorizationCode":{"authorizationUrl":"https://idp.example/auth","tokenUrl":"https://idp.example/code",` +
		`"scopes":{}},"clientCredentials":{"tokenUrl":"https://idp.example/token","scopes":{"agents":""}}}`
	for name, card := range map[string]string{
		"v0.3": `{"name":"x","url":"https://agent.example/a2a","preferredTransport":"JSONRPC","protocolVersion":"0.3.0",` +
			`"securitySchemes":{"oauth":{"type":"oauth2",` + flows + `}},"security":[{"oauth":["agents"]}]}`,
		"v1.0": `{"name":"x","supportedInterfaces":[{"url":"https://agent.example/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],` +
			`"securitySchemes":{"oauth":{"oauth2SecurityScheme":{` + flows + `}}},"securityRequirements":[{"schemes":{"oauth":{"list":["agents"]}}}]}`,
	} {
		card, err := a2abridge.ParseCard([]byte(card))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got, err := a2abridge.ClientCredentialsOf(card)
		if err != nil || got.TokenURL != "https://idp.example/token" || !slices.Equal(got.Scopes, []string{"agents"}) {
			t.Errorf("%s: %+v, %v; want the client-credentials flow's token URL, scopes [agents]", name, got, err)
		}
	}
}
