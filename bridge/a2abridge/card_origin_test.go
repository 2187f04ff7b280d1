package a2abridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// originKey is the API key the bridge holds in these tests.
const originKey = "sk-origin-secret-4242"

// keyedAgent is a JSON-RPC A2A agent (mineAnswerer) listening on host,
// which records the headers of every call it gets, and serves card, once
// set, at the well-known path.
type keyedAgent struct {
	rpc     string // the interface URL: http://host:port/rpc
	addr    string // host:port
	card    cardAt
	mu      sync.Mutex
	headers []http.Header
}

// calls are the Authorization headers of the calls so far.
func (k *keyedAgent) calls() []string {
	return k.header("Authorization")
}

// header is the header name of each call so far.
func (k *keyedAgent) header(name string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, len(k.headers))
	for i, h := range k.headers {
		out[i] = h.Get(name)
	}
	return out
}

func startKeyedAgent(t *testing.T, host string) *keyedAgent {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", host, err)
	}
	k := &keyedAgent{addr: ln.Addr().String()}
	k.rpc = "http://" + k.addr + "/rpc"
	rpc := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(mineAnswerer{}))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if card := k.card.body.Load(); card != nil && r.URL.Path == a2asrv.WellKnownAgentCardPath {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(*card)
			return
		}
		k.mu.Lock()
		k.headers = append(k.headers, r.Header.Clone())
		k.mu.Unlock()
		rpc.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return k
}

// bridgeTo is the A2A bridge of the agent at url (a2abridge.New with a
// client of copts), closed when the test ends, and the log of its start;
// New's error fails the test.
func bridgeTo(ctx context.Context, t *testing.T, url string, copts ...bridge.ClientOption) (*a2abridge.Upstream, *testkit.Buffer) {
	t.Helper()
	client, err := bridge.NewClient(url, copts...)
	if err != nil {
		t.Fatal(err)
	}
	log := &testkit.Buffer{}
	u, err := a2abridge.New(ctx, client, a2abridge.WithLogger(slog.New(slog.NewTextHandler(log, nil))))
	if err != nil {
		t.Fatalf("the bridge to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = u.Close() })
	return u, log
}

// otherHost is an address of this machine that is a host of its own to
// the bridge: 127.0.0.2 (Linux answers on all of 127/8; localhost and
// ::1 are 127.0.0.1's other names to it).
func otherHost(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("no second loopback address to serve another host on: %v", err)
	}
	_ = ln.Close()
	return "127.0.0.2"
}

// cardAt serves a card on 127.0.0.1 (over TLS when tls), whose body set
// replaces; it returns the card server's base URL and its HTTP client's
// transport (which trusts it).
type cardAt struct {
	srv  *httptest.Server
	body atomic.Pointer[[]byte]
}

func serveCard(t *testing.T, tls bool, card any) *cardAt {
	t.Helper()
	return serveCardOn(t, "127.0.0.1", tls, card)
}

// serveCardOn is serveCard on host.
func serveCardOn(t *testing.T, host string, tls bool, card any) *cardAt {
	t.Helper()
	c := &cardAt{}
	c.set(t, card)
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != a2asrv.WellKnownAgentCardPath {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*c.body.Load())
	}))
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.srv.Listener.Close()
	c.srv.Listener = ln
	if tls {
		c.srv.StartTLS()
	} else {
		c.srv.Start()
	}
	t.Cleanup(c.srv.Close)
	return c
}

func (c *cardAt) set(t *testing.T, card any) {
	t.Helper()
	b, ok := card.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(card); err != nil {
			t.Fatal(err)
		}
	}
	c.body.Store(&b)
}

// cardOf is a streaming agent's card naming urls as JSON-RPC interfaces,
// in that order.
func cardOf(urls ...string) *a2a.AgentCard {
	card := testCard(a2a.NewAgentInterface(urls[0], a2a.TransportProtocolJSONRPC), true)
	for _, u := range urls[1:] {
		card.SupportedInterfaces = append(card.SupportedInterfaces, a2a.NewAgentInterface(u, a2a.TransportProtocolJSONRPC))
	}
	return card
}

