package a2abridge_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/oauthtest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestTokenSourceBindings: an A2A agent (a2a-go/v2's server) that takes
// only bearer tokens its authorization server (go-oauth2's) issued is
// bridged with a token source of the client-credentials grant, on each
// binding: the card's read, the stream and, on gRPC, every call's
// metadata carry a token (an E2A client asks through the pool), none of the agent's calls is refused. With
// tokens that expire within oauth2's margin, each call asks for one (on
// gRPC too: its per-call credentials, not the request's first token). A
// token the agent refuses (revoked: 401, gRPC's Unauthenticated) is not
// sent again: that request fails, the next gets a new token.
func TestTokenSourceBindings(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t, pipetest.WithGRPC())
	for i, c := range []struct {
		binding a2a.TransportProtocol
		exp     time.Duration
	}{{up.JSONRPC, time.Hour}, {up.HTTPJSON, time.Hour}, {up.GRPC, time.Hour}, {up.GRPC, 5 * time.Second}} {
		name := string(c.binding) + "/" + c.exp.String()
		t.Run(name, func(t *testing.T) {
			as := oauthtest.Start(t, "e2a-bridge", "client-secret-77f2", c.exp)
			srv := up.Start(t, up.Options{Binding: c.binding, Token: as.ValidHeader})
			cfg := &clientcredentials.Config{ClientID: "e2a-bridge", ClientSecret: "client-secret-77f2", TokenURL: as.TokenURL()}
			pool := "oauth-" + string(rune('a'+i))
			p.Pool(pool, newHandler(t, p, pool, srv.BaseURL(), bridge.WithTokenSource(bridge.TokenSourceFunc(func() (*oauth2.Token, error) { return cfg.Token(context.Background()) }))))
			a := p.Ask(t, pool, `{"params":{"text":"stream: `+name+`"}}`)
			if a.Final().ResponseKind != e2a.KindComplete || a.Text(e2a.DeltaText) != up.StreamText(name) {
				t.Errorf("through the agent: %s %q", a.Final().Body, a.Text(e2a.DeltaText))
			}
			calls := srv.Calls()
			for _, call := range calls {
				if call.Refused {
					t.Errorf("the agent refused %s: no valid token", call.Method)
				}
			}
			if len(calls) == 0 {
				t.Fatal("the agent got no call")
			}
			if c.exp < time.Minute && as.Issued() < len(calls) {
				t.Errorf("%d calls with tokens about to expire asked for %d tokens, want one each", len(calls), as.Issued())
			}
			if c.exp < time.Minute {
				return
			}
			// A token the agent refuses (revoked) fails its request; the
			// next request gets a new token.
			issued := as.Issued()
			as.Revoke(t, as.LastValid())
			if a := p.Ask(t, pool, `{"params":{"text":"stream: revoked"}}`); a.Final().ResponseKind == e2a.KindComplete {
				t.Errorf("a request with a revoked token completed")
			}
			a = p.Ask(t, pool, `{"params":{"text":"stream: again"}}`)
			if a.Final().ResponseKind != e2a.KindComplete || as.Issued() != issued+1 {
				t.Errorf("after a refused token: %s, %d tokens issued, want completed with one more than %d", a.Final().Body, as.Issued(), issued)
			}
		})
	}
}

// TestTokenEndpointBusy: a token endpoint that answers 429 with
// Retry-After once the pool is up fails a request with the token's error
// on every binding: upstream_rate_limited, retryable, naming the token
// endpoint (its Retry-After is the Handler's wait). On gRPC the SDK made a
// status of it (the per-call credentials' error), and the request ended
// upstream_unavailable, the Retry-After lost, before the call's
// TokenSlot kept the error.
func TestTokenEndpointBusy(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t, pipetest.WithGRPC())
	for i, binding := range []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON, up.GRPC} {
		t.Run(string(binding), func(t *testing.T) {
			// Tokens within oauth2's expiry margin: each call asks for one.
			as := oauthtest.Start(t, "e2a-bridge", "client-secret-77f2", 5*time.Second)
			srv := up.Start(t, up.Options{Binding: binding, Token: as.ValidHeader})
			cfg := &clientcredentials.Config{ClientID: "e2a-bridge", ClientSecret: "client-secret-77f2", TokenURL: as.TokenURL()}
			pool := "busy-" + string(rune('a'+i))
			p.Pool(pool, newHandler(t, p, pool, srv.BaseURL(), bridge.WithTokenSource(bridge.TokenSourceFunc(func() (*oauth2.Token, error) { return cfg.Token(context.Background()) }))))
			as.SetBusy("1")
			var e struct {
				Code      string `json:"code"`
				Message   string `json:"message"`
				Retryable bool   `json:"retryable"`
			}
			a := p.Ask(t, pool, `{"params":{"text":"stream: busy"}}`)
			if err := json.Unmarshal(a.Final().Body, &e); err != nil || a.Final().ResponseKind != e2a.KindError {
				t.Fatalf("final %s %s (%v), want an error", a.Final().ResponseKind, a.Final().Body, err)
			}
			if e.Code != bridge.CodeRateLimited || !e.Retryable || !strings.Contains(e.Message, "OAuth 2.0 token endpoint") {
				t.Errorf("error %+v; want %s, retryable, naming the token endpoint", e, bridge.CodeRateLimited)
			}
			as.SetBusy("")
			if a := p.Ask(t, pool, `{"params":{"text":"stream: again"}}`); a.Final().ResponseKind != e2a.KindComplete {
				t.Errorf("with the endpoint serving again: %s", a.Final().Body)
			}
		})
	}
}

// TestGRPCSlowTokenRetried: a gRPC call whose token comes later than the
// idle timeout was never sent: it is retried (and completes), not taken
// for a message the agent got and left unanswered (the idle watch began
// before the per-call credentials asked for the token, and any idle
// timeout before a first event counted as sent). The margins (a 1-s idle
// timeout, a token 2.5 s late) hold under -race on a loaded machine: with
// 0.3 and 0.6 s the call's cancel and the retry's send did not always fit
// (the retry timed out, or the first call's stream went out after its
// cancel: the agent ran the message twice).
func TestGRPCSlowTokenRetried(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.GRPC})
	p := pipetest.Start(t)
	var slow atomic.Bool
	ts := bridge.TokenSourceFunc(func() (*oauth2.Token, error) {
		if slow.CompareAndSwap(true, false) {
			<-time.After(2500 * time.Millisecond) // the token endpoint, slow once
		}
		// Tokens within oauth2's expiry margin: each call asks for one.
		return &oauth2.Token{AccessToken: "grpc-token", TokenType: "Bearer", Expiry: time.Now().Add(5 * time.Second)}, nil
	})
	p.Pool("agent", newHandler(t, p, "agent", srv.BaseURL(), bridge.WithIdleTimeout(time.Second), bridge.WithTokenSource(ts)))
	slow.Store(true)
	a := p.Ask(t, "agent", `{"params":{"text":"stream: hi"}}`)
	if a.Final().ResponseKind != e2a.KindComplete {
		t.Errorf("final %s %s; want complete (the message was not sent: a retry is safe)", a.Final().ResponseKind, a.Final().Body)
	}
	if n := len(srv.Executions()); n != 1 {
		t.Errorf("the agent ran the message %d times, want once", n)
	}
}
