package a2abridge_test

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestCardKeyHeader: the API key goes where the agent's card asks for it.
// A card whose security requirement is an API key scheme in a header
// (X-Agent-Key) gets the key in that header, as it is, and no bearer
// token; a card offering a bearer token among its options, one asking for
// the key in a query, and one asking for nothing get "Authorization:
// Bearer <key>". An operator's own header of that name (E2A_UPSTREAM_HEADERS)
// is sent as it is, the key staying a bearer token.
func TestCardKeyHeader(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	p := pipetest.Start(t)
	apiKey := a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationHeader, Name: "X-Agent-Key"}
	for i, c := range []struct {
		name      string
		schemes   a2a.NamedSecuritySchemes
		reqs      a2a.SecurityRequirementsOptions
		headers   map[string]string
		wantKey   string // X-Agent-Key
		wantAuth  string // Authorization
		wantInLog string
	}{
		{"api key in a header", a2a.NamedSecuritySchemes{"agentKey": apiKey},
			a2a.SecurityRequirementsOptions{{"agentKey": {}}}, nil, originKey, "", "X-Agent-Key"},
		{"no requirement listed", a2a.NamedSecuritySchemes{"agentKey": apiKey}, nil, nil, originKey, "", "X-Agent-Key"},
		{"a bearer token offered too", a2a.NamedSecuritySchemes{"agentKey": apiKey, "token": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}},
			a2a.SecurityRequirementsOptions{{"agentKey": {}}, {"token": {}}}, nil, "", "Bearer " + originKey, ""},
		{"api key in a query", a2a.NamedSecuritySchemes{"q": a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationQuery, Name: "key"}},
			a2a.SecurityRequirementsOptions{{"q": {}}}, nil, "", "Bearer " + originKey, ""},
		{"nothing asked", nil, nil, nil, "", "Bearer " + originKey, ""},
		{"the operator's own header", a2a.NamedSecuritySchemes{"agentKey": apiKey},
			a2a.SecurityRequirementsOptions{{"agentKey": {}}}, map[string]string{"x-agent-key": "operator-value-77"},
			"operator-value-77", "Bearer " + originKey, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			agent := startKeyedAgent(t, "127.0.0.1")
			card := cardOf(agent.rpc)
			card.SecuritySchemes, card.SecurityRequirements = c.schemes, c.reqs
			agent.card.set(t, card)
			u, log := bridgeTo(ctx, t, "http://"+agent.addr, bridge.WithCredentials(bridge.Credentials{APIKey: originKey, Headers: c.headers}))
			askThrough(t, p, "keyed-"+string(rune('a'+i)), u)
			keys, auths := agent.header("X-Agent-Key"), agent.calls()
			if len(keys) == 0 {
				t.Fatal("the agent got no call")
			}
			for j := range keys {
				if keys[j] != c.wantKey || auths[j] != c.wantAuth {
					t.Errorf("call %d: X-Agent-Key %q, Authorization %q; want %q and %q", j, keys[j], auths[j], c.wantKey, c.wantAuth)
				}
			}
			if c.wantInLog != "" && !strings.Contains(log.String(), c.wantInLog) {
				t.Errorf("the start's log does not name the key's header %s:\n%s", c.wantInLog, log.String())
			}
			if strings.Contains(log.String(), originKey) {
				t.Errorf("the log holds the key:\n%s", log.String())
			}
		})
	}
}
