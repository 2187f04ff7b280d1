package a2a

import (
	"encoding/json"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// InteractionVersion is the version of the trpc interaction-spec
// extension ([InteractionExtension], a2a-interaction-spec-trpc.md) the
// package's renderers implement.
const InteractionVersion = "0.1"

// Card is the A2A v0.3 agent card of the endpoint under in.Base (Path),
// as JSON values, with the AgentVault profile's authSchemes (in.Auth's
// methods; "none" alone without authentication) and in.Auth's security
// schemes and requirements. It declares v0.3's authenticated extended
// card only with authentication (in.Authentication): v0.3 names it for
// authentication, and its TCK requires the method to refuse a call
// without credentials, which nobody has with authentication off. Package
// protocols/a2av1 makes it the card of both generations.
func Card(in host.CardInfo) map[string]any {
	card := a2a.AgentCard{
		Name:                              "E2A Pipeline",
		Description:                       "Durable, horizontally scaled agent traffic on NATS JetStream: A2A v0.3 and the AgentVault profile on one JSON-RPC endpoint.",
		URL:                               in.Base + Path,
		PreferredTransport:                a2a.TransportProtocolJSONRPC,
		ProtocolVersion:                   "0.3.0",
		Version:                           in.Version,
		SupportsAuthenticatedExtendedCard: in.ExtendedCard && in.Authentication,
		Capabilities: a2a.AgentCapabilities{
			Streaming:              true,
			PushNotifications:      in.Push,
			StateTransitionHistory: true,
			Extensions: []a2a.AgentExtension{{
				URI:    InteractionExtension,
				Params: map[string]any{"version": InteractionVersion},
			}},
		},
		DefaultInputModes:  normalizer.A2AInputModes,
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills: []a2a.AgentSkill{{
			ID: "pipeline", Name: "Agent pools",
			Description: "Routes each request to an agent pool (" + in.DefaultPool + " by default) and streams its answer.",
			Tags:        []string{"agents", "streaming"},
		}},
	}
	b, _ := json.Marshal(card)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["authSchemes"] = []host.CardAuthMethod{{Scheme: "none", Description: "No authentication"}}
	if in.Auth.Schemes != nil {
		m["securitySchemes"] = in.Auth.Schemes
		m["security"] = in.Auth.Requirements
	}
	if len(in.Auth.Methods) > 0 {
		m["authSchemes"] = in.Auth.Methods
	}
	return m
}
