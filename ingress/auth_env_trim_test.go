package ingress_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestAuthEnvEntriesTrimmed: the list variables' entries are
// "<name>:<secret>" split at the first colon, and only the whole entry was
// trimmed: "alice : key" made the principal "alice " (a principal nobody
// configured, whose data alice's tools never find) and the key " key" (a
// key no header carries, since header values are trimmed). Both halves are
// trimmed, in E2A_API_KEYS, E2A_BEARER_TOKENS, E2A_OAUTH2_CLIENTS and
// E2A_AUTH_ROLES alike; an entry whose name or secret is empty is an error
// that names the entry's position and never the secret.
func TestAuthEnvEntriesTrimmed(t *testing.T) {
	const (
		aliceKey  = "ak_trim_alice_0123456789abcdef"
		bobKey    = "ak_trim_bob_0123456789abcdef0"
		ciToken   = "bt_trim_ci_0123456789abcdef01"
		svcSecret = "cs_trim_svc_0123456789abcdef0"
	)
	env := map[string]string{
		ingress.EnvAPIKeys:          "alice : " + aliceKey + ", bob:\t" + bobKey,
		ingress.EnvBearerTokens:     "ci :" + ciToken,
		ingress.EnvOAuth2Clients:    "svc : " + svcSecret,
		ingress.EnvOAuth2SigningKey: "sk_trim_0123456789abcdef0123456789abcdef",
		ingress.EnvAuthRoles:        "alice : audit",
	}
	a, err := ingress.LoadAuth(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadAuth: %v", err)
	}
	for _, c := range []struct {
		header, value, want string
		roles               []tenant.Role
	}{
		{ingress.HeaderAPIKey, aliceKey, "alice", []tenant.Role{tenant.RoleAudit}},
		{ingress.HeaderAPIKey, bobKey, "bob", nil},
		{"Authorization", "Bearer " + ciToken, "ci", nil},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(c.header, c.value)
		p, err := a.Authenticate(r)
		if err != nil || p.UserID != c.want || !slices.Equal(p.Roles, c.roles) {
			t.Errorf("%s of %q: principal %q roles %v, err %v; want %q roles %v (the entry's name and secret trimmed)",
				c.header, c.want, p.UserID, p.Roles, err, c.want, c.roles)
		}
	}
	if _, err := a.IssueToken("svc", svcSecret, ""); err != nil {
		t.Errorf("client credentials of E2A_OAUTH2_CLIENTS \"svc : <secret>\": %v; want a token for client svc", err)
	}

	for _, c := range []struct{ env, value, entry string }{
		{ingress.EnvAPIKeys, "alice:" + aliceKey + ", :" + bobKey, "entry 2"},
		{ingress.EnvAPIKeys, "alice:" + aliceKey + ",bob" + bobKey, "entry 2"},
		{ingress.EnvAPIKeys, "alice:sha256: ", "entry 1"},
		{ingress.EnvBearerTokens, "ci: sha256:", "entry 1"},
		{ingress.EnvOAuth2Clients, "svc:" + svcSecret + ", :" + bobKey, "entry 2"},
		{ingress.EnvAuthRoles, "alice:audit, :admin", "entry 2"},
	} {
		vars := map[string]string{c.env: c.value, ingress.EnvOAuth2SigningKey: env[ingress.EnvOAuth2SigningKey]}
		_, err := ingress.LoadAuth(func(k string) string { return vars[k] })
		switch {
		case !errors.Is(err, ingress.ErrAuthConfig):
			t.Errorf("%s=%q: err %v; want ErrAuthConfig", c.env, c.value, err)
		case !strings.Contains(err.Error(), c.env+" "+c.entry):
			t.Errorf("%s=%q: %v; want the error to name %s %s", c.env, c.value, err, c.env, c.entry)
		case strings.Contains(err.Error(), aliceKey) || strings.Contains(err.Error(), bobKey) || strings.Contains(err.Error(), svcSecret):
			t.Errorf("%s=%q: the error reveals a secret: %v", c.env, c.value, err)
		}
	}
}
