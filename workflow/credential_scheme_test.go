package workflow

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCredentialNotInjectedOverHTTP: a vault credential bound to a host
// (E2A_WORKFLOW_CREDHOSTS_<NAME>=example.com) that a rule allows is
// injected into an https ApiCall to it, but an ApiCall to
// http://example.com/… is refused with the spec's PermissionError before
// any request is sent (it was injected and crossed the network in clear);
// validation reports it too. A loopback literal (a local API) keeps plain
// http.
func TestCredentialNotInjectedOverHTTP(t *testing.T) {
	var seen atomic.Value
	seen.Store("")
	var hits atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		seen.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	plain := httptest.NewServer(h)
	defer plain.Close()
	secure := httptest.NewTLSServer(h) // its certificate names example.com
	defer secure.Close()
	pu, _ := url.Parse(plain.URL)
	su, _ := url.Parse(secure.URL)

	v := NewVault()
	if err := v.LoadEnv([]string{
		"E2A_WORKFLOW_CREDENTIAL_API_KEY=" + testSecret,
		"E2A_WORKFLOW_CREDHOSTS_API_KEY=example.com,127.0.0.1",
	}); err != nil {
		t.Fatal(err)
	}
	pol := &Policy{}
	_ = pol.AllowHosts("example.com", "127.0.0.1")
	_ = pol.AllowNets("127.0.0.0/8")
	e := New(Options{Policy: pol, Vault: v, Cache: NoCache{}, Retry: RetryPolicy{MaxRetries: -1},
		Resolver: mapResolver{"example.com": {"127.0.0.1"}}})
	pool := x509.NewCertPool()
	pool.AddCert(secure.Certificate())
	e.transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	call := func(u string) string {
		return lines(op("a", `{"ApiCall":{"method":"GET","url":"`+u+`","headers":{"Authorization":{"credentialRef":{"id":"api-key"},"prefix":"Bearer "}},"outputPath":"/workflow/a"}}`), begin("a"))
	}

	for _, u := range []string{"http://example.com:" + pu.Port() + "/echo", "http://EXAMPLE.com.:" + pu.Port() + "/echo"} {
		out, _ := execRaw(t, e, "agent-1", call(u))
		if n := hits.Load(); n != 0 || strings.Contains(seen.Load().(string), testSecret) {
			t.Fatalf("%s: the credential was sent over plain http (%d requests, status %s)", u, n, out.Status)
		}
		if out.Status != StatusFailed || out.Error == nil || out.Error.Type != PermissionError || out.Error.Retryable ||
			out.Error.OperationID != "a" || !strings.Contains(out.Error.Message, "https only") {
			t.Fatalf("%s: want a PermissionError of operation a, got %s %+v", u, out.Status, out.Error)
		}
		_, res := e.Validate("agent-1", call(u))
		if res.Valid || len(res.Errors) == 0 || res.Errors[0].Code != CodePermission || res.Errors[0].Field != "operation.ApiCall.headers.Authorization" {
			t.Fatalf("%s: validation: %+v", u, res.Errors)
		}
	}

	out, _ := execRaw(t, e, "agent-1", call("https://example.com:"+su.Port()+"/echo"))
	if out.Status != StatusSuccess || seen.Load().(string) != "Bearer "+testSecret {
		t.Fatalf("https: %s %+v, header %q", out.Status, out.Error, seen.Load())
	}
	out, _ = execRaw(t, e, "agent-1", call(plain.URL+"/echo"))
	if out.Status != StatusSuccess || seen.Load().(string) != "Bearer "+testSecret {
		t.Fatalf("loopback http: %s %+v", out.Status, out.Error)
	}
}
