package main

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestBridgeStartLogNamesCredentials: the line `e2a agent` logs when a
// bridge starts says which credentials go upstream (bridge.Credentials
// names them without their values: "api key", "header X-Tenant", or
// "none"), so an operator can tell a missing E2A_UPSTREAM_API_KEY from a
// wrong one. Under the key "credentials" the process logger's redaction
// replaced that description with "[redacted]" whatever was configured,
// none included; the values themselves must still never appear.
func TestBridgeStartLogNamesCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	const key, tenant = "k-7d41c9e2b5a3f860", "t-3b9f0a6c1e2d7485"
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"none", nil, `"credentials_used":"none"`},
		{"key and header", []string{"E2A_UPSTREAM_API_KEY=" + key, "E2A_UPSTREAM_HEADERS=X-Tenant: " + tenant},
			`"credentials_used":"api key, header X-Tenant"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := append([]string{"E2A_NATS_URL=", "E2A_NATS_PORT=0", "E2A_HTTP_ADDR=127.0.0.1:0",
				"E2A_LOG_FORMAT=json", "E2A_UPSTREAM_API_KEY=", "E2A_UPSTREAM_HEADERS="}, c.env...)
			_, stderr := startBin(t, env, "agent", "--pool", "logcheck", "--http", srv.URL+"/")
			m, _ := waitLine(t, stderr, regexp.MustCompile(`"msg":"bridge".*`))
			if !strings.Contains(m[0], c.want) {
				t.Errorf("bridge start line does not say %s: %s", c.want, m[0])
			}
			if strings.Contains(m[0], key) || strings.Contains(m[0], tenant) {
				t.Errorf("bridge start line holds a credential's value: %s", m[0])
			}
		})
	}
}
