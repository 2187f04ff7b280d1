package a2abridge

import (
	"bytes"
	"encoding/json"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// cardCompat is body, an agent card, with what the A2A SDKs of other
// languages write in a form a2a-go's card parsers (v1.0 and v0.3, which
// the bridge uses) do not read put in the form they do; body itself when
// nothing is to change or it is no JSON object (the parsers say why):
//
//   - A security requirement's scopes as A2A v1.0's ProtoJSON writes them
//     (a2a.proto: map<string, StringList>): {"list": [...]}, or {} for no
//     scope, as the Python and Java SDKs 1.x and the specification's own
//     example write it. a2a-go reads only a bare list (its issue #430), and
//     failed the whole card: the bridge could not start in front of such
//     an agent. Both forms are read, at the card's level and a skill's.
//   - An interface of supportedInterfaces without protocolVersion, as the
//     Python SDK 1.x's migration guide builds them (the samples' cards): a
//     v1.0 interface, as that SDK's client and the Java SDK take it.
//     a2a-go matched no transport to the empty version.
//   - A card without supportedInterfaces whose url has no
//     preferredTransport (the Python SDK's 0.2 releases, which predate the
//     field): JSON-RPC, the default of A2A v0.3 and of that SDK's client.
//     a2a-go's v0.3 parser found no interface in it.
//   - An oauth2 security scheme of more than one flow (OpenAPI's flows
//     object, which A2A v0.3 takes, allows them all; v1.0's is a oneof):
//     its client-credentials flow, the one the bridge can use
//     (ClientCredentialsOf), else the first of oauthFlowOrder. a2a-go
//     refused the whole card ("expected exactly one OAuth flow").
func cardCompat(body []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber() // the card's numbers pass through as they were written
	var card map[string]any
	if d.Decode(&card) != nil || card == nil {
		return body
	}
	changed := scopesCompat(card)
	if flowsCompat(card) {
		changed = true
	}
	skills, _ := card["skills"].([]any)
	for _, s := range skills {
		if skill, ok := s.(map[string]any); ok && scopesCompat(skill) {
			changed = true
		}
	}
	if ifaces, ok := card["supportedInterfaces"].([]any); ok {
		for _, i := range ifaces {
			iface, ok := i.(map[string]any)
			if v, _ := iface["protocolVersion"].(string); ok && v == "" {
				iface["protocolVersion"] = string(a2a.Version)
				changed = true
			}
		}
	} else if url, _ := card["url"].(string); url != "" && card["preferredTransport"] == nil {
		card["preferredTransport"] = string(a2a.TransportProtocolJSONRPC)
		changed = true
	}
	if !changed {
		return body
	}
	b, err := json.Marshal(card)
	if err != nil {
		return body
	}
	return b
}

// scopesCompat puts the scopes of o's securityRequirements written as
// ProtoJSON StringLists ({"list": [...]}, {}) as bare lists, and reports
// whether it changed any.
func scopesCompat(o map[string]any) bool {
	reqs, _ := o["securityRequirements"].([]any)
	changed := false
	for _, r := range reqs {
		req, _ := r.(map[string]any)
		schemes, _ := req["schemes"].(map[string]any)
		for name, v := range schemes {
			list, ok := v.(map[string]any)
			if !ok {
				continue
			}
			scopes, ok := list["list"]
			if !ok || scopes == nil {
				scopes = []any{}
			}
			schemes[name] = scopes
			changed = true
		}
	}
	return changed
}

// oauthFlowOrder is the order in which flowsCompat picks the flow an
// oauth2 scheme of several keeps: the client-credentials flow first.
var oauthFlowOrder = []string{"clientCredentials", "authorizationCode", "deviceCode", "password", "implicit"}

// flowsCompat keeps one flow of each oauth2 security scheme of card that
// has several (cardCompat), in v0.3's form ("type": "oauth2") and v1.0's
// ("oauth2SecurityScheme"), and reports whether it changed any.
func flowsCompat(card map[string]any) bool {
	schemes, _ := card["securitySchemes"].(map[string]any)
	changed := false
	for _, v := range schemes {
		scheme, _ := v.(map[string]any)
		if inner, ok := scheme["oauth2SecurityScheme"].(map[string]any); ok {
			scheme = inner
		} else if t, _ := scheme["type"].(string); t != "oauth2" {
			continue
		}
		flows, _ := scheme["flows"].(map[string]any)
		if len(flows) < 2 {
			continue
		}
		for _, name := range oauthFlowOrder {
			if f, ok := flows[name]; ok {
				scheme["flows"] = map[string]any{name: f}
				changed = true
				break
			}
		}
	}
	return changed
}
