package a2abridge_test

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestRedirectNotFollowed: an A2A agent whose card, or whose HTTP+JSON
// or JSON-RPC interface, answers with a redirect (307) to another host
// (127.0.0.2, which serves a card naming itself and records every request
// it gets) is not followed there: the bridge's start fails on the card,
// and a call ends upstream_rejected, not retryable (a redirect is the
// answer: the same call would get it again). The other host gets no
// request. The bridge's transport sets its credentials on every request
// it sends, a redirect's too: followed, the API key and headers would go
// wherever the agent pointed (net/http's own dropping of Authorization
// on another host would not apply to them). An interface that answers
// 101 Switching Protocols and holds its connection ends the call so too,
// at once (bridge.TestSwitchingProtocolsAnswer). On HTTP+JSON a2a-go read
// both as the agent's server error: upstream_unavailable, retried.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	creds := bridge.WithCredentials(bridge.Credentials{APIKey: originKey, Headers: map[string]string{"X-Api-Key": "hdr-origin-secret-77"}})

	// elsewhere records the requests it gets, their path and headers.
	var mu sync.Mutex
	var got []string
	ln, err := net.Listen("tcp", net.JoinHostPort(otherHost(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := "http://" + ln.Addr().String()
	card := a2asrv.NewStaticAgentCardHandler(cardOf(elsewhere + "/rpc"))
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+" Authorization="+r.Header.Get("Authorization")+" X-Api-Key="+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		card.ServeHTTP(w, r)
	})}
	go func() { _ = other.Serve(ln) }()
	t.Cleanup(func() { _ = other.Close() })
	noneElsewhere := func(t *testing.T) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(got) > 0 {
			t.Fatalf("the other host got %d requests: %q", len(got), got)
		}
	}

	// serve serves an agent on 127.0.0.1: at the card's path card (nil:
	// a card naming its /api interface of binding), at /api a redirect to
	// the other host.
	serve := func(card http.Handler, binding a2a.TransportProtocol, answer http.Handler) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String()
		if card == nil {
			card = a2asrv.NewStaticAgentCardHandler(testCard(a2a.NewAgentInterface(base+"/api", binding), true))
		}
		mux := http.NewServeMux()
		mux.Handle(a2asrv.WellKnownAgentCardPath, card)
		mux.Handle("/", answer)
		srv := &http.Server{Handler: mux}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		return base
	}

	t.Run("card", func(t *testing.T) {
		base := serve(http.RedirectHandler(elsewhere+a2asrv.WellKnownAgentCardPath, http.StatusTemporaryRedirect), "",
			http.RedirectHandler(elsewhere+"/rpc", http.StatusTemporaryRedirect))
		client, err := bridge.NewClient(base, creds)
		if err != nil {
			t.Fatal(err)
		}
		if u, err := a2abridge.New(ctx, client); err == nil {
			_ = u.Close()
			t.Error("the bridge started on a card that redirects to another host")
		}
		noneElsewhere(t)
	})
	switching := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { testkit.SwitchProtocols(w) })
	for _, c := range []struct {
		name   string
		answer http.Handler
	}{{"redirect", http.RedirectHandler(elsewhere+"/rpc", http.StatusTemporaryRedirect)}, {"switching protocols", switching}} {
		for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolJSONRPC} {
			t.Run(c.name+"/"+string(binding), func(t *testing.T) {
				p := pipetest.Start(t)
				p.Pool("agent", newRetryingHandler(t, p, "agent", serve(nil, binding, c.answer),
					bridge.WithRetry(2, 5*time.Millisecond, 20*time.Millisecond), creds, bridge.WithIdleTimeout(2*time.Second)))
				a := p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
				if code, retryable := a.ErrorCode(); code != bridge.CodeRejected || retryable {
					t.Errorf("final frame %s (%s, retryable %v), want upstream_rejected, not retryable", kindOf(a.Final()), code, retryable)
				}
				noneElsewhere(t)
			})
		}
	}
}
