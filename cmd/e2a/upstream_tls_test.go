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

// TestUpstreamPrivateCA: an upstream whose certificate a private authority
// signed (an internal service) is called over https once SSL_CERT_FILE
// names the authority's PEM, as every Go program reads it for the
// system's roots: `e2a dev --http https://…` answers through it. Without
// it the bridge's start fails at once (exit 1), naming the certificate.
func TestUpstreamPrivateCA(t *testing.T) {
	certs := testkit.WriteTLS(t, "127.0.0.1")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "answered over the private CA's TLS")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{certs.Pair}}
	srv.StartTLS()
	defer srv.Close()

	code, _, errOut := runBin(t, embeddedEnv("SSL_CERT_FILE=", "SSL_CERT_DIR=", "E2A_LOG_LEVEL=error"), "agent", "--pool", "tls", "--http", srv.URL+"/")
	if code != 1 || !strings.Contains(errOut, "certificate") {
		t.Errorf("an upstream of an unknown authority: exit %d, want 1 naming the certificate: %s", code, errOut)
	}

	dev := startDev(t, []string{"SSL_CERT_FILE=" + certs.CA}, "--http", srv.URL+"/")
	waitPoolLive(t, dev.base, "agent")
	if _, b := testkit.Do(t, "POST", dev.base+"/v1/requests?wait=true", `{"params":{"text":"hi"}}`); !strings.Contains(string(b), "answered over the private CA's TLS") {
		t.Errorf("through the upstream with SSL_CERT_FILE: %.500s", b)
	}
}
