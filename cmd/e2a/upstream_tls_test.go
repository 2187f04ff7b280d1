package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestUpstreamTLS: an upstream whose certificate a private certs.Roots
// signed (an internal service) is called over https once
// E2A_UPSTREAM_TLS_CA names the authority's PEM, or SSL_CERT_FILE, as
// every Go program reads it for the system's roots; one that also asks for
// the client's certificate (mutual TLS) gets the one E2A_UPSTREAM_TLS_CERT
// and E2A_UPSTREAM_TLS_KEY name. `e2a dev --http https://…` answers
// through each; without the authority, or without the certificate asked
// for, the bridge's start fails at once (exit 1). The two variables go
// together, and files that cannot be read stop the start naming them.
func TestUpstreamTLS(t *testing.T) {
	certs := testkit.WriteTLS(t, "127.0.0.1")
	serve := func(mutual bool) string {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "answered over the private CA's TLS")
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{certs.Pair}}
		if mutual {
			srv.TLS.ClientAuth, srv.TLS.ClientCAs = tls.RequireAndVerifyClientCert, certs.Roots
		}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL + "/"
	}
	private, mutual := serve(false), serve(true)
	ca, cert := "E2A_UPSTREAM_TLS_CA="+certs.CA, []string{"E2A_UPSTREAM_TLS_CERT=" + certs.Cert, "E2A_UPSTREAM_TLS_KEY=" + certs.Key}

	for _, c := range []struct {
		name string
		env  []string
		url  string
		want string
	}{
		{"an unknown authority", []string{"SSL_CERT_FILE=", "SSL_CERT_DIR="}, private, "certificate"},
		{"no client certificate", []string{ca}, mutual, "tls: certificate required"},
		{"a certificate without its key", []string{ca, cert[0]}, mutual, "E2A_UPSTREAM_TLS_CERT, E2A_UPSTREAM_TLS_KEY go together"},
		{"files not there", []string{ca, "E2A_UPSTREAM_TLS_CERT=/nonexistent/tls.crt", "E2A_UPSTREAM_TLS_KEY=/nonexistent/tls.key"}, mutual,
			"E2A_UPSTREAM_TLS_CERT, E2A_UPSTREAM_TLS_KEY: the client certificate"},
		{"an authority file that is no PEM", []string{"E2A_UPSTREAM_TLS_CA=" + certs.Key}, private, "E2A_UPSTREAM_TLS_CA: " + certs.Key + " holds no PEM certificate"},
	} {
		code, _, errOut := runBin(t, embeddedEnv(append(c.env, "E2A_LOG_LEVEL=error")...), "agent", "--pool", "tls", "--http", c.url)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, want 1 saying %q: %s", c.name, code, c.want, strings.TrimSpace(errOut))
		}
	}

	for _, c := range []struct {
		name string
		env  []string
		url  string
	}{{"SSL_CERT_FILE", []string{"SSL_CERT_FILE=" + certs.CA}, private}, {"E2A_UPSTREAM_TLS_CA", []string{ca}, private},
		{"mutual TLS", append([]string{ca}, cert...), mutual}} {
		dev := startDev(t, c.env, "--http", c.url)
		waitPoolLive(t, dev.base, "agent")
		if _, b := testkit.Do(t, "POST", dev.base+"/v1/requests?wait=true", `{"params":{"text":"hi"}}`); !strings.Contains(string(b), "answered over the private CA's TLS") {
			t.Errorf("%s: %.500s", c.name, b)
		}
	}
}
