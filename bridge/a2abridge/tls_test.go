package a2abridge_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestMutualTLS: an A2A agent (a2a-go/v2's server) served over TLS with a
// private authority's certificate, asking for the client's, on each of
// its three bindings (gRPC dials on its own, from the client's
// TLSConfig): the bridge given the authority and a certificate it signed
// (WithTLSConfig) answers through it; given the authority alone, the card
// is refused it (the handshake asks for a certificate), and the pool does
// not start.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	certs := testkit.WriteTLS(t, "127.0.0.1")
	server := &tls.Config{Certificates: []tls.Certificate{certs.Pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: certs.Roots}
	p := pipetest.Start(t)
	for i, b := range []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON, up.GRPC} {
		srv := up.Start(t, up.Options{Binding: b, TLS: server})
		if !strings.HasPrefix(srv.CardURL(), "https://") {
			t.Fatalf("%s: card at %s", b, srv.CardURL())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		noCert, err := bridge.NewClient(srv.CardURL(), bridge.WithTLSConfig(&tls.Config{RootCAs: certs.Roots}))
		if err != nil {
			t.Fatal(err)
		}
		if u, err := a2abridge.New(ctx, noCert); err == nil {
			_ = u.Close()
			t.Errorf("%s: the bridge started without the certificate the agent asks for", b)
		}
		cancel()
		pool := "mtls-" + string(rune('a'+i))
		p.Pool(pool, newHandler(t, p, pool, srv.CardURL(),
			bridge.WithTLSConfig(&tls.Config{RootCAs: certs.Roots, Certificates: []tls.Certificate{certs.Pair}})))
		if a := p.Ask(t, pool, `{"params":{"text":"stream: mutual"}}`); a.Text(e2a.DeltaText) != up.StreamText("mutual") || a.Final().ResponseKind != e2a.KindComplete {
			t.Errorf("%s: answer %q, final %s", b, a.Text(e2a.DeltaText), a.Final().Body)
		}
	}
}
