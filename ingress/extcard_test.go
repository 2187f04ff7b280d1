package ingress_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// optionalAliceAndBob is authentication with API keys for alice and bob
// and the anonymous caller allowed (the none scheme too); bob has the
// audit role.
func optionalAliceAndBob(t *testing.T) *ingress.Auth {
	t.Helper()
	a, err := ingress.NewAuth(&ingress.AuthConfig{Schemes: []string{ingress.SchemeNone, "apiKey"},
		APIKeys: []ingress.Credential{{Principal: "alice", Secret: testKey}, {Principal: "bob", Secret: bobKey}},
		Roles:   map[string][]string{"bob": {"audit"}}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// principalOf is the principal extension's params of an extended card.
func principalOf(card *a2a.AgentCard) map[string]any {
	for _, e := range card.Capabilities.Extensions {
		if e.URI == ingress.PrincipalExtension {
			return e.Params
		}
	}
	return nil
}

var v1Bindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC}

// bindingURL is the URL of binding in card.
func bindingURL(t *testing.T, card *a2a.AgentCard, binding a2a.TransportProtocol) string {
	t.Helper()
	i := slices.IndexFunc(card.SupportedInterfaces, func(i *a2a.AgentInterface) bool {
		return i.ProtocolBinding == binding && i.ProtocolVersion == a2a.Version
	})
	if i < 0 {
		t.Fatalf("the card lists no %s interface", binding)
	}
	return card.SupportedInterfaces[i].URL
}

// TestExtendedAgentCard: the public cards declare the extended card (v1.0
// capabilities.extendedAgentCard, v0.3 supportsAuthenticatedExtendedCard);
// with the a2a-go/v2 client on JSON-RPC, HTTP+JSON and gRPC,
// GetExtendedAgentCard answers alice and bob each their own principal
// (user id, roles: bob's audit) and nothing of the other, with the pools
// and the card's interfaces; the anonymous caller of optional
// authentication is refused as unauthenticated on the three bindings and
// on v0.3's agent/getAuthenticatedExtendedCard, which answers alice the
// card of both generations.
func TestExtendedAgentCard(t *testing.T) {
	p, _ := startGRPCPipeline(t, ingress.WithAuth(optionalAliceAndBob(t)))
	ctx := tckCtx(t)
	card, err := agentcard.DefaultResolver.Resolve(ctx, p.url+ingress.A2AV1Path)
	if err != nil {
		t.Fatal(err)
	}
	if !card.Capabilities.ExtendedAgentCard {
		t.Fatalf("the v1.0 card does not declare the extended card: %+v", card.Capabilities)
	}
	for _, binding := range v1Bindings {
		t.Run(string(binding), func(t *testing.T) {
			_, c := v1Client(t, p, binding) // from the card of both generations
			for who, key := range map[string]string{"alice": testKey, "bob": bobKey} {
				kctx := a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{"x-api-key": {key}})
				ext, err := c.GetExtendedAgentCard(kctx, &a2a.GetExtendedAgentCardRequest{})
				if err != nil {
					t.Fatalf("%s: GetExtendedAgentCard: %v", who, err)
				}
				pr := principalOf(ext)
				if pr["principal"] != who || len(ext.SupportedInterfaces) == 0 || ext.Name != card.Name {
					t.Fatalf("%s: extended card's principal %v, %d interfaces, name %q", who, pr, len(ext.SupportedInterfaces), ext.Name)
				}
				b, _ := json.Marshal(ext)
				other := map[string]string{"alice": "bob", "bob": "alice"}[who]
				if strings.Contains(string(b), `"`+other+`"`) {
					t.Fatalf("%s's extended card names %s: %s", who, other, b)
				}
				roles, _ := pr["roles"].([]any)
				if (who == "bob") != slices.Contains(roles, any("audit")) {
					t.Fatalf("%s's roles %v", who, roles)
				}
			}
			_, err := c.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{})
			if !errors.Is(err, a2a.ErrUnauthenticated) {
				t.Fatalf("anonymous GetExtendedAgentCard: %v, want unauthenticated", err)
			}
		})
	}

	resp, b := do(t, "GET", p.url+"/.well-known/agent-card.json", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"supportsAuthenticatedExtendedCard":true`) {
		t.Fatalf("the v0.3 card does not declare the extended card: %d %s", resp.StatusCode, b)
	}
	call := `{"jsonrpc":"2.0","id":"c1","method":"agent/getAuthenticatedExtendedCard"}`
	resp, b = do(t, "POST", p.url+"/a2a", call, "Content-Type", "application/json", "X-Api-Key", testKey)
	var v03 struct {
		Result struct {
			URL          string
			Capabilities struct{ Extensions []a2a.AgentExtension }
		}
	}
	if err := json.Unmarshal(b, &v03); err != nil || resp.StatusCode != http.StatusOK || v03.Result.URL != p.url+"/a2a" ||
		!slices.ContainsFunc(v03.Result.Capabilities.Extensions, func(e a2a.AgentExtension) bool {
			return e.URI == ingress.PrincipalExtension && e.Params["principal"] == "alice"
		}) {
		t.Fatalf("v0.3 extended card for alice: %d %s", resp.StatusCode, b)
	}
	resp, b = do(t, "POST", p.url+"/a2a", call, "Content-Type", "application/json")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"id":"c1"`) || !strings.Contains(string(b), `"code":-32007`) {
		t.Fatalf("anonymous v0.3 extended card: %d %s", resp.StatusCode, b)
	}
}

