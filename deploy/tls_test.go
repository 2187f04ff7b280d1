package deploy

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/proctest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// testTLS is a certificate authority and one server certificate signed by
// it, written as PEM files: what an operator puts in the secret nats-tls
// (tls.crt, tls.key, ca.crt) or in deploy/compose/tls.
type testTLS struct {
	// Dir holds ca.crt, tls.crt and tls.key.
	Dir                string
	CA, Cert, Key      string
	serverNames, addrs []string
}

// natsTLSEnv returns the variables deploy/nats/nats-server.conf reads for
// its TLS files.
func (c *testTLS) natsTLSEnv() []string {
	return []string{"NATS_TLS_CERT=" + c.Cert, "NATS_TLS_KEY=" + c.Key, "NATS_TLS_CA=" + c.CA}
}

// newTestTLS generates, in a fresh directory, an ECDSA P-256 CA and a
// certificate for 127.0.0.1, localhost and the compose node names, valid
// for servers and clients (cluster routes verify each other's certificate
// in both directions).
func newTestTLS(t testing.TB) *testTLS {
	t.Helper()
	c := &testTLS{serverNames: []string{"localhost", "nats-1", "nats-2", "nats-3"}, addrs: []string{"127.0.0.1"}}
	f := testkit.WriteTLS(t, append(append([]string(nil), c.serverNames...), c.addrs...)...)
	c.Dir, c.CA, c.Cert, c.Key = f.Dir, f.CA, f.Cert, f.Key
	return c
}

// needOpenSSL stops a test of gen-certs.sh without openssl: it fails under
// CI=true (.ci/run installs Debian's openssl) and is skipped elsewhere.
func needOpenSSL(t *testing.T) {
	t.Helper()
	proctest.Need(t, "openssl", "gen-certs.sh needs it (Debian: apt-get install openssl)")
}

// TestGenCertsScript runs deploy/tls/gen-certs.sh (the README's way to
// make the secret nats-server-tls and compose's certificates) and checks
// what it writes: a certificate signed by the CA, for servers and clients
// (routes), valid for the names the chart's clients and routes use and
// the compose node names.
func TestGenCertsScript(t *testing.T) {
	needOpenSSL(t)
	dir := t.TempDir()
	if out, err := exec.Command("sh", filepath.Join("tls", "gen-certs.sh"), dir).CombinedOutput(); err != nil {
		t.Fatalf("gen-certs.sh: %v\n%s", err, out)
	}
	read := func(name string) *x509.Certificate {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("%s: no PEM", name)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca, cert := read("ca.crt"), read("tls.crt")
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"nats", "nats.e2a.svc.cluster.local", "nats-0.nats-headless", "nats-2.nats-headless.e2a.svc.cluster.local", "nats-1", "localhost", "127.0.0.1"} {
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("%s (usage %v): %v", name, usage, err)
			}
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "tls.key")); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("tls.key: %v %v", fi.Mode(), err)
	}
}

// TestGenCertsScriptRenews: run again on its directory (the renewal its
// header describes: "run it again and update the secret"), gen-certs.sh
// signs a new server certificate with the CA already there and keeps
// ca.crt, so that every NATS server and e2a pod trusts the new
// certificate whichever of them sees the updated secret first (the kubelet
// updates each pod's copy on its own). It made a new CA each run: until
// every pod had the new secret, a server reloaded with it and the servers
// and clients still holding the old CA refused each other's new
// connections (routes, reconnects: certificate signed by unknown
// authority). With ca.crt but not its key (kept apart, as the script
// advises), it refuses rather than replace the CA.
func TestGenCertsScriptRenews(t *testing.T) {
	needOpenSSL(t)
	dir := t.TempDir()
	run := func() ([]byte, error) {
		return exec.Command("sh", filepath.Join("tls", "gen-certs.sh"), dir).CombinedOutput()
	}
	if out, err := run(); err != nil {
		t.Fatalf("gen-certs.sh: %v\n%s", err, out)
	}
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	caBefore, certBefore := read("ca.crt"), read("tls.crt")
	if out, err := run(); err != nil {
		t.Fatalf("gen-certs.sh, renewal: %v\n%s", err, out)
	}
	if string(read("ca.crt")) != string(caBefore) {
		t.Errorf("the renewal replaced ca.crt: clients and servers holding the first one no longer trust the servers")
	}
	if string(read("tls.crt")) == string(certBefore) {
		t.Errorf("the renewal kept the old tls.crt")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBefore) {
		t.Fatal("ca.crt: no certificate")
	}
	blk, _ := pem.Decode(read("tls.crt"))
	if blk == nil {
		t.Fatal("tls.crt: no PEM")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "nats", Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the renewed tls.crt against the first ca.crt: %v", err)
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err != nil {
		t.Errorf("the renewed tls.crt and tls.key: %v", err)
	}

	// The CA's key kept apart: no renewal, and the CA left as it is.
	caNow := read("ca.crt")
	if err := os.Remove(filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	if out, err := run(); err == nil {
		t.Errorf("gen-certs.sh without ca.key beside ca.crt succeeded:\n%s", out)
	} else if !strings.Contains(string(out), "ca.key") {
		t.Errorf("the refusal does not name ca.key:\n%s", out)
	}
	if string(read("ca.crt")) != string(caNow) {
		t.Errorf("a refused renewal replaced ca.crt")
	}
}
