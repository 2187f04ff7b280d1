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
	cfg := &ingress.AuthConfig{Roles: roles}
	for principal, key := range keys {
		cfg.APIKeys = append(cfg.APIKeys, ingress.Credential{Principal: principal, Secret: key})
	}
	a, err := ingress.NewAuth(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
