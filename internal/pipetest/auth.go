package pipetest

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// KeyAuth is an ingress.Auth of API keys, keys[principal] the principal's
// key (sent as X-Api-Key), with roles as ingress.AuthConfig.Roles gives
// them (e.g. {"ops": {"admin"}}: ops may read, continue and cancel
// everyone's requests, tasks and conversations). A config it refuses
// fails the test.
func KeyAuth(t testing.TB, keys map[string]string, roles map[string][]string) *ingress.Auth {
	t.Helper()
	return newAuth(t, &ingress.AuthConfig{Roles: roles, APIKeys: apiKeys(keys)})
}

// OAuth2 is an OAuth 2.0 client-credentials configuration for tests: one
// client, svc (its secret OAuth2Secret), granted the scope agents, which
// every call needs (a card lists the oauth2 requirement with that scope).
func OAuth2() ingress.OAuth2Config {
	return ingress.OAuth2Config{SigningKey: "0123456789abcdef0123456789abcdef", RequiredScope: "agents",
		Clients: []ingress.OAuth2Client{{ClientID: "svc", ClientSecret: OAuth2Secret, Scopes: []string{"agents"}}}}
}

// OAuth2Secret is the secret of OAuth2's client svc.
const OAuth2Secret = "cs_svc_0123456789abcdef"

// KeyAndOAuth is an ingress.Auth of API keys (keys as KeyAuth takes them)
// and OAuth2, both schemes listed, API keys first. A config it refuses
// fails the test.
func KeyAndOAuth(t testing.TB, keys map[string]string) *ingress.Auth {
	t.Helper()
	return newAuth(t, &ingress.AuthConfig{Schemes: []string{ingress.SchemeAPIKey, ingress.SchemeOAuth2},
		APIKeys: apiKeys(keys), OAuth2: OAuth2()})
}

// apiKeys is keys (keys[principal] the principal's key) as credentials.
func apiKeys(keys map[string]string) []ingress.Credential {
	var out []ingress.Credential
	for principal, key := range keys {
		out = append(out, ingress.Credential{Principal: principal, Secret: key})
	}
	return out
}

// newAuth is ingress.NewAuth(cfg), a refusal failing the test.
func newAuth(t testing.TB, cfg *ingress.AuthConfig) *ingress.Auth {
	t.Helper()
	a, err := ingress.NewAuth(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