// newOriginUpstream is the A2A upstream of the card at c, with the API
// key, logging to log.
func newOriginUpstream(ctx context.Context, t *testing.T, c *cardAt, log *testkit.Buffer, opts ...a2abridge.Option) (*a2abridge.Upstream, error) {
	t.Helper()
	copts := []bridge.ClientOption{bridge.WithCredentials(bridge.Credentials{APIKey: originKey}), bridge.WithConnectTimeout(2 * time.Second)}
	if strings.HasPrefix(c.srv.URL, "https:") {
		copts = append(copts, bridge.WithTransport(c.srv.Client().Transport))
	}
	client, err := bridge.NewClient(c.srv.URL, copts...)
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, a2abridge.WithLogger(slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	u, err := a2abridge.New(ctx, client, opts...)
	if err == nil {
		t.Cleanup(func() { _ = u.Close() })
	}
	return u, err
}

// askThrough serves pool with u on p and asks it once: the answer must
// be the agent's ("mine", completed).
func askThrough(t *testing.T, p *pipetest.Pipeline, pool string, u *a2abridge.Upstream) {
	t.Helper()
	h, err := bridge.New(pool, u, bridge.WithRetry(0, 5*time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p.Pool(pool, h)
	a := p.Ask(t, pool, `{"params":{"text":"hi"}}`)
	if got := a.Text(e2a.DeltaText); got != "mine" || a.Final().ResponseKind != e2a.KindComplete {
		t.Errorf("answer %q, final %s", got, a.Final().Body)
	}
}

// TestCardOrigin: the bridge sends its credentials only to interfaces on
// the configured upstream's host. A card (read at http://127.0.0.1:A)
// naming an interface on another host (127.0.0.2:B) is refused at start
// by default, naming the hosts and E2A_UPSTREAM_ALLOWED_HOSTS, and the
// other host gets no call; an interface on the configured host among
// them is used instead (and logged without its path); the other host is
// used once allowed (by host, or host:port, not another port); a card
// naming localhost or 0.0.0.0, read at 127.0.0.1, is the same machine and
// used, and read at another host is called there (where the agent is
// reached, not where it listens); an https
// upstream whose card names http is refused, allowed or not. It sent
// "Authorization: Bearer <key>" to whatever host the card named.
func TestCardOrigin(t *testing.T) {
	t.Parallel()
	ctx, other, evil, good, p := twoHosts(t)

	t.Run("refused", func(t *testing.T) {
		c := serveCard(t, false, cardOf(evil.rpc+"/evil"))
		var log testkit.Buffer
		_, err := newOriginUpstream(ctx, t, c, &log)
		if err == nil {
			t.Fatal("a card naming only another host was taken")
		}
		t.Logf("refused: %v", err)
		for _, want := range []string{other, "127.0.0.1", "E2A_UPSTREAM_ALLOWED_HOSTS"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "/evil") {
			t.Errorf("error %q shows the interface's path", err)
		}
	})

	t.Run("same-host-used", func(t *testing.T) {
		c := serveCard(t, false, cardOf(evil.rpc, good.rpc))
		var log testkit.Buffer
		u, err := newOriginUpstream(ctx, t, c, &log)
		if err != nil {
			t.Fatal(err)
		}
		askThrough(t, p, "origin-same", u)
		t.Logf("log:\n%s", log.String())
		if got := good.calls(); len(got) == 0 || got[0] != "Bearer "+originKey {
			t.Errorf("the configured host got %q", got)
		}
		if !strings.Contains(log.String(), "http://"+good.addr) || strings.Contains(log.String(), "/rpc") {
			t.Errorf("log does not name the interface used (scheme and host, no path):\n%s", log.String())
		}
	})

	if got := evil.calls(); len(got) != 0 {
		t.Fatalf("the other host got %d calls (%q) by default", len(got), got)
	}

	t.Run("allowed", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(evil.addr)
		for i, allow := range []string{other, " 127.0.0.9, " + other + ":" + port} {
			c := serveCard(t, false, cardOf(evil.rpc))
			var log testkit.Buffer
			u, err := newOriginUpstream(ctx, t, c, &log, a2abridge.WithAllowedHosts(allow))
			if err != nil {
				t.Fatalf("allowed %q: %v", allow, err)
			}
			askThrough(t, p, "origin-allowed-"+string(rune('a'+i)), u)
		}
		if got := evil.calls(); len(got) == 0 || got[0] != "Bearer "+originKey {
			t.Errorf("the allowed host got %q", got)
		}
		c := serveCard(t, false, cardOf(evil.rpc))
		if _, err := newOriginUpstream(ctx, t, c, &testkit.Buffer{}, a2abridge.WithAllowedHosts(other+":1")); err == nil {
			t.Error("an interface on another port of an allowed host:port was taken")
		}
	})

	t.Run("this-machine", func(t *testing.T) {
		// An agent built from the SDKs' samples names where it listens:
		// localhost, or the unspecified address it binds. Its upstream
		// configured as 127.0.0.1, that is the same machine, any port.
		_, port, _ := net.SplitHostPort(good.addr)
		for i, host := range []string{"localhost", "0.0.0.0"} {
			before := len(good.calls())
			c := serveCard(t, false, cardOf("http://"+net.JoinHostPort(host, port)+"/rpc"))
			u, err := newOriginUpstream(ctx, t, c, &testkit.Buffer{})
			if err != nil {
				t.Fatalf("a card naming %s, read at 127.0.0.1: %v", host, err)
			}
			askThrough(t, p, "origin-local-"+string(rune('a'+i)), u)
			if len(good.calls()) == before {
				t.Errorf("a card naming %s: the agent got no call", host)
			}
		}
		// Read at another host (a container's name, a load balancer's),
		// such a card names where the agent listens, not where it is
		// reached: the bridge calls the interface's path where it read
		// the card, and nothing on this machine's own address.
		remote := startKeyedAgent(t, other)
		_, rport, _ := net.SplitHostPort(remote.addr)
		for i, host := range []string{"localhost", "0.0.0.0"} {
			remote.card.set(t, cardOf("http://"+net.JoinHostPort(host, rport)+"/rpc"))
			before, local := len(remote.calls()), len(good.calls())
			u, log := bridgeTo(ctx, t, "http://"+remote.addr, bridge.WithCredentials(bridge.Credentials{APIKey: originKey}))
			askThrough(t, p, "origin-moved-"+string(rune('a'+i)), u)
			if got := remote.calls()[before:]; len(got) == 0 || got[0] != "Bearer "+originKey {
				t.Errorf("a card read at %s naming %s: the agent there got %q", other, host, got)
			}
			if n := len(good.calls()) - local; n != 0 {
				t.Errorf("a card read at %s naming %s: this machine's 127.0.0.1 got %d calls", other, host, n)
			}
			if want := "http://" + net.JoinHostPort(host, rport) + "/… → http://" + remote.addr + "/…"; !strings.Contains(log.String(), want) {
				t.Errorf("the log does not say the interface moved (%s):\n%s", want, log.String())
			}
		}
	})

	t.Run("https-to-http", func(t *testing.T) {
		before := len(good.calls())
		for _, allow := range []string{"", "127.0.0.1"} {
			c := serveCard(t, true, cardOf(good.rpc))
			_, err := newOriginUpstream(ctx, t, c, &testkit.Buffer{}, a2abridge.WithAllowedHosts(allow))
			if err == nil || !strings.Contains(err.Error(), "https") {
				t.Errorf("allowed %q: an https upstream's http interface: %v", allow, err)
			}
		}
		if n := len(good.calls()) - before; n != 0 {
			t.Errorf("the http interface got %d calls", n)
		}
	})

	t.Run("options", func(t *testing.T) {
		c, _ := bridge.NewClient("http://127.0.0.1:1")
		for _, bad := range []string{"http://x", "x/y", "a b", "x:0", "x:99999", "x:port", ",", "[::1", "user@x"} {
			if _, err := a2abridge.New(ctx, c, a2abridge.WithAllowedHosts(bad)); !errors.Is(err, bridge.ErrInvalidOption) {
				t.Errorf("allowed hosts %q: %v, want ErrInvalidOption", bad, err)
			}
		}
	})
}

// TestCardRefreshOrigin: a card read again (ReadCard, the pool card's
// refresh) that names another host keeps the client on the interface it
// uses, with a warning; the next call goes where the calls went.
func TestCardRefreshOrigin(t *testing.T) {
	t.Parallel()
	ctx, other, evil, good, p := twoHosts(t)
	c := serveCard(t, false, cardOf(good.rpc))
	var log testkit.Buffer
	u, err := newOriginUpstream(ctx, t, c, &log)
	if err != nil {
		t.Fatal(err)
	}
	c.set(t, cardOf(evil.rpc))
	card, err := u.ReadCard(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if card.Name == "" {
		t.Error("the card read again is empty")
	}
	if !strings.Contains(log.String(), "WARN") || !strings.Contains(log.String(), other) {
		t.Errorf("no warning naming %s:\n%s", other, log.String())
	}
	askThrough(t, p, "refresh", u)
	if got := evil.calls(); len(got) != 0 {
		t.Errorf("the other host got %q after the refresh", got)
	}
	if len(good.calls()) == 0 {
		t.Error("the configured host got no call")
	}
}

// TestCardTooLarge: a card over 1 MiB is refused at start (it was read
// whole, 30 MB took the agent to 220 MB), and a card read again that
// grew so is an error the refresh warns of, not read whole.
func TestCardTooLarge(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	good := startKeyedAgent(t, "127.0.0.1")
	big := cardOf(good.rpc)
	big.Description = strings.Repeat("x", 2<<20)
	c := serveCard(t, false, big)
	if _, err := newOriginUpstream(ctx, t, c, &testkit.Buffer{}); err == nil || !strings.Contains(err.Error(), "1 MiB") {
		t.Errorf("a 2 MiB card: %v", err)
	}
	c.set(t, cardOf(good.rpc))
	u, err := newOriginUpstream(ctx, t, c, &testkit.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	c.set(t, big)
	if _, err := u.ReadCard(ctx); err == nil || !strings.Contains(err.Error(), "1 MiB") {
		t.Errorf("a card read again at 2 MiB: %v", err)
	}
	// Without a Content-Length (chunked), the body is cut at the cap too.
	b, _ := json.Marshal(big)
	chunked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(b); i += 64 << 10 {
			_, _ = w.Write(b[i:min(i+64<<10, len(b))])
			w.(http.Flusher).Flush()
		}
	}))
	defer chunked.Close()
	client, _ := bridge.NewClient(chunked.URL)
	if _, err := a2abridge.New(ctx, client); err == nil || !strings.Contains(err.Error(), "1 MiB") {
		t.Errorf("a chunked 2 MiB card: %v", err)
	}
}

// twoHosts starts an agent keeping the keys it is sent on another loopback
// host (evil, on other) and one on 127.0.0.1 (good), and a pipeline; ctx
// ends with the test, within a minute.
func twoHosts(t *testing.T) (ctx context.Context, other string, evil, good *keyedAgent, p *pipetest.Pipeline) {
	t.Helper()
	other = otherHost(t)
	return testCtx(t), other, startKeyedAgent(t, other), startKeyedAgent(t, "127.0.0.1"), pipetest.Start(t)
}
