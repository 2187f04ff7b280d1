package workflow

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// TestExplicitIPIsPerRule: a loopback address named by a rule for one
// principal and one port opens it to that principal on that port only: with
// a "*" rule beside it, bob does not reach 127.0.0.1 on another port (he
// did: any rule naming the address opened it to everyone on every port).
func TestExplicitIPIsPerRule(t *testing.T) {
	var hits atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"internal":"metrics"}`))
	}))
	defer internal.Close()
	iu, _ := url.Parse(internal.URL)
	pol := &Policy{APIs: []APIRule{
		// ops may call a local test API on port 1 (not the internal server's port)
		{ID: "ops-local", Hosts: []string{"127.0.0.1:1"}, Principals: []string{"ops"}},
		// everyone may call any public host
		{ID: "public", Hosts: []string{"*"}},
	}}
	if err := pol.compile(); err != nil {
		t.Fatal(err)
	}
	e := New(Options{Policy: pol, Cache: NoCache{}, Retry: RetryPolicy{MaxRetries: -1}})
	out, _ := execRaw(t, e, "bob", get("http://127.0.0.1:"+iu.Port()+"/metrics"))
	if hits.Load() != 0 || out.Status != StatusFailed || out.Error == nil || out.Error.Type != PermissionError {
		t.Fatalf("bob reached loopback 127.0.0.1:%s (hits %d, status %s, error %+v): only ops' rule names 127.0.0.1, and only port 1",
			iu.Port(), hits.Load(), out.Status, out.Error)
	}
}

// TestMapSetAmplificationBounded: a map with a large "set" constant over an
// array doubled by MergeData fails with a DataError having allocated a small
// multiple of MaxDataBytes. MaxDataBytes was checked after the whole output
// was built and marshalled: 325 MB for a 64 KB limit here, and with the
// defaults (~2.8M elements × a 1 KB constant, ~3 GB) the worker died of OOM
// with every execution on it.
func TestMapSetAmplificationBounded(t *testing.T) {
	const limit = 64 << 10
	big := strings.Repeat("x", 8<<10)
	order := []string{"seed"}
	for i := 0; i < 12; i++ {
		order = append(order, "dbl")
	}
	order = append(order, "amp")
	wf := lines(
		op("seed", `{"MergeData":{"sources":["/workflow","/workflow"],"strategy":"concat","outputPath":"/workflow/a"}}`),
		op("dbl", `{"MergeData":{"sources":["/workflow/a","/workflow/a"],"strategy":"concat","outputPath":"/workflow/a"}}`),
		op("amp", `{"TransformData":{"inputPath":"/workflow/a","transform":"map","config":{"set":{"k":"`+big+`"}},"outputPath":"/workflow/b"}}`),
		begin(order...),
	)
	e := New(Options{Cache: NoCache{}, Limits: Limits{MaxDataBytes: limit}})
	w, res := e.Validate("agent-1", wf)
	if !res.Valid {
		t.Fatalf("invalid: %+v", res.Errors)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := e.Execute(context.Background(), "agent-1", "req-1", w, nil)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("status %s, error %v, allocated %d MB for a %d KB limit", out.Status, out.Error, alloc>>20, limit>>10)
	if out.Status != StatusFailed || out.Error == nil || out.Error.Type != DataError {
		t.Fatalf("want a DataError past MaxDataBytes, got %s %+v", out.Status, out.Error)
	}
	if alloc > 64*limit {
		t.Fatalf("the execution allocated %d MB before refusing an output past MaxDataBytes (%d KB): the limit is checked after the value is built", alloc>>20, limit>>10)
	}
}

// muxListener hands out TLS connections for a TLS ClientHello and plain
// ones otherwise, so one port serves both https:// and http://.
type muxListener struct {
	net.Listener
	cfg *tls.Config
}

func (l muxListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(c)
	b, err := br.Peek(1)
	pc := &peekedConn{Conn: c, r: br}
	if err == nil && b[0] == 0x16 {
		return tls.Server(pc, l.cfg), nil
	}
	return pc, nil
}

type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestCredentialNotSentInCleartextOnRedirect: a credentialRef header sent
// to https://host is dropped on a redirect to http://host, as curl does
// (CVE-2022-27776); it was kept (CheckRedirect compared the host alone) and
// crossed the network in cleartext.
func TestCredentialNotSentInCleartextOnRedirect(t *testing.T) {
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS() // for its certificate
	cert := ts.TLS.Certificates[0]
	ts.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var plainAuth atomic.Value
	plainAuth.Store("")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			http.Redirect(w, r, "http://"+addr+"/plain", http.StatusFound)
			return
		}
		plainAuth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})}
	go func() { _ = srv.Serve(muxListener{ln, &tls.Config{Certificates: []tls.Certificate{cert}}}) }()
	defer srv.Close()

	v := NewVault()
	if err := v.Add(Credential{ID: "k", Value: Secret(testSecret), Hosts: []string{addr}}); err != nil {
		t.Fatal(err)
	}
	e := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Vault: v, Cache: NoCache{}, Retry: RetryPolicy{MaxRetries: -1}})
	pool := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	pool.AddCert(leaf)
	e.transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	wf := lines(op("a", `{"ApiCall":{"method":"GET","url":"https://`+addr+`/secure","headers":{"Authorization":{"credentialRef":{"id":"k"},"prefix":"Bearer "}},"outputPath":"/workflow/a"}}`), begin("a"))
	out, _ := execRaw(t, e, "agent-1", wf)
	if got := plainAuth.Load().(string); strings.Contains(got, testSecret) {
		t.Fatalf("the credential went over plain http after an https→http redirect (status %s): %q", out.Status, got)
	}
}

// TestCancelStopsOutboundCall: cancelling an
// execution's context while an ApiCall hangs aborts the outbound request
// (the server sees its request context end) and Execute returns.
func TestCancelStopsOutboundCall(t *testing.T) {
	started, aborted := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		close(aborted)
	}))
	defer srv.Close()
	e := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Cache: NoCache{}, Retry: RetryPolicy{MaxRetries: -1}})
	w, res := Parse(get(srv.URL + "/hang"))
	if !res.Valid {
		t.Fatal(res.Errors)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Outcome, 1)
	go func() {
		out, _ := e.Execute(ctx, "agent-1", "req-c", w, nil)
		done <- out
	}()
	<-started
	cancel()
	<-aborted
	if out := <-done; out.Status != StatusFailed {
		t.Fatalf("a cancelled execution ended %s", out.Status)
	}
}
