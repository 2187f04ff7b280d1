package a2abridge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// ClientCredentials is what an agent's card says a client of the OAuth 2.0
// client-credentials grant (RFC 6749 §4.4) needs: where to ask for its
// tokens and the scopes its calls need.
type ClientCredentials struct {
	// Scheme is the name of the card's oauth2 security scheme.
	Scheme string
	// TokenURL is the flow's token endpoint, as the card writes it.
	TokenURL string
	// Scopes are those the card's first security requirement naming
	// Scheme asks for (none when no requirement names it).
	Scopes []string
}

// ClientCredentialsOf is the client-credentials flow of card: of its
// oauth2 security schemes with such a flow and a token URL, the one its
// security requirements name first (in their order; by name when none
// does), with the scopes that requirement asks for.
// ErrNoClientCredentials when the card has none.
func ClientCredentialsOf(card *a2a.AgentCard) (ClientCredentials, error) {
	var names []string
	for name, s := range card.SecuritySchemes {
		if _, ok := clientCredentialsFlow(s); ok {
			names = append(names, string(name))
		}
	}
	if len(names) == 0 {
		return ClientCredentials{}, fmt.Errorf("%w with a token URL (its security schemes: %s)", ErrNoClientCredentials, schemeNames(card))
	}
	slices.Sort(names)
	found := ClientCredentials{Scheme: names[0]}
	for _, req := range card.SecurityRequirements {
		if i := slices.IndexFunc(names, func(n string) bool { _, ok := req[a2a.SecuritySchemeName(n)]; return ok }); i >= 0 {
			found = ClientCredentials{Scheme: names[i], Scopes: slices.Clone(req[a2a.SecuritySchemeName(names[i])])}
			break
		}
	}
	flow, _ := clientCredentialsFlow(card.SecuritySchemes[a2a.SecuritySchemeName(found.Scheme)])
	found.TokenURL = flow.TokenURL
	return found, nil
}

// Allowed checks that the bridge whose client is c may send its OAuth
// client's credentials to cc.TokenURL, which the agent's card, not the
// operator, names: the client secret goes there. As for the interfaces
// the bridge calls with its credentials (WithAllowedHosts), only the
// configured upstream's host (any of this machine's names for an agent on
// it) and allowedHosts (E2A_UPSTREAM_ALLOWED_HOSTS, as WithAllowedHosts
// takes them) are; an https upstream's token endpoint over plain http
// never is. ErrTokenURLRefused says why not; a list it cannot read wraps
// bridge.ErrInvalidOption. A token URL on a host neither configured nor
// allowed is ErrTokenHostNotAllowed (which is ErrTokenURLRefused too).
func (cc ClientCredentials) Allowed(c *bridge.Client, allowedHosts string) error {
	allowed, err := parseAllowedHosts(allowedHosts)
	if err != nil {
		return fmt.Errorf("%w: %w", bridge.ErrInvalidOption, err)
	}
	token := &a2a.AgentInterface{URL: cc.TokenURL, ProtocolBinding: a2a.TransportProtocolHTTPJSON}
	o := originOf(c, allowed)
	e, ok := endpointOf(token)
	switch why := o.refusal(token); {
	case why == "":
		return nil
	case !ok:
		return fmt.Errorf("%w: not an absolute http(s) URL of a host (without user information)", ErrTokenURLRefused)
	case o.scheme == "https" && e.scheme == "http":
		return fmt.Errorf("%w: %s: plain http, the agent being https: the client secret would go in clear", ErrTokenURLRefused, where(token))
	default:
		return fmt.Errorf("%w: %s (the agent is on %s)", ErrTokenHostNotAllowed, where(token), o.host)
	}
}

// clientCredentialsFlow is s's client-credentials flow, when s is an
// oauth2 scheme with one that names its token URL.
func clientCredentialsFlow(s a2a.SecurityScheme) (a2a.ClientCredentialsOAuthFlow, bool) {
	var flows a2a.OAuthFlows
	switch o := s.(type) {
	case a2a.OAuth2SecurityScheme:
		flows = o.Flows
	case *a2a.OAuth2SecurityScheme:
		flows = o.Flows
	}
	switch f := flows.(type) {
	case a2a.ClientCredentialsOAuthFlow:
		return f, f.TokenURL != ""
	case *a2a.ClientCredentialsOAuthFlow:
		return *f, f.TokenURL != ""
	}
	return a2a.ClientCredentialsOAuthFlow{}, false
}

// schemeNames lists card's security schemes by name ("none" for none).
func schemeNames(card *a2a.AgentCard) string {
	var names []string
	for name := range card.SecuritySchemes {
		names = append(names, string(name))
	}
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// ResolveCard reads the agent card at c's URL (an agent's base URL, or
// its card's), as New does: v1.0 or v0.3, at the well-known path or the
// one before v0.3, bounded in size. Its errors are those New gives for
// the card.
func ResolveCard(ctx context.Context, c *bridge.Client) (*a2a.AgentCard, error) {
	return resolveCard(ctx, c)
}
