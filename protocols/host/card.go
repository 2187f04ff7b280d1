package host

import (
	"errors"
	"net/http"
)

// The card role: a protocol that has an agent card (A2A's, of both its
// generations) writes it from what the host knows, and the host serves
// it. The host mounts the card at /.well-known/agent-card.json and
// /.well-known/agent.json, beside each of the protocol's HTTP paths
// (<path>/.well-known/agent-card.json), and under each pool's path; it
// hands the protocol's calls the extended card (the same card, built for
// their caller) through the protocol's own role of the host.

// Errors of the host's extended card, matched with errors.Is; the error's
// text is the pipeline's own.
var (
	// ErrNoExtendedCard: the host serves no extended card (the card does
	// not declare it).
	ErrNoExtendedCard = errors.New("host: no extended agent card")
	// ErrUnauthenticated: the call needs an authenticated caller and has
	// none (the anonymous caller of optional authentication).
	ErrUnauthenticated = errors.New("host: unauthenticated caller")
)

// CardServer is the role of a service that writes the agent card. At
// most one protocol of a registry serves it.
type CardServer interface {
	// Card is the card in describes, as JSON values (the host marshals
	// it).
	Card(in CardInfo) map[string]any
	// CardView is the form of card that the client of r reads (card
	// itself, or another generation's form of it); on error the host
	// serves card as it is.
	CardView(r *http.Request, card map[string]any) (any, error)
}

// CardInfo is what the host knows that a card declares.
type CardInfo struct {
	// Base is the base URL of the card's HTTP interfaces (a pool's card:
	// the pool's path under it).
	Base string
	// GRPCOnly: the HTTP interfaces' address is unknown (a gRPC call
	// without a public URL), and the card lists the gRPC interface alone.
	GRPCOnly bool
	// GRPC is the address (host:port) of the gRPC binding, "" when none
	// is served.
	GRPC string
	// Version is the pipeline's version.
	Version string
	// DefaultPool is the pool of requests that name none.
	DefaultPool string
	// Push: push notifications are served.
	Push bool
	// ExtendedCard: the extended card is served.
	ExtendedCard bool
	// Authentication: authentication is configured (not open): a caller
	// has credentials to present.
	Authentication bool
	// Auth is the authentication the card declares.
	Auth CardAuth
	// Pool is the agent pool whose card it is; nil for the pipeline's.
	Pool *CardPool
	// Profile is the profile of the card's pool (the default pool's for
	// the pipeline's card); nil: it streams and requires nothing.
	Profile *PoolProfile
	// Pools are the pipeline's agent pools, by name, in the pipeline's
	// card and in every extended card (with their profiles and skills
	// only there); nil elsewhere.
	Pools []CardPool
	// Caller is who an extended card is for; nil for the public card.
	Caller *CardCaller
}

// CardAuth is the authentication a card declares.
type CardAuth struct {
	// Schemes are the OpenAPI 3 security scheme objects by name, as JSON
	// values (an A2A v0.3 card's securitySchemes); nil without
	// authentication.
	Schemes any
	// Requirements are the alternatives of schemes and scopes (an A2A
	// v0.3 card's security); an empty one allows the anonymous caller.
	Requirements []map[string][]string
	// Methods are the configured schemes, "none" included (the
	// AgentVault profile's authSchemes); empty without authentication.
	Methods []CardAuthMethod
}

// CardAuthMethod is one configured authentication scheme.
type CardAuthMethod struct {
	Scheme      string   `json:"scheme"`
	Description string   `json:"description,omitempty"`
	TokenURL    string   `json:"tokenUrl,omitempty"`
	Scopes      []string `json:"scopes,omitempty"`
}

// PoolProfile is what an agent pool declares it offers (its pool info):
// whether it streams, and the extensions a request to it must activate.
type PoolProfile struct {
	Streaming          bool
	RequiredExtensions []string
	// InputModes are the media types the pool takes (its card's
	// defaultInputModes); empty: the pipeline's defaults.
	InputModes []string
}

// CardPool is an agent pool as a card describes it: its own card's URL,
// and what its bridge published (all empty when nothing was).
type CardPool struct {
	Name    string
	CardURL string
	// Title, Description, Version, Skills (A2A AgentSkill objects) and
	// the input and output modes, as the pool's bridge published them.
	Title, Description, Version string
	Skills                      []map[string]any
	InputModes, OutputModes     []string
	// Profile is the pool's profile (in an extended card's Pools only).
	Profile PoolProfile
}

// CardCaller is the caller an extended card is for: who the pipeline
// takes it for and what it may use (its own, nobody else's).
type CardCaller struct {
	UserID, IdentityOrigin string
	Roles                  []string
	// RateLimits are its rate limits as JSON values; nil when none apply.
	RateLimits any
	// MaxStreams bounds its concurrent streams; 0: unlimited.
	MaxStreams int
}