// TestExtendedAgentCardOpen: with authentication off, the v1.0 card
// declares the extended card and GetExtendedAgentCard serves it to every
// caller (the card declares no security scheme to authenticate with: the
// v1.0 TCK's CARD-EXT-001), while v0.3, whose method its TCK requires to
// refuse a call without credentials, declares no authenticated extended
// card and answers -32007.
func TestExtendedAgentCardOpen(t *testing.T) {
	p := startPipeline(t)
	ctx := tckCtx(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ext, err := c.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{})
	if err != nil || principalOf(ext) == nil {
		t.Fatalf("GetExtendedAgentCard without auth: %+v, %v", ext, err)
	}
	resp, b := do(t, "GET", p.url+"/.well-known/agent-card.json", "")
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `supportsAuthenticatedExtendedCard`) || !strings.Contains(string(b), `"extendedAgentCard":true`) {
		t.Fatalf("card of both generations without auth: %d %s", resp.StatusCode, b)
	}
	_, b = do(t, "POST", p.url+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}`, "Content-Type", "application/json")
	if !strings.Contains(string(b), `"code":-32007`) {
		t.Errorf("v0.3 agent/getAuthenticatedExtendedCard without auth: %s", b)
	}
}

// TestExtendedAgentCardOff: with WithExtendedCard(false) no card declares
// it, and GetExtendedAgentCard is UnsupportedOperationError (§3.3.4):
// JSON-RPC -32004, HTTP+JSON 400, gRPC UNIMPLEMENTED (§5.4); v0.3's
// agent/getAuthenticatedExtendedCard is -32007.
func TestExtendedAgentCardOff(t *testing.T) {
	p, addr := startGRPCPipeline(t, ingress.WithExtendedCard(false))
	ctx := tckCtx(t)
	card, err := agentcard.DefaultResolver.Resolve(ctx, p.url+ingress.A2AV1Path)
	if err != nil || card.Capabilities.ExtendedAgentCard {
		t.Fatalf("card %+v (%v): declares the extended card", card, err)
	}
	declared := *card
	declared.Capabilities.ExtendedAgentCard = true // the client asks only then
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
		c := clientAt(t, &declared, binding, bindingURL(t, card, binding))
		if _, err := c.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{}); !errors.Is(err, a2a.ErrUnsupportedOperation) {
			t.Errorf("%s: GetExtendedAgentCard: %v, want UnsupportedOperation", binding, err)
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_, err = a2apb.NewA2AServiceClient(conn).GetExtendedAgentCard(ctx, &a2apb.GetExtendedAgentCardRequest{})
	if code, reason := grpcStatus(err); code != codes.Unimplemented || reason != "UNSUPPORTED_OPERATION" {
		t.Errorf("gRPC GetExtendedAgentCard: %s %s (%v)", code, reason, err)
	}
	_, b := do(t, "POST", p.url+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}`, "Content-Type", "application/json")
	if !strings.Contains(string(b), `"code":-32007`) {
		t.Errorf("v0.3 agent/getAuthenticatedExtendedCard: %s", b)
	}
}
