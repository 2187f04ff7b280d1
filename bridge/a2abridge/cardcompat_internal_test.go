package a2abridge

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Cards as the A2A SDKs of other languages write them, where a2a-go's
// parsers did not read them (cardCompat).
const (
	// javaCard: the Java SDK 1.x (JsonUtil's SecurityRequirement
	// adapter writes each scheme's scopes as {"list": [...]}), at the
	// card's level and a skill's.
	javaCard = `{"name":"java agent","description":"d","version":"1","supportedInterfaces":[` +
		`{"url":"http://agent.example:8080","protocolBinding":"JSONRPC","protocolVersion":"1.0","tenant":""}],` +
		`"capabilities":{"streaming":true},"defaultInputModes":["text"],"defaultOutputModes":["text"],` +
		`"securitySchemes":{"oauth":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://auth.example/token","scopes":{"read":"r","write":"w"}}}}},` +
		`"key":{"apiKeySecurityScheme":{"location":"header","name":"X-API-Key"}}},` +
		`"securityRequirements":[{"schemes":{"oauth":{"list":["read","write"]}}},{"schemes":{"key":{"list":[]}}}],` +
		`"skills":[{"id":"s","name":"s","description":"s","tags":["t"],"securityRequirements":[{"schemes":{"oauth":{"list":["read"]}}}]}]}`

	// pythonCard: the Python SDK 1.x as its samples build the card
	// (interfaces without protocolVersion, a2a-samples issue 599, which
	// kept a top-level protocolVersion), MessageToDict writing a scheme
	// without scopes as {}.
	pythonCard = `{"name":"python agent","description":"d","version":"1","protocolVersion":"0.3",` +
		`"supportedInterfaces":[{"url":"http://127.0.0.1:9999","protocolBinding":"JSONRPC"}],` +
		`"capabilities":{"streaming":true},"defaultInputModes":["text"],"defaultOutputModes":["text"],` +
		`"securitySchemes":{"key":{"apiKeySecurityScheme":{"location":"header","name":"X-Agent-Key"}}},` +
		`"securityRequirements":[{"schemes":{"key":{}}}],"skills":[]}`

	// python02Card: the Python SDK 0.2.5, before preferredTransport.
	python02Card = `{"name":"old agent","description":"d","version":"1","url":"http://127.0.0.1:9999/",` +
		`"protocolVersion":"0.2.5","capabilities":{"streaming":true},"defaultInputModes":["text"],` +
		`"defaultOutputModes":["text"],"skills":[{"id":"s","name":"s","description":"s","tags":["t"]}]}`
)

// TestCardCompat: each card parses (a2a-go's parsers did not read it as
// it is: their errors in the comments), with its security requirements' scopes and its interfaces as
// the agent meant them; a card a2a-go reads as it is comes back as it is.
func TestCardCompat(t *testing.T) {
	for _, c := range []struct {
		name      string
		card      string
		reqs      a2a.SecurityRequirementsOptions
		skillReqs a2a.SecurityRequirementsOptions
		iface     a2a.AgentInterface
		keyHeader string
	}{
		// "cannot unmarshal object into Go value of type a2a.SecuritySchemeScopes"
		{"java 1.x", javaCard,
			a2a.SecurityRequirementsOptions{{"oauth": {"read", "write"}}, {"key": {}}},
			a2a.SecurityRequirementsOptions{{"oauth": {"read"}}},
			a2a.AgentInterface{URL: "http://agent.example:8080", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "1.0"},
			""},
		// the same, and "no compatible transports found: [JSONRPC_]"
		{"python 1.x", pythonCard, a2a.SecurityRequirementsOptions{{"key": {}}}, nil,
			a2a.AgentInterface{URL: "http://127.0.0.1:9999", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "1.0"},
			"X-Agent-Key"},
		// "the card names no interface"
		{"python 0.2", python02Card, nil, nil,
			a2a.AgentInterface{URL: "http://127.0.0.1:9999/", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.2.5"},
			""},
	} {
		t.Run(c.name, func(t *testing.T) {
			card, err := parseEitherCard([]byte(c.card))
			if err != nil {
				t.Fatal(err)
			}
			if len(card.SupportedInterfaces) != 1 || *card.SupportedInterfaces[0] != c.iface {
				t.Errorf("interfaces %+v, want %+v", card.SupportedInterfaces, c.iface)
			}
			if !reflect.DeepEqual(card.SecurityRequirements, c.reqs) && (len(c.reqs) > 0 || len(card.SecurityRequirements) > 0) {
				t.Errorf("security requirements %v, want %v", card.SecurityRequirements, c.reqs)
			}
			if c.skillReqs != nil && !reflect.DeepEqual(card.Skills[0].SecurityRequirements, c.skillReqs) {
				t.Errorf("the skill's security requirements %v, want %v", card.Skills[0].SecurityRequirements, c.skillReqs)
			}
			if h := keyHeader(card); h != c.keyHeader {
				t.Errorf("key header %q, want %q", h, c.keyHeader)
			}
			if card, err := parseCard([]byte(c.card)); err == nil && card.SupportedInterfaces[0].ProtocolVersion != "" {
				t.Errorf("a2a-go's parsers read the card as it is: the case proves nothing")
			}
		})
	}

	// a2a-go's own card (its bare scope lists), and what is no card, as they are.
	own, err := json.Marshal(&a2a.AgentCard{Name: "go", SupportedInterfaces: []*a2a.AgentInterface{
		a2a.NewAgentInterface("http://127.0.0.1:1", a2a.TransportProtocolJSONRPC)},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"oauth": {"read"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range [][]byte{own, []byte(`[1]`), []byte(`null`), []byte(`{"url":`), []byte(`{"securityRequirements":"x"}`)} {
		if got := cardCompat(body); &got[0] != &body[0] {
			t.Errorf("cardCompat(%s) = %s, want the body itself", body, got)
		}
	}
}

// FuzzCardCompat: cardCompat never panics, returns JSON for a JSON object,
// and is done once: what it returns, it returns as it is.
func FuzzCardCompat(f *testing.F) {
	for _, c := range []string{javaCard, pythonCard, python02Card, `{"securityRequirements":[{"schemes":{"a":{"list":null}}}]}`,
		`{"supportedInterfaces":[null,{"protocolVersion":null}]}`, `{"skills":[1,{"securityRequirements":[{"schemes":{"b":{}}}]}]}`} {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out := cardCompat(body)
		if bytes.Equal(out, body) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("cardCompat(%q) = %q: no JSON", body, out)
		}
		if again := cardCompat(out); !bytes.Equal(again, out) {
			t.Fatalf("cardCompat twice: %q, then %q", out, again)
		}
	})
}
