package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestPoolCardBehindProxy: a pool's card read through a reverse
// proxy (X-Forwarded-Proto, -Host, -Prefix) names the proxy's URLs for
// every interface, the pool's own path under the prefix, and declares the
// pipeline's security schemes.
func TestPoolCardBehindProxy(t *testing.T) {
	t.Parallel()
	auth := pipetest.KeyAuth(t, map[string]string{"alice": "ak_cards_alice_0123456789"}, nil)
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithAuth(auth)))
	p.Pool("echo", whoAmI("echo"))
	ctx := context.Background()
	conv, err := bridge.OpenConversations(ctx, p.JS, streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := conv.PublishPool(ctx, bridge.PoolInfo{Pool: "echo", Kind: "a2a", Upstream: "http://upstream.example",
		Name: "Echo Agent", Description: "Echoes.", Streaming: true}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/pools/echo/.well-known/agent-card.json", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("X-Forwarded-Host", "agents.test")
	req.Header.Set("X-Forwarded-Prefix", "/gw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&card); err != nil {
		t.Fatal(err)
	}
	const want = "https://agents.test/gw/pools/echo/"
	if u, _ := card["url"].(string); !strings.HasPrefix(u, want) {
		t.Errorf("v0.3 url %q, want under %s", u, want)
	}
	ifaces, _ := card["supportedInterfaces"].([]any)
	for _, i := range ifaces {
		m, _ := i.(map[string]any)
		if u, _ := m["url"].(string); m["protocolBinding"] != "GRPC" && !strings.HasPrefix(u, want) {
			t.Errorf("interface %v %q, want under %s", m["protocolBinding"], u, want)
		}
	}
	if len(ifaces) == 0 || card["securitySchemes"] == nil || card["securityRequirements"] == nil || card["name"] != "Echo Agent" {
		t.Errorf("card: %d interfaces, schemes %v, requirements %v, name %v", len(ifaces), card["securitySchemes"], card["securityRequirements"], card["name"])
	}
}
