package a2av1

import (
	"bytes"
	"encoding/json"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
)

// AddCard makes the v0.3 agent card m (the host's, as JSON values) one card
// for both generations: the v1.0 supportedInterfaces (v1.0 JSON-RPC and
// HTTP+JSON at base + [Path], v0.3 JSON-RPC at base + /a2a, and gRPC at
// grpcURL unless it is ""), and each security scheme and requirement also
// in its v1.0 form, as the SDK's v0.3 compatibility layer writes them
// (v0.3 members kept: v0.3 clients read url, preferredTransport,
// protocolVersion and the v0.3 scheme members; v1.0 clients the others).
func AddCard(m map[string]any, base, grpcURL string) {
	b, _ := json.Marshal(m)
	v1, err := a2av0.NewAgentCardParser()(b)
	if err != nil {
		return
	}
	ifaces := []*a2a.AgentInterface{
		{URL: base + Path, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
		{URL: base + Path, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2a.Version},
		{URL: base + a2aproto.Path, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3"},
	}
	if grpcURL != "" {
		ifaces = append(ifaces, &a2a.AgentInterface{URL: grpcURL, ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: a2a.Version})
	}
	m["supportedInterfaces"] = ifaces
	if caps, ok := m["capabilities"].(map[string]any); ok {
		exts, _ := caps["extensions"].([]any)
		caps["extensions"] = append(exts, map[string]any{"uri": ReplayExtension,
			"description": "SubscribeToTask on a finished task replays it (the task, rebuilt from the durable streams) instead of UnsupportedOperationError"})
	}
	if len(v1.SecuritySchemes) == 0 {
		return
	}
	var v1Schemes map[string]map[string]any
	if b, err := json.Marshal(v1.SecuritySchemes); err == nil && json.Unmarshal(b, &v1Schemes) == nil {
		var v03 map[string]map[string]any
		if b, err := json.Marshal(m["securitySchemes"]); err == nil && json.Unmarshal(b, &v03) == nil {
			for name, v := range v1Schemes {
				for k, x := range v {
					if v03[name] != nil {
						v03[name][k] = x
					}
				}
			}
			m["securitySchemes"] = v03
		}
	}
	m["securityRequirements"] = v1.SecurityRequirements
}

// V1Card is the card m (AddCard's, for both generations) as an A2A v1.0
// client gets it: the v1.0 AgentCard alone, as the SDK's compatibility
// layer reads m, with m's supportedInterfaces, and none of the v0.3
// members (url, preferredTransport, protocolVersion, additionalInterfaces,
// capabilities.stateTransitionHistory, the v0.3 security members,
// AgentVault's authSchemes), which A2A v1.0's card schema does not allow.
func V1Card(m map[string]any) (*a2a.AgentCard, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	v1, err := a2av0.NewAgentCardParser()(b)
	if err != nil {
		return nil, err
	}
	if ifaces, ok := m["supportedInterfaces"].([]*a2a.AgentInterface); ok {
		v1.SupportedInterfaces = ifaces
	}
	if caps, ok := m["capabilities"].(map[string]any); ok {
		// v1.0's member, which the host may set apart from v0.3's
		// supportsAuthenticatedExtendedCard.
		ext, _ := caps["extendedAgentCard"].(bool)
		v1.Capabilities.ExtendedAgentCard = v1.Capabilities.ExtendedAgentCard || ext
	}
	return v1, nil
}

// ProtoScopes is card (a card as JSON values, or a value that encodes to
// one) with the scopes of every security requirement, the card's and its
// skills', in A2A v1.0's ProtoJSON form: a2a.proto's SecurityRequirement
// maps each scheme to a StringList, {"list": [...]} (specification §8.5's
// example), where the Go SDK writes a bare list, [...]. A requirement
// already in that form is kept.
func ProtoScopes(card any) (map[string]any, error) {
	b, err := json.Marshal(card)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers as written
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	protoRequirements(m)
	skills, _ := m["skills"].([]any)
	for _, s := range skills {
		if sm, ok := s.(map[string]any); ok {
			protoRequirements(sm)
		}
	}
	return m, nil
}

// protoRequirements rewrites m's securityRequirements (ProtoScopes).
func protoRequirements(m map[string]any) {
	reqs, _ := m["securityRequirements"].([]any)
	for _, r := range reqs {
		rm, _ := r.(map[string]any)
		schemes, _ := rm["schemes"].(map[string]any)
		for name, scopes := range schemes {
			switch v := scopes.(type) {
			case []any:
				schemes[name] = map[string]any{"list": v}
			case nil:
				schemes[name] = map[string]any{"list": []any{}}
			}
		}
	}
}
