package ingress_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// TestAuthEnvShortSecretNamesVariable: a secret of a list variable
// shorter than MinSecretLength is refused naming the variable and the
// entry's position, never the secret. It said "api_keys[0] is shorter
// than 16 bytes": the auth file's field, which an operator who set only
// E2A_API_KEYS never wrote.
func TestAuthEnvShortSecretNamesVariable(t *testing.T) {
	for _, env := range []string{ingress.EnvAPIKeys, ingress.EnvBearerTokens, ingress.EnvOAuth2Clients} {
		vars := map[string]string{env: "alice:ok_long_enough_secret_1, bob:shortone", ingress.EnvOAuth2SigningKey: "sk_short_0123456789abcdef0123456789abcdef"}
		_, err := ingress.LoadAuth(func(k string) string { return vars[k] })
		if !errors.Is(err, ingress.ErrAuthConfig) || !strings.Contains(err.Error(), env+" entry 2") || strings.Contains(err.Error(), "shortone") {
			t.Errorf("%s with a short secret in entry 2: %v; want ErrAuthConfig naming %s entry 2, without the secret", env, err, env)
		}
	}
}
